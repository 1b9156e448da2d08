"""Random search: uniformly drawn genomes (shape, device order, cuts, split), batched.

The floor every heuristic must beat; also the 'random' arm of the ablation.
Options: ``max_evaluations``, ``batch`` (256).
"""
from __future__ import annotations

import numpy as np

from geotrain_opt.construct.pieces import feasible_shapes
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import Incumbent, SolveOptions, finish
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.search.memetic.encoding import default_split
from geotrain_opt.solvers.options import SearchOptions
from geotrain_opt.solvers.termination import Termination
from geotrain_opt.solvers.result import Status


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    o = opts.typed(SearchOptions, "random-search")
    budget = o.max_evaluations
    term = Termination(opts.time_limit_s, budget, lambda: fit.evaluations)
    rng = np.random.default_rng(opts.seed)
    fit = Fitness(inst)
    inc = Incumbent(inst)
    shapes = feasible_shapes(inst)
    batch = o.batch
    with term.guard():
        while shapes and not term():
            _draw(inst, fit, inc, shapes, rng, batch, budget)
    status = Status.HEURISTIC if inc.plan is not None else Status.UNKNOWN
    return finish("random-search", inst, opts, inc.plan, status, term.deadline,
                  stats={"evaluations": fit.evaluations, "interrupted": term.interrupted})


def _draw(inst: Instance, fit: Fitness, inc: Incumbent, shapes: list, rng: np.random.Generator,
          batch: int, budget: int | None) -> None:
    """One batch of uniformly random plans of one random shape."""
    L, n = inst.model.layers, inst.n
    free = inst.options.batch_split == "free"
    M = inst.model.num_micro_batches
    D, P = shapes[int(rng.integers(len(shapes)))]
    k = batch if budget is None else max(1, min(batch, budget - fit.evaluations))
    grids = np.stack([rng.permutation(n)[: D * P].reshape(D, P) for _ in range(k)])
    cuts = np.stack([np.r_[0, np.sort(rng.choice(np.arange(1, L), P - 1, replace=False)), L] for _ in range(k)])
    if free and D > 1:
        bars = np.sort(np.stack([rng.choice(np.arange(1, M), D - 1, replace=False) for _ in range(k)]), axis=1)
        mb = np.diff(np.concatenate([np.zeros((k, 1), int), bars, np.full((k, 1), M)], axis=1), axis=1)
    else:
        mb = np.broadcast_to(default_split(inst, D), (k, D))
    p, s, T, E, ok = fit.keys_of(D, P, grids, cuts, mb)
    for i in np.flatnonzero(ok):
        if inc.key is None or p[i] <= inc.key[0] * (1 + 1e-9):
            inc.offer_key(Plan.from_indices(inst.ids, grids[i], cuts[i], mb[i]), (float(p[i]), float(s[i])),
                          float(T[i]), float(E[i]))
