"""geotrain_opt: plan foundation-model training on heterogeneous, geo-distributed GPUs.

The public interface (see :mod:`geotrain_opt.api`)::

    import geotrain_opt as gt
    inst = gt.load_instance("instances/demo-8gpu.yaml")
    res = gt.solve(inst, "cpsat", time_limit=30)          # status "optimal": proven
    ev = gt.evaluate(inst, res.plan)                        # the cost model, from scratch
"""
from typing import Any

from geotrain_opt.errors import GeoTrainError, InstanceError, PlanError, SolverError

# The rest is imported on first use (PEP 562), so that ``geotrain-opt`` reaches its
# own Ctrl-C handling before numpy and the solvers load (issue 39: an interrupt in
# the first 0.6 s printed a raw traceback).
_LAZY = {
    "pareto": "geotrain_opt.api", "results_frame": "geotrain_opt.api", "solve": "geotrain_opt.api",
    "verify": "geotrain_opt.api", "BatchEvaluator": "geotrain_opt.cost.evaluator",
    "Evaluation": "geotrain_opt.cost.evaluator", "evaluate": "geotrain_opt.cost.evaluator",
    "Instance": "geotrain_opt.problem.instance", "instance_from_dict": "geotrain_opt.problem.instance",
    "load_instance": "geotrain_opt.problem.instance", "Plan": "geotrain_opt.problem.plan",
    "SolverResult": "geotrain_opt.solvers.result",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":     # importlib.metadata takes a while: not on the CLI's way in
        globals()[name] = _package_version()
        return globals()[name]
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'geotrain_opt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("geotrain-opt")
    except PackageNotFoundError:      # running from a source tree that was never installed
        return "0.1.0"

__all__ = ["BatchEvaluator", "Evaluation", "GeoTrainError", "Instance", "InstanceError", "Plan",
           "PlanError", "SolverError", "SolverResult", "evaluate", "instance_from_dict", "load_instance",
           "pareto", "results_frame", "solve", "verify"]
