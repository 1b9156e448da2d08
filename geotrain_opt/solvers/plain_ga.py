"""Plain GA: the memetic solver's DEAP loop without local search, without
constructive seeding, with the generic mutations only (the ablation's 'plain-ga')."""
from __future__ import annotations

from ..instance import Instance
from ..result import SolverResult
from . import memetic
from .base import SolveOptions

PLAIN = {"ls_rate": 0.0, "seeding": False, "mutations": ["swap", "replace", "cut", "shape"]}


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    opts.extra = {**PLAIN, **opts.extra}
    res = memetic.solve(inst, opts)
    res.solver = "plain-ga"
    return res
