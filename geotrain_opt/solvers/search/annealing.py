"""Simulated annealing over the memetic genome with the memetic mutations.

Each step draws a batch of neighbours (one random mutation each), evaluates them
together, and walks them with the Metropolis rule against the current genome.
Temperature falls geometrically from 5% to 0.01% of the current objective over the
time limit (or the evaluation budget ``max_evaluations``).
"""
from __future__ import annotations

import math

import numpy as np

from geotrain_opt.construct.heuristics import CONSTRUCTORS, seed_shapes
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import Incumbent, SolveOptions, finish
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.search.memetic.encoding import Genome
from geotrain_opt.solvers.search.memetic.operators import MUTATIONS, mutation_names
from geotrain_opt.solvers.options import AnnealingOptions
from geotrain_opt.solvers.termination import Termination
from geotrain_opt.solvers.result import Status
from geotrain_opt.problem.tolerances import TINY

T_START, T_END = 0.05, 1e-4


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    o = opts.typed(AnnealingOptions, "simulated-annealing")
    term = Termination(opts.time_limit_s, o.max_evaluations, lambda: fit.evaluations)
    deadline = term.deadline
    rng = np.random.default_rng(opts.seed)
    fit = Fitness(inst)
    batch = o.batch
    starts = [Genome.from_plan(inst, Plan.from_indices(inst.ids, *build(inst, D, P)))
              for D, P in seed_shapes(inst, limit=12) for build in CONSTRUCTORS.values()]
    if opts.hint is not None:
        starts.append(Genome.from_plan(inst, opts.hint))
    if not starts:
        return finish("simulated-annealing", inst, opts, None, "infeasible", deadline)
    fit(starts)
    cur = min(starts, key=lambda g: g.key)
    inc = Incumbent(inst)
    names = mutation_names(inst)
    steps = 0
    with term.guard():
        while not term():
            temp = T_START * (T_END / T_START) ** term.progress
            nbrs = []
            for _ in range(batch):
                g = cur.copy()
                g = MUTATIONS[names[int(rng.integers(len(names)))]](inst, g, rng)
                g.invalidate()
                nbrs.append(g)
            fit(nbrs)
            for g in nbrs:
                if g.feasible:
                    inc.offer_key(g.to_plan(inst), g.key, *g.te)
                delta = (g.key[0] - cur.key[0]) / max(abs(cur.key[0]), TINY)
                if delta <= 0 or rng.random() < math.exp(-delta / temp):
                    cur = g
            steps += 1
    if cur.feasible:
        inc.offer_key(cur.to_plan(inst), cur.key, *cur.te)
    status = Status.HEURISTIC if inc.plan is not None else Status.UNKNOWN
    return finish("simulated-annealing", inst, opts, inc.plan, status, deadline,
                  stats={"evaluations": fit.evaluations, "steps": steps, "interrupted": term.interrupted})
