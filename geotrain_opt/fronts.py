"""Exact time-energy Pareto fronts by ε-constraint sweeps.

Walk from the fastest plan towards the most frugal one: each step minimises T
(ties broken by E) subject to E strictly below the previous point's energy, so
every point is proven optimal for its ε, and the walk, run to the end, visits
every non-dominated (T, E) value of the instance.
"""
from __future__ import annotations

import time
from dataclasses import replace

from . import solvers
from .errors import SolverError
from .instance import Instance
from .objective import pareto_filter
from .result import SolverResult
from .solvers.base import SolveOptions

# next ε = E_prev * (1 - STEP): points closer than this in energy count as one
STEP = 1e-5


def pareto_front(inst: Instance, solver: str, opts: SolveOptions, points: int = 50) -> SolverResult:
    """The front of ``solver``; ``stats`` gets its hypervolume (moocore) under the
    reference point 1.1 x its nadir."""
    res = _front(inst, solver, opts, points)
    pts = front_points(res)
    if pts:
        from .indicators import summary
        res.stats.update(summary(pts))
    return res


def front_points(res: SolverResult) -> list[tuple[float, float]]:
    return [(r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto if r.evaluation is not None]


def _front(inst: Instance, solver: str, opts: SolveOptions, points: int) -> SolverResult:
    start = time.perf_counter()
    solvers.check_options(solver, opts.extra)
    mode = solvers.spec(solver).pareto
    if mode is None:
        raise SolverError(f"pareto: solver {solver!r} has no Pareto mode "
                          f"(use {', '.join(solvers.names(pareto=True))})")
    if mode == "native":
        # the solver returns its own front; the run is on a copy of the caller's options
        res = solvers.get(solver)(inst.with_options(kind="time"), replace(opts, extra=dict(opts.extra, pareto=True)))
        res.objective = "pareto"
        res.pareto = res.pareto[:points] if points else res.pareto
        return res
    solve = solvers.get(solver)
    front: list[SolverResult] = []
    status = "optimal"
    cap = inst.objective.max_energy_j
    total = opts.time_limit_s
    while len(front) < points:
        left = total - (time.perf_counter() - start)
        if left <= 0:
            status = "time_limit"
            break
        sub = SolveOptions(time_limit_s=left, seed=opts.seed, workers=opts.workers, extra=dict(opts.extra))
        res = solve(inst.with_options(kind="time", max_energy_j=cap), sub)
        if res.plan is None:
            if res.status != "infeasible":
                status = "time_limit"
            break
        if res.status != "optimal":
            status = "time_limit"
        front.append(res)
        cap = res.evaluation.energy_j * (1 - STEP)
    else:
        status = "partial"   # stopped at the requested number of points
    keep = pareto_filter([(r.evaluation.time_s, r.evaluation.energy_j) for r in front])
    out = SolverResult(solver=solver, status=status, plan=front[0].plan if front else None,
                       evaluation=front[0].evaluation if front else None, objective="pareto",
                       seed=opts.seed, wall_s=time.perf_counter() - start, settings=opts.settings(),
                       pareto=[front[i] for i in keep])
    return out
