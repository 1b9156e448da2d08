"""formulations/model.md §13, the worked example: the tiny instance solved by hand,
and every exact method and both evaluators agreeing with the hand's numbers."""
from __future__ import annotations

import pytest

from geotrain_opt import Plan, evaluate, solve

REL = 1e-12


@pytest.mark.parametrize("grid, cuts, T_hand", [
    ([["e0"], ["e1"]], [0, 4], 2 * 7.92e-3 + 2 * 69_052_000 / 1e11 + 2e-5),      # the optimum
    ([["e0"]], [0, 4], 4 * 7.92e-3),                                           # one GPU
    ([["e0", "e1"]], [0, 2, 4], 3.36e-3 + 4.56e-3 + 2 * 3e-5 + 3 * 4.56e-3),     # a two-stage pipeline
    ([["e0", "e1"]], [0, 3, 4], 5.04e-3 + 2.88e-3 + 2 * 3e-5 + 3 * 5.04e-3),
    ([["e0", "e1"]], [0, 1, 4], 1.68e-3 + 6.24e-3 + 2 * 3e-5 + 3 * 6.24e-3),
])
def test_the_hand_computed_plans(tiny, grid, cuts, T_hand):
    ev = evaluate(tiny, Plan.make(grid, cuts, [4 // len(grid)] * len(grid)))
    assert ev.feasible and ev.time_s == pytest.approx(T_hand, rel=REL)


@pytest.mark.parametrize("solver", ["bruteforce", "cpsat", "milp"])
def test_every_exact_method_finds_the_hand_optimum(tiny, solver):
    res = solve(tiny, solver, time_limit=60)
    assert res.status == "optimal"
    assert res.plan.replicas == 2 and res.plan.stages == 1 and {r[0] for r in res.plan.grid} == {"e0", "e1"}
    assert res.evaluation.time_s == pytest.approx(0.01724104, rel=REL)
    # busy 2 * 300 W * 15.84 ms, waiting 2 * 100 W * 1.40104 ms, nothing across regions
    assert res.evaluation.energy_j == pytest.approx(9.504 + 0.280208, rel=REL)
    # the certified bound attached by solve never passes the proven optimum
    assert res.best_bound <= res.objective_value * (1 + 1e-9)
