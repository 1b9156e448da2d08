"""The `dtfm` baseline is DT-FM's scheduler: its cost reproduces DT-FM's published
numbers and its search reaches DT-FM's published optima on DT-FM's scenarios."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from geotrain_opt.problem import dtfm_scenarios as dt
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.solvers.baselines import dtfm

DTFM_CONSTANTS = {"dtfm_activation_gb": 0.47124922, "dtfm_gradient_gb": 0.65}
STRIDED = np.array([[8 * p + j for p in range(8)] for j in range(8)])      # DP group j = one GPU per block
BLOCKED = np.array([[8 * s + k for k in range(8)] for s in range(8)])      # DP group s = one block
# DT-FM's own cost of the two fixed layouts, total (DP, 2 PP), reproduced by running its code
PUBLISHED_FIXED = {
    "1": ((3.4398, 2.912, 0.528), (16.9806, 0.091, 16.890)),
    "2": ((49.5039, 7.28, 42.224), (49.5039, 7.28, 42.224)),
    "3": ((16.0868, 5.517, 10.570), (17.6481, 1.834, 15.814)),
    "4": ((34.8020, 8.342, 26.460), (39.2406, 4.62, 34.621)),
    "5": ((49.2184, 22.758, 26.460), (59.4369, 4.62, 54.817)),
}
PUBLISHED_OPTIMA = {"1": 3.43980, "3": 16.08684, "4": 34.80204, "5": 49.21838}


@pytest.mark.parametrize("case", sorted(PUBLISHED_FIXED))
def test_its_cost_reproduces_dtfm_on_the_fixed_layouts(case):
    inst = instance_from_dict(dt.scenario(case))
    cost = dtfm.DtfmCost(inst, 8, 8, 0.47124922e9, 0.65e9)
    for groups, want in zip((STRIDED, BLOCKED), PUBLISHED_FIXED[case]):
        got = cost.evaluate(groups)[:3]
        assert got == pytest.approx(want, abs=6e-4)


def _run(case: str, seed: int):
    inst = instance_from_dict(dt.scenario(case))
    res = get("dtfm")(inst, SolveOptions(time_limit_s=60, seed=seed,
                                         extra={"shape": (8, 8), "offspring": 300, **DTFM_CONSTANTS}))
    return inst, res


@pytest.mark.parametrize("case", sorted(PUBLISHED_OPTIMA))
def test_its_search_reaches_the_published_optimum(case):
    inst, res = _run(case, seed=0)
    assert res.stats["dtfm_cost_s"] == pytest.approx(PUBLISHED_OPTIMA[case], abs=1e-5)
    # the layout DT-FM's scheduler finds: every pipeline inside one site (one instance in Case 1)
    where = (lambda d: d.node) if case == "1" else (lambda d: d.region)
    for row in res.plan.grid:
        assert len({where(inst.devices[inst.index[g]]) for g in row}) == 1, row
    # and the plan is judged on this project's cost model like any other
    assert res.evaluation.feasible and res.stats["candidates"] == 400


def test_spot_case_ends_no_worse_than_dtfms_runs():
    _, res = _run("2", seed=1)
    assert res.stats["dtfm_cost_s"] <= 43.54734 + 1e-5


def test_deterministic_for_a_seed():
    a, b = _run("3", seed=5)[1], _run("3", seed=5)[1]
    assert a.plan.grid == b.plan.grid and a.stats["dtfm_cost_s"] == b.stats["dtfm_cost_s"]


def test_bottleneck_matching_and_open_path_against_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 6))
        C = rng.integers(0, 9, size=(n, n)).astype(float)
        brute = min(max(C[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
        assert dtfm.bottleneck_value(C) == brute
        col = dtfm.bottleneck_matching(C)
        assert sorted(col) == list(range(n)) and max(C[i, col[i]] for i in range(n)) == brute
        W = rng.uniform(0, 1, size=(n + 1, n + 1))
        W = W + W.T
        cost, path = dtfm.open_tsp(W)
        best = min(sum(W[a, b] for a, b in zip(p, p[1:])) for p in itertools.permutations(range(n + 1)))
        assert cost == pytest.approx(best) and sorted(path) == list(range(n + 1))
        assert sum(W[a, b] for a, b in zip(path, path[1:])) == pytest.approx(cost)


def test_fast_two_opt_makes_the_moves_of_the_plain_one():
    """Past HELD_KARP_MAX stages the open path is nearest neighbour + 2-opt: the fast
    pass (each move's change from its end edges) takes the very moves of the plain one
    (whole lengths compared), so DT-FM's search is unchanged, only faster."""
    rng = np.random.default_rng(3)
    for P in (5, 17, 24):
        for _ in range(4):
            X = rng.uniform(size=(P, 2))
            W = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
            start = [int(x) for x in rng.permutation(P)]
            fast, plain = dtfm._two_opt(W, list(start)), dtfm._two_opt_any(W, list(start))
            assert fast == plain and sorted(fast) == list(range(P))
    W = rng.uniform(size=(20, 20))
    W = W + W.T
    cost, path = dtfm.open_tsp(W)       # 20 > HELD_KARP_MAX: the heuristic
    assert sorted(path) == list(range(20)) and cost == pytest.approx(dtfm._length(W, path))


def test_crossover_and_local_search_keep_groups_balanced():
    rng = np.random.default_rng(1)
    inst = instance_from_dict(dt.scenario("4"))
    cost = dtfm.DtfmCost(inst, 8, 8, 0.47124922e9, 0.65e9)
    base = np.repeat(np.arange(8), 8)
    for _ in range(10):
        child = dtfm.crossover(base[rng.permutation(64)], base[rng.permutation(64)], 8, 8, rng)
        assert (np.bincount(child, minlength=8) == 8).all()
        out = dtfm.local_search(child, cost.block(np.arange(64), np.arange(64)), 8, 8, rng)
        assert (np.bincount(out, minlength=8) == 8).all()
        # on these draws the pass also never makes DT-FM's cost worse (its gain is not the cost itself)
        assert cost.evaluate(dtfm._groups(out, np.arange(64), 8))[0] <= cost.evaluate(dtfm._groups(child, np.arange(64), 8))[0] + 1e-9


def test_default_run_on_a_bundled_instance_respects_its_time_limit():
    from geotrain_opt import load_instance
    from .conftest import INSTANCES
    inst = load_instance(INSTANCES / "real" / "dtfm-5-worldwide-geo.yaml")
    res = get("dtfm")(inst, SolveOptions(time_limit_s=6, seed=0))
    assert res.plan is not None and res.wall_s < 8
    assert {(r["D"], r["P"]) for r in res.stats["shapes"]} <= {(4, 16), (8, 8), (16, 4), (32, 2), (64, 1)}
    assert len(res.plan.devices) == 64                    # DT-FM uses every GPU
