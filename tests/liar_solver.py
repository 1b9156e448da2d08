"""A deliberately wrong solver for the verifier's own test: it reports a T that its
plan does not have, and claims optimality for a plan that is not optimal."""
from geotrain_opt.solvers.base import Deadline, finish
from geotrain_opt.construct.pieces import smallest_feasible_plan


def solve(inst, opts):
    res = finish("liar", inst, opts, smallest_feasible_plan(inst), "optimal", Deadline(1))
    res.evaluation.time_s *= 0.5
    return res
