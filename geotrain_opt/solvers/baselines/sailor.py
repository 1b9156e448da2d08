"""``sailor-like``: a rule-based planner after Sailor's (Strati et al., SOSP'25;
eth-easl/sailor, ``Planner/sailor_planner``), restated from its published rules, no
code copied (formulations/baselines.md). Its plans are costed on this project's
model, never on Sailor's own estimate.

Sailor prunes its search with rules rather than proving anything; the ones a plan
of this project can state are kept:

* tensor parallelism inside a node only, every degree the instance offers (registered
  with ``tensor_parallel="every"``: each degree case is searched, none raced out);
* layers split evenly, the remainder one more layer on each of the *last* stages
  (Sailor's ``get_stages``, ``construct.pieces.even_last_cuts``);
* no data parallelism across regions: all replicas of a stage sit in one region (a
  stage's gradient ring never crosses the WAN), the pipeline may cross regions between
  stages (``construct.heuristics.region_columns``: the region of the stage before while
  it has room, else the one whose free units are fastest; a shape no region fits is
  skipped);
* micro-batches split evenly; every (D, P) tried, best on this project's cost model.

What it leaves out of Sailor: its profiled simulator, its dynamic programme over GPU
types per stage (here the fastest free units of the region are taken), and cost
budgets. It is a baseline to compare with, so it proves nothing.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from geotrain_opt.construct.heuristics import region_columns
from geotrain_opt.construct.pieces import even_last_cuts, feasible_shapes, split_micro_batches
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.baselines.rules import best_of
from geotrain_opt.solvers.result import SolverResult

# shapes per pipeline depth: every replica count up to this, then powers of two and the
# most; at thousands of GPUs every (D, P) would outlast any time limit
DENSE_D = 16


def shapes(inst: Instance) -> list[tuple[int, int]]:
    """The (D, P) tried: for every depth P, D = 1..DENSE_D, the powers of two and the
    largest D (shallow pipelines first: they are Sailor's usual answer)."""
    by_p: dict[int, list[int]] = {}
    for D, P in feasible_shapes(inst):
        by_p.setdefault(P, []).append(D)
    out = []
    for P in sorted(by_p):
        ds = by_p[P]
        keep = {D for D in ds if D <= DENSE_D or D & (D - 1) == 0} | {max(ds)}
        out += [(D, P) for D in sorted(keep)]
    return out


def candidates(inst: Instance) -> Iterator[tuple[np.ndarray, np.ndarray, list[int]]]:
    M, L = inst.model.num_micro_batches, inst.model.layers
    for D, P in shapes(inst):
        grid = region_columns(inst, D, P, strict=True)
        if grid is not None:
            yield grid, even_last_cuts(L, P), split_micro_batches(M, D)


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    return best_of("sailor-like", inst, opts, candidates(inst))
