"""The Python interface: load, evaluate, solve, pareto, verify, results_frame.

    import geotrain_opt as gt
    inst = gt.load_instance("instances/demo-8gpu.yaml")
    res = gt.solve(inst, "memetic", time_limit=10, seed=0, population=60)
    print(res.status, res.evaluation.time_s, res.plan.grid)

Every solver takes the same arguments and returns the same :class:`SolverResult`;
solver-specific options are keyword arguments (or ``options=MemeticOptions(...)``,
the solver's typed dataclass) checked against what that solver takes
(``solvers.spec(name).options``), so a misspelt option is an error, not ignored.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from geotrain_opt import solvers
from geotrain_opt.problem.instance import Instance, load_instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult


def _instance(inst: Instance | str | Path) -> Instance:
    return inst if isinstance(inst, Instance) else load_instance(inst)


def _options(solver: str, time_limit: float, seed: int, workers: int, hint: Plan | None, progress: bool,
             options: dict[str, Any]) -> solvers.SolveOptions:
    typed = options.pop("options", None)          # a typed options object, keywords on top
    return solvers.build_options(solver, options, options=typed, time_limit_s=float(time_limit), seed=int(seed),
                                 workers=int(workers), hint=hint, progress=progress)


def solve(inst: Instance | str | Path, solver: str = "memetic", *, time_limit: float = 60.0, seed: int = 0,
          workers: int = 2, hint: Plan | None = None, progress: bool = False, exportable: str | None = None,
          **options: Any) -> SolverResult:
    """Best plan ``solver`` finds within ``time_limit`` seconds, the whole call's (loading a
    path and the bound included; ``"optimal"`` status: proven);
    ``best_bound``/``gap``: a certified lower bound (geotrain_opt/bounds/, or the exact solver's
    own) and how far at most the plan is from optimal. ``exportable`` ("megatron",
    "deepspeed", "torch"): a plan that framework runs (``stats["exportable"]``: its cost)."""
    import time
    from geotrain_opt.solvers.budget import whole_limit
    started = time.perf_counter()
    inst = _instance(inst)
    # the call's wall time, loading and the bound included, as the CLI's --time-limit
    limit, until = whole_limit(float(time_limit), started)
    res = solvers.run(solver, inst, _options(solver, limit, seed, workers, hint, progress, options),
                      until, exportable=exportable, started=started)
    res.stats["command_time_limit_s"] = float(time_limit)
    return res


def pareto(inst: Instance | str | Path, solver: str = "cpsat", *, points: int = 50, time_limit: float = 60.0,
           seed: int = 0, workers: int = 2, objectives: tuple[str, str] = ("time", "energy"),
           **options: Any) -> SolverResult:
    """Pareto front of two of time, energy, cost, carbon (default time-energy): exact
    ε-constraint walk (cpsat, milp, bruteforce) or NSGA-II (memetic); the points are
    ``result.pareto``, each a full result."""
    from geotrain_opt.analysis.fronts import pareto_front
    inst = _instance(inst)
    return pareto_front(inst, solver, _options(solver, time_limit, seed, workers, None, False, options), points,
                        tuple(objectives))


def verify(instances: Iterable[Instance | str | Path] | Instance | str | Path,
           names: Iterable[str] = ("memetic", "cpsat", "milp"), *, time_limit: float = 60.0, seed: int = 0,
           options: dict[str, dict[str, Any]] | None = None) -> list:
    """Run the solvers on each instance, re-evaluate every plan, cross-check the proofs;
    returns one :class:`~geotrain_opt.analysis.verifier.Verification` per instance (``.ok``, ``.inconsistencies``)."""
    from geotrain_opt.analysis.verifier import verify_instance
    if isinstance(instances, (Instance, str, Path)):
        instances = [instances]
    return [verify_instance(_instance(i), list(names), time_limit, seed, options) for i in instances]


def results_frame(source: str | Path | Iterable[dict[str, Any]] | Iterable[SolverResult]):
    """A pandas DataFrame of benchmark rows (a bench JSONL path or rows) or of results,
    one row per run, with the provenance flattened into ``version_*``/``commit``/``host`` columns."""
    try:
        import pandas as pd
    except ImportError:
        from geotrain_opt.errors import GeoTrainError
        raise GeoTrainError("results_frame: pandas is not installed (pip install pandas)") from None
    if isinstance(source, (str, Path)):
        from geotrain_opt.analysis.report import load_rows
        rows = load_rows(source)
    else:
        rows = [_row(r) if isinstance(r, SolverResult) else dict(r) for r in source]
    flat = []
    for r in rows:
        r = dict(r)
        prov = r.pop("provenance", None) or {}
        for name, v in (prov.get("versions") or {}).items():
            r[f"version_{name}"] = v
        for k in ("commit", "host", "python", "time_utc"):
            r[k] = prov.get(k)
        flat.append(r)
    return pd.DataFrame(flat)


def _row(res: SolverResult) -> dict[str, Any]:
    ev = res.evaluation
    return {"solver": res.solver, "status": res.status, "objective": res.objective,
            "objective_value": res.objective_value, "best_bound": res.best_bound, "gap": res.gap,
            "time_s": ev.time_s if ev else None, "energy_j": ev.energy_j if ev else None, "seed": res.seed,
            "wall_s": res.wall_s, "devices_used": len(res.plan.devices) if res.plan else None,
            "plan": res.plan.to_dict() if res.plan else None, "provenance": res.provenance}
