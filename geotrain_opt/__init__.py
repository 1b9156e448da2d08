"""geotrain_opt: plan foundation-model training on heterogeneous, geo-distributed GPUs.

The public interface (see :mod:`geotrain_opt.api`)::

    import geotrain_opt as gt
    inst = gt.load_instance("instances/demo-8gpu.yaml")
    res = gt.solve(inst, "cpsat", time_limit=30)          # status "optimal": proven
    ev = gt.evaluate(inst, res.plan)                        # the cost model, from scratch
"""
from geotrain_opt.api import pareto, results_frame, solve, verify
from geotrain_opt.errors import GeoTrainError, InstanceError, PlanError, SolverError
from geotrain_opt.cost.evaluator import BatchEvaluator, Evaluation, evaluate
from geotrain_opt.problem.instance import Instance, instance_from_dict, load_instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult

try:
    from importlib.metadata import PackageNotFoundError, version as _version
    __version__ = _version("geotrain-opt")
except PackageNotFoundError:      # running from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = ["BatchEvaluator", "Evaluation", "GeoTrainError", "Instance", "InstanceError", "Plan",
           "PlanError", "SolverError", "SolverResult", "evaluate", "instance_from_dict", "load_instance",
           "pareto", "results_frame", "solve", "verify"]
