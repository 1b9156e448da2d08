"""Exact Pareto fronts: the ε-constraint walk finds brute force's whole front."""
from __future__ import annotations

import pytest

from geotrain_opt import evaluate
from geotrain_opt.cost.objective import dominates
from geotrain_opt.analysis.fronts import pareto_front
from geotrain_opt.solvers import SolveOptions

from .test_exact_agreement import tiny_instance


def points(res):
    return [(r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto]


@pytest.mark.parametrize("seed", [14, 18, 42, 57])
@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_exact_front_matches_bruteforce(seed, solver):
    inst = tiny_instance(seed)
    truth = points(pareto_front(inst, "bruteforce", SolveOptions()))
    got = pareto_front(inst, solver, SolveOptions(time_limit_s=120), points=100)
    assert got.status == "optimal"
    pts = points(got)
    assert len(truth) >= 2, "instance should have a real trade-off"
    assert len(pts) == len(truth)
    for (t1, e1), (t2, e2) in zip(sorted(pts), sorted(truth)):
        assert t1 == pytest.approx(t2, rel=1e-6) and e1 == pytest.approx(e2, rel=1e-6)
    for r in got.pareto:
        ev = evaluate(inst, r.plan)
        assert ev.feasible and ev.time_s == pytest.approx(r.evaluation.time_s, rel=1e-12)
    for a in pts:
        assert not any(dominates(b, a) for b in pts)
