"""Plain GA: the memetic solver's DEAP loop without local search, without
constructive seeding, with the generic mutations only (the ablation's 'plain-ga')."""
from __future__ import annotations

from dataclasses import replace

from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.search import memetic
from geotrain_opt.solvers.base import SolveOptions

PLAIN = {"ls_rate": 0.0, "seeding": False, "mutations": ["swap", "replace", "cut", "shape"]}


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    # the caller's options stay as given; theirs win over PLAIN's. The choice gene
    # (§11) is as generic as a shape's, so it mutates where the model offers choices
    plain = dict(PLAIN, mutations=PLAIN["mutations"] + ["choice"]) if inst.has_choices else PLAIN
    return memetic.solve(inst, replace(opts, extra={**plain, **opts.extra}), name="plain-ga")
