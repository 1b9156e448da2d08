"""Pareto fronts of any two metrics (time, energy, cost, carbon) by ε-constraint sweeps.

Walk from the best plan in the first metric towards the best in the second: each
step minimises the first subject to the second strictly below the previous
point's, so every point is proven optimal for its ε, and the walk, run to the
end, visits every non-dominated value pair of the instance. (T, E) by default.
"""
from __future__ import annotations

import time
from dataclasses import replace

from geotrain_opt import solvers
from geotrain_opt.errors import SolverError
from geotrain_opt.problem.instance import Instance
from geotrain_opt.errors import InstanceError
from geotrain_opt.cost.objective import DEFAULT_FRONT, LIMIT, METRIC, pareto_filter
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.result import Status

# next ε = E_prev * (1 - STEP): points closer than this in energy count as one
STEP = 1e-5


def pareto_front(inst: Instance, solver: str, opts: SolveOptions, points: int = 50,
                 objectives: tuple[str, str] = DEFAULT_FRONT) -> SolverResult:
    """The front of ``solver`` over two metrics of ``objectives`` (time, energy, cost,
    carbon); ``stats`` gets its hypervolume (moocore) under the reference point 1.1 x
    its nadir, and ``front``, the two metrics."""
    objectives = check_objectives(inst, objectives)
    res = _front(inst, solver, opts, points, objectives)
    res.stats["front"] = list(objectives)
    pts = front_points(res)
    if pts:
        from geotrain_opt.analysis.indicators import summary
        res.stats.update(summary(pts))
    return res


def check_objectives(inst: Instance, objectives) -> tuple[str, str]:
    """Two different metrics the instance can measure (one-line errors otherwise)."""
    objectives = tuple(objectives)
    if len(objectives) != 2 or objectives[0] == objectives[1] or any(m not in METRIC for m in objectives):
        raise SolverError(f"pareto: objectives must be two different of {', '.join(METRIC)}, got {list(objectives)}")
    for m in objectives:
        if (m == "cost" and not inst.priced) or (m == "carbon" and not inst.carbon_priced):
            raise InstanceError("objective.kind", f"a front over {m} needs the instance to price it "
                                                  "(formulations/model.md §9)")
    return objectives  # type: ignore[return-value]


def front_points(res: SolverResult) -> list[tuple[float, float]]:
    """The front's value pairs, in its metrics (``stats["front"]``; T and E by default)."""
    a, b = (METRIC[m] for m in res.stats.get("front", DEFAULT_FRONT))
    return [(getattr(r.evaluation, a), getattr(r.evaluation, b)) for r in res.pareto if r.evaluation is not None]


def _front(inst: Instance, solver: str, opts: SolveOptions, points: int,
           objectives: tuple[str, str] = DEFAULT_FRONT) -> SolverResult:
    first, second = objectives
    a, b = METRIC[first], METRIC[second]
    start = time.perf_counter()
    solvers.check_options(solver, opts.extra)
    mode = solvers.spec(solver).pareto
    if mode is None:
        raise SolverError(f"pareto: solver {solver!r} has no Pareto mode "
                          f"(use {', '.join(solvers.names(pareto=True))})")
    if mode == "native":
        # the solver returns its own front; the run is on a copy of the caller's options
        extra = dict(opts.extra, pareto=True)
        if objectives != DEFAULT_FRONT:
            extra["front"] = list(objectives)
        res = solvers.get(solver)(inst.with_options(kind=first), replace(opts, extra=extra))
        res.objective = "pareto"
        res.pareto = res.pareto[:points] if points else res.pareto
        return res
    solve = solvers.get(solver)
    front: list[SolverResult] = []
    status = Status.OPTIMAL
    cap = getattr(inst.objective, LIMIT[second])
    total = opts.time_limit_s
    while len(front) < points:
        left = total - (time.perf_counter() - start)
        if left <= 0:
            status = Status.TIME_LIMIT
            break
        sub = SolveOptions(time_limit_s=left, seed=opts.seed, workers=opts.workers, extra=dict(opts.extra))
        res = solve(inst.with_options(kind=first, **{LIMIT[second]: cap}), sub)
        if res.plan is None:
            if res.status != Status.INFEASIBLE:
                status = Status.TIME_LIMIT
            break
        if res.status != Status.OPTIMAL:
            status = Status.TIME_LIMIT
        front.append(res)
        cap = getattr(res.evaluation, b) * (1 - STEP)
    else:
        status = Status.PARTIAL   # stopped at the requested number of points
    keep = pareto_filter([(getattr(r.evaluation, a), getattr(r.evaluation, b)) for r in front])
    out = SolverResult(solver=solver, status=status, plan=front[0].plan if front else None,
                       evaluation=front[0].evaluation if front else None, objective="pareto",
                       seed=opts.seed, wall_s=time.perf_counter() - start, settings=opts.settings(),
                       pareto=[front[i] for i in keep])
    return out
