"""Brute force: every plan up to ring rotation, through the batched evaluator.

Ground truth for tests on tiny instances. Rotating the replicas of a plan (and its
split with them) gives the same ring edges and the same costs, so only grids whose
replica 0 holds the smallest stage-0 device are enumerated; nothing else is
pruned.
"""
from __future__ import annotations

import itertools

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.construct.pieces import feasible_shapes, plan_count
from geotrain_opt.errors import SolverError
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import Deadline, SolveOptions, finish
from geotrain_opt.solvers.options import BruteforceOptions
from geotrain_opt.solvers.result import Status

CHUNK = 100_000


def splits(inst: Instance, D: int) -> np.ndarray:
    M = inst.model.num_micro_batches
    if inst.options.batch_split == "uniform":
        return np.full((1, D), M // D, dtype=np.int64)
    # compositions of M into D positive parts: choose D-1 bars among M-1 gaps
    rows = [np.diff([0, *bars, M]) for bars in itertools.combinations(range(1, M), D - 1)]
    return np.array(rows, dtype=np.int64).reshape(-1, D)


def _grids(n: int, D: int, P: int) -> np.ndarray:
    perms = np.array(list(itertools.permutations(range(n), D * P)), dtype=np.int64).reshape(-1, D, P)
    if D > 1:
        keep = (perms[:, :1, 0] < perms[:, 1:, 0]).all(axis=1)
        perms = perms[keep]
    return perms


def enumerate_shape(inst: Instance, D: int, P: int):
    """Yield (grid, cuts, mb, clk) chunks covering every plan of shape (D, P); ``clk``
    (the clock level of every slot, §10) is None when no device has lower clocks."""
    L = inst.model.layers
    grids = _grids(inst.n, D, P)
    cuts = np.array([[0, *c, L] for c in itertools.combinations(range(1, L), P - 1)], dtype=np.int64)
    sp = splits(inst, D)
    a = inst.arrays
    # index space: grid x cut x split, walked in chunks
    total = len(grids) * len(cuts) * len(sp)
    for start in range(0, total, CHUNK):
        idx = np.arange(start, min(total, start + CHUNK))
        gi, rest = np.divmod(idx, len(cuts) * len(sp))
        ci, si = np.divmod(rest, len(sp))
        if not a.has_clocks:
            yield grids[gi], cuts[ci], sp[si], None
            continue
        levels = a.n_levels[grids[gi]]
        for combo in itertools.product(range(int(a.n_levels.max())), repeat=D * P):
            clk = np.array(combo, dtype=np.int64).reshape(D, P)
            ok = (clk[None] < levels).all(axis=(1, 2))
            if ok.any():
                yield grids[gi][ok], cuts[ci][ok], sp[si][ok], np.broadcast_to(clk, (int(ok.sum()), D, P))


def shape_optimum(inst: Instance, D: int, P: int, ev: BatchEvaluator | None = None) -> float:
    """The least primary objective over every acceptable plan of shape (D, P) (inf if
    none): the ground truth the shape bounds are checked against."""
    ev = ev or BatchEvaluator(inst)
    best = np.inf
    for grid, cuts, mb, clk in enumerate_shape(inst, D, P):
        r = ev(grid, cuts, mb, clk)
        v = np.where(r.acceptable, objmod.primary(inst.objective, r.time_s, r.energy_j), np.inf)
        best = min(best, float(v.min()))
    return best


def clocks_of(inst: Instance, grid: np.ndarray, clk: np.ndarray | None) -> dict[str, float] | None:
    """The plan's ``clocks`` from slot levels (None: all at full clock)."""
    if clk is None:
        return None
    return {inst.ids[g]: inst.devices[g].levels[c][0] for g, c in zip(grid.ravel(), clk.ravel()) if c}


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    count = plan_count(inst)
    if count > opts.max_plans:
        raise SolverError(f"bruteforce: instance {inst.name} has {count:,} plans, over the limit of "
                          f"{opts.max_plans:,}; use --solver cpsat or milp")
    deadline = Deadline(opts.time_limit_s)
    ev = BatchEvaluator(inst)
    obj = inst.objective
    best_key: tuple[float, float] | None = None
    best_plan: Plan | None = None
    status = Status.OPTIMAL
    front: list[tuple[float, float, Plan]] = []
    bo = opts.typed(BruteforceOptions, "bruteforce")
    want_front, metrics = bo.pareto, [objmod.METRIC[m] for m in bo.front]
    for D, P in feasible_shapes(inst):
        for grid, cuts, mb, clk in enumerate_shape(inst, D, P):
            if deadline.expired:
                status = Status.TIME_LIMIT
                break
            res = ev(grid, cuts, mb, clk)
            ok = np.flatnonzero(res.acceptable)
            if ok.size == 0:
                continue
            T, E = (getattr(res, m)[ok] for m in metrics)      # the front's pair (T and E by default)
            if want_front:
                for i in objmod.pareto_filter(list(zip(T.tolist(), E.tolist()))):
                    r = ok[i]
                    front.append((float(T[i]), float(E[i]), Plan.from_indices(
                        inst.ids, grid[r], cuts[r], mb[r], clocks_of(inst, grid[r], None if clk is None else clk[r]))))
            p, s = (np.asarray(v, dtype=float)[ok] for v in objmod.of(obj, res))
            pmin = p.min()
            ties = np.flatnonzero(p <= pmin * (1 + objmod.TIE_RTOL))
            i = ties[np.argmin(s[ties])]
            k = (float(p[i]), float(s[i]))
            if objmod.better(obj, k, best_key):
                best_key = k
                r = ok[i]
                best_plan = Plan.from_indices(inst.ids, grid[r], cuts[r], mb[r],
                                              clocks_of(inst, grid[r], None if clk is None else clk[r]))
        if status == Status.TIME_LIMIT:
            break
    if best_plan is None and status == Status.OPTIMAL:
        status = Status.INFEASIBLE
    result = finish("bruteforce", inst, opts, best_plan, status, deadline,
                    best_bound=best_key[0] if (best_key and status == Status.OPTIMAL) else None,
                    stats={"plans_evaluated": ev.plans, "plans_total": count})
    if want_front and front:
        keep = objmod.pareto_filter([(t, e) for t, e, _ in front])
        result.pareto = [finish("bruteforce", inst, opts, front[i][2], status, deadline) for i in keep]
    return result
