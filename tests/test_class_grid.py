"""The class-grid relaxation (formulations/proofs.md §9): its ring bottlenecks against
brute force over walks, its verdicts against the brute-force optimum of every shape
of small class-structured clusters, and the exact driver with it on and off."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from geotrain_opt import instance_from_dict
from geotrain_opt.io.generate import generate
from geotrain_opt.problem.instance import load_instance
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.solvers.exact import class_grid, ring_orders
from geotrain_opt.solvers.exact.bruteforce import shape_optimum


def _walk_brute(W: np.ndarray, Q: tuple[int, ...], U: set[int]) -> float:
    """Least bottleneck of a closed walk over Q (classes outside U visited once), by
    enumerating walks of up to 2|Q| steps."""
    best = math.inf

    def rec(seq: list[int], count: dict[int, int], worst: float) -> None:
        nonlocal best
        if worst >= best:
            return
        if len(set(seq)) == len(Q) and seq[-1] != seq[0]:
            best = min(best, max(worst, W[seq[-1], seq[0]]))
        if len(seq) >= 2 * len(Q):
            return
        for v in Q:
            if v != seq[-1] and (v in U or count.get(v, 0) == 0):
                count[v] = count.get(v, 0) + 1
                rec(seq + [v], count, max(worst, W[seq[-1], v]))
                count[v] -= 1
    rec([Q[0]], {Q[0]: 1}, 0.0)
    return best


@pytest.mark.parametrize("symmetric", [True, False])
def test_walk_bottlenecks_match_brute_force(symmetric):
    rng = np.random.default_rng(7)
    W = rng.integers(1, 9, size=(5, 5)).astype(float)       # ties on purpose
    if symmetric:
        W = np.minimum(W, W.T)
    table = ring_orders.walk_bottlenecks(W)
    strong = ring_orders.walk_bottlenecks(W, labelled=False)
    for r in range(2, 6):
        for Q in itertools.combinations(range(5), r):
            qm = sum(1 << c for c in Q)
            for k in range(r + 1):
                for U in itertools.combinations(Q, k):
                    um = sum(1 << c for c in U)
                    assert table[qm, um] == _walk_brute(W, Q, set(U)), (Q, U)
            # every class revisitable: the strong-connectivity table
            assert strong[qm, qm] == table[qm, qm]
    # a Hamiltonian cycle is dearer than a walk that may come back through a hub:
    # hub 0 joined to 1 and 2 by cheap links, 1-2 expensive
    hub = np.array([[0, 1, 1], [1, 0, 9], [1, 9, 0]], dtype=float)
    t = ring_orders.walk_bottlenecks(hub)
    assert t[0b111, 0b000] == 9.0 and t[0b111, 0b001] == 1.0


def _cases():
    """Small clusters whose devices form classes, uniform split, time objective."""
    out = []
    for family, n, seeds in (("regions", 8, range(0, 16)), ("nodes", 6, range(0, 24))):
        for seed in seeds:
            d = generate(family, n, seed)
            d["options"]["batch_split"] = "uniform"
            inst = instance_from_dict(d)
            if class_grid.not_applicable(inst, 2) is None:
                out.append((f"{family}-{seed}", inst))
    return out


def test_verdicts_match_the_brute_force_optimum_of_every_shape():
    """Cutoff just above a shape's optimum: the relaxation must find that optimum and
    close the shape; just below it: close it without a plan. Its bound never passes
    the optimum."""
    cases = _cases()
    assert len(cases) >= 10
    shapes = closed = 0
    for name, inst in cases:
        for D, P in [(D, P) for D in range(1, inst.n + 1) for P in range(1, inst.n // D + 1)
                     if P <= inst.model.layers and inst.model.num_micro_batches % D == 0]:
            opt = shape_optimum(inst, D, P)
            if not math.isfinite(opt):
                continue
            shapes += 1
            above = class_grid.solve_shape(inst, D, P, opt * (1 + 1e-6), 20.0, workers=1)
            assert above.plan is not None, (name, D, P)
            assert above.value >= opt * (1 - 1e-12), (name, D, P)
            assert above.bound is None or above.bound <= opt * (1 + 1e-9), (name, D, P, above.bound, opt)
            if above.status == "closed":
                closed += 1
                assert above.value == pytest.approx(opt, rel=1e-9), (name, D, P)
            below = class_grid.solve_shape(inst, D, P, opt * (1 - 1e-6), 20.0, workers=1)
            assert below.status == "closed" or below.status == "open" and below.solutions, (name, D, P)
            assert below.plan is None or below.value >= opt * (1 - 1e-12), (name, D, P)
            assert below.bound is None or below.bound <= opt * (1 + 1e-9), (name, D, P)
    print(f"{len(cases)} clusters, {shapes} shapes, {closed} closed with their optimum")
    assert shapes >= 100 and closed >= 0.9 * shapes, (shapes, closed)


def test_not_applicable_says_why():
    inst = load_instance("instances/real/dtfm-5-worldwide-geo.yaml")
    assert class_grid.not_applicable(inst, 8) is None
    assert "free split" in class_grid.not_applicable(inst.with_options(batch_split="free"), 8)
    energy = instance_from_dict({**generate("regions", 8, 0), "objective": {"kind": "energy"}})
    assert "objective" in class_grid.not_applicable(energy, 2)


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_driver_with_and_without_the_class_grid_agree(seed):
    """8-GPU scaling instances (two GPU types in four regions) under GPipe: the class
    grid closes shapes there, and the optimum is the one the driver proves without it."""
    d = generate("small", 8, seed)
    d["options"]["batch_split"] = "uniform"
    d["objective"] = {"kind": "time"}
    # under 1F1B the class grid steps aside (its rows are version 2's, without the window)
    assert "1F1B's window" in class_grid.not_applicable(instance_from_dict(d), 2)
    d["options"]["schedule"] = "gpipe"
    inst = instance_from_dict(d)
    res = {mode: get("cpsat")(inst, SolveOptions(time_limit_s=60, workers=1, extra={"class_grid": mode}))
           for mode in ("auto", "off")}
    assert res["auto"].status == res["off"].status == "optimal"
    assert res["auto"].objective_value == pytest.approx(res["off"].objective_value, rel=1e-9)
    by = [e.get("by") for e in res["auto"].stats["shape_log"]]
    assert res["auto"].stats["class_grid"] == "on" and "class grid" in by
    assert res["off"].stats["class_grid"] == "off"
    assert "class grid" not in [e.get("by") for e in res["off"].stats["shape_log"]]


def test_ring_order_descent_beyond_eight_replicas():
    """Ten replicas: the sorted order sends a ring over the dear 1-2 link; a hub
    order (class 2 between two rows of class 0) costs only cheap links, which the
    circuit finds and proves least."""
    from types import SimpleNamespace
    inst = load_instance("instances/real/dtfm-5-worldwide-geo.yaml")
    ib = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 9.0], [1.0, 9.0, 1.0]]) * 1e-9
    al = np.zeros((3, 3))
    cl = SimpleNamespace(ib=ib, al=al, labelled=True,
                         walk_ib=ring_orders.walk_bottlenecks(ib), walk_al=ring_orders.walk_bottlenecks(al))
    rows = [(0,)] * 5 + [(1,)] * 4 + [(2,)]
    order, ring_lb = ring_orders._best_order(inst, cl, rows, [1e8])
    assert sorted(order) == list(range(10))
    seq = [rows[k][0] for k in order]
    pairs = {(seq[i], seq[(i + 1) % 10]) for i in range(10)}
    assert (1, 2) not in pairs and (2, 1) not in pairs
    cheap = 2.0 * 9 / 10 * inst.arrays.grad_bytes * 1e8 * 1e-9
    assert ring_orders._ring_floor(inst, cl, rows, [1e8]) == pytest.approx(cheap, rel=1e-12)
    assert ring_lb == pytest.approx(cheap, rel=1e-9)


CASE5_OPTIMUM = 27.00782434520821      # benchmarks/results/dtfm-5-proof.json (cost model v3)


def test_case5_shape_16x4_has_no_plan_below_the_optimum():
    """DT-FM Case 5: the 16x4 shape, one of the five its bounds leave open, holds no
    plan faster than the optimum (proofs.md §9). (Under cost model v2 the 8x5 shape
    was one of six left open, optimum 30.7864 s.)"""
    inst = load_instance("instances/real/dtfm-5-worldwide-geo.yaml")
    out = class_grid.solve_shape(inst, 16, 4, CASE5_OPTIMUM, 300.0)
    assert out.status == "closed" and out.plan is None
    assert out.bound == pytest.approx(CASE5_OPTIMUM, rel=1e-8)


@pytest.mark.slow
def test_case5_optimum_is_found_and_closed_in_its_shape():
    """Given a cutoff of 27.1 s the class grid finds the optimum in 8x6 and proves
    nothing in that shape is faster: every stage's ring inside one city, each replica
    through Oregon, Ohio, Virginia, London, Frankfurt, Ireland (either way), layers 4
    each. (Under cost model v2, kappa 0.5: 30.7864 s, London and Ireland paired.)"""
    inst = load_instance("instances/real/dtfm-5-worldwide-geo.yaml")
    out = class_grid.solve_shape(inst, 8, 6, 27.1, 600.0)
    assert out.status == "closed"
    assert out.value == pytest.approx(CASE5_OPTIMUM, rel=1e-12)
    cities = {tuple(d.split("-")[0] for d in row) for row in out.plan.grid}
    way = ("oregon", "ohio", "virginia", "london", "frankfurt", "ireland")
    assert cities in ({way}, {way[::-1]})
