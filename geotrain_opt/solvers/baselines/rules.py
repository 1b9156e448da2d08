"""Constructive baselines (formulations/baselines.md): each a solver with the
common interface, each evaluated on the project's cost model.

* ``megatron-uniform``: every GPU, uniform cuts, devices in id order, the best
  (D, P) with D*P = #GPUs (Megatron-LM's default placement); registered with
  ``tensor_parallel="node"``: at the instance's largest degree, a whole node per slot;
* ``proportional``: every GPU, the same grid, cuts proportional to the slowest
  device of each stage (the heterogeneity-aware idea of Metis / FlashFlex);
* ``greedy``: the best of the constructive heuristics (fastest-first,
  region-packed, memory-aware) over a spread of shapes, GPUs may stay unused.
"""
from __future__ import annotations

import numpy as np

from geotrain_opt.construct.pieces import feasible_shapes, split_micro_batches, uniform_cuts
from geotrain_opt.construct.heuristics import CONSTRUCTORS, seed_shapes, speed_cuts
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import Deadline, Incumbent, SolveOptions, finish
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.result import Status


def all_gpu_shapes(inst: Instance) -> list[tuple[int, int]]:
    """(D, P) that use every GPU; if none exists, those that use the most."""
    shapes = feasible_shapes(inst)
    if not shapes:
        return []
    most = max(D * P for D, P in shapes)
    return [(D, P) for D, P in shapes if D * P == most]


def best_of(name: str, inst: Instance, opts: SolveOptions, candidates) -> SolverResult:
    """The best acceptable plan of ``candidates`` ((grid, cuts, micro_batches) in unit
    indices) on this project's cost model, as far as the time limit lets them be tried."""
    deadline = Deadline(opts.time_limit_s)
    inc = Incumbent(inst)
    fit = Fitness(inst)
    tried = 0
    for grid, cuts, mb in candidates:
        if deadline.expired:
            break
        D, P = grid.shape
        p, s, T, E, ok = fit.keys_of(D, P, grid[None], np.asarray(cuts)[None], np.asarray(mb)[None])
        tried += 1
        if ok[0]:
            inc.offer_key(Plan.from_indices(inst.ids, grid, cuts, mb), (float(p[0]), float(s[0])), float(T[0]), float(E[0]))
    status = Status.HEURISTIC if inc.plan is not None else Status.UNKNOWN
    return finish(name, inst, opts, inc.plan, status, deadline, stats={"plans_tried": tried})


def _id_order_grid(inst: Instance, D: int, P: int) -> np.ndarray:
    return np.arange(D * P, dtype=np.int64).reshape(D, P)


def megatron_uniform(inst: Instance, opts: SolveOptions) -> SolverResult:
    M, L = inst.model.num_micro_batches, inst.model.layers
    cands = ((_id_order_grid(inst, D, P), uniform_cuts(L, P), split_micro_batches(M, D))
             for D, P in all_gpu_shapes(inst))
    return best_of("megatron-uniform", inst, opts, cands)


def proportional(inst: Instance, opts: SolveOptions) -> SolverResult:
    M = inst.model.num_micro_batches
    speed = inst.arrays.speed

    def cands():
        for D, P in all_gpu_shapes(inst):
            grid = _id_order_grid(inst, D, P)
            yield grid, speed_cuts(inst, speed[grid].min(axis=0)), split_micro_batches(M, D)
    return best_of("proportional", inst, opts, cands())


def greedy(inst: Instance, opts: SolveOptions) -> SolverResult:
    def cands():
        for D, P in seed_shapes(inst, limit=60):
            for build in CONSTRUCTORS.values():
                yield build(inst, D, P)
    return best_of("greedy", inst, opts, cands())
