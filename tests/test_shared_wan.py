"""Shared WAN capacity (``capacity_gbps`` of an inter_region entry, formulations/model.md
§3.2): all of a plan's traffic between two regions shares one capacity per direction.
By hand on the tiny instance, against the simulator, across the exact solvers and
brute force, in the batched evaluator, and as bad input.

tiny (instances/tiny-4gpu-2region.yaml, kappa 0, 1F1B): a layer has 12.013e6 parameters,
embeddings 11e6, the head 1e7; cut [0, 2, 4] gives N0 = 35.026e6, N1 = 34.026e6. Stage
times on fast devices t0 = 3.36, t1 = 4.56 ms, t1 = 9.12 ms on the slow w1. A message is
2e6 bytes; east-west is 10 ms and 1e9 B/s, w0-w1 0.1 ms and 1e10 B/s, e0-e1 (one node)
0.01 ms and 1e11 B/s. Gradients are 2 bytes per parameter.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

REL = 1e-12
RINGS_ACROSS = Plan.make([["e0", "e1"], ["w0", "w1"]], [0, 2, 4], [2, 2])   # both rings cross
PIPES_ACROSS = Plan.make([["e0", "w0"], ["e1", "w1"]], [0, 2, 4], [2, 2])   # both pipelines cross


def shared(tiny_dict, gbps: float | None, **model):
    d = copy.deepcopy(tiny_dict)
    d["model"].update(model)
    if gbps is not None:
        d["network"]["inter_region"][0]["capacity_gbps"] = gbps
    return instance_from_dict(d)


def test_rings_share_the_pair_by_hand(tiny_dict):
    """Rings of both stages cross east-west, one edge each way per stage, 2 (D-1)/D * 2 =
    2 bytes per parameter on each. Alone, R0 = 2 N0 / 1e9 + 2 * 10 ms = 90.052 ms and
    R1 = 88.052 ms. Sharing 8 Gbit/s (1e9 B/s) each way, east -> west carries
    2 (N0 + N1) = 138.104e6 bytes: 138.104 ms, and the last byte one latency more,
    148.104 ms. Pipelines e0-e1 and w0-w1 (2 micro-batches, q = 2 = W: no wait):
    T_0 = 3.36 + 4.56 + 2 * 0.03 + 4.56 = 12.54, T_1 = 3.36 + 9.12 + 2 * 0.3 + 9.12 = 22.2 ms.
    Stage 1 is done a drain earlier (model.md §3.3): 12.54 - (2/3 3.36 + 0.03) = 10.27 and
    22.2 - (2.24 + 0.3) = 19.66 ms; its ring, alone, ends at 19.66 + 88.052 < 22.2 + 90.052,
    and the shared floor runs from the first start, 19.66 ms."""
    free, inst = shared(tiny_dict, None), shared(tiny_dict, 8)
    assert evaluate(free, RINGS_ACROSS).time_s == pytest.approx((22.2 + 90.052) * 1e-3, rel=REL)
    ev = evaluate(inst, RINGS_ACROSS)
    assert ev.allreduce_s == pytest.approx(148.104e-3, rel=REL)
    assert ev.stage_sync_start_s == pytest.approx([22.2e-3, 19.66e-3], rel=REL)
    assert ev.time_s == pytest.approx((19.66 + 148.104) * 1e-3, rel=REL)
    assert BatchEvaluator(inst).evaluate_plans([RINGS_ACROSS])[0].time_s[0] == pytest.approx(ev.time_s, rel=1e-9)
    # the simulator runs the two rings step by step over the one shared resource; it
    # starts stage 1's ring when stage 1 is done, before stage 0 (1F1B's drain)
    sim = simulate(inst, RINGS_ACROSS)
    assert sim.time_s == pytest.approx(ev.time_s, rel=0.02)
    assert sim.time_s <= ev.time_s


def test_pipelines_share_the_pair_by_hand(tiny_dict):
    """0.8 Gbit/s (1e8 B/s) shared: every east-west message takes o = 20 ms (no message
    outruns its pair), x = 30 ms, and two hops cross, so a period carries two messages
    each way: tau >= 2 * 20 = 40 ms for both replicas. T_k = fill + (m - 1) tau:
    replica 1 (e1 -> w1) 3.36 + 9.12 + 60 + 40 = 112.48 ms; rings inside a region:
    R0 (e0 - e1, one node) = 2 * 35.026e6 / 1e11 + 2 * 0.01 ms = 0.72052 ms, R1 (w0 - w1) =
    2 * 34.026e6 / 1e10 + 2 * 0.1 ms = 7.0052 ms; R1 starts a drain (2.24 + 30 ms) before
    the end, R0 at it: T = 112.48 + 0.72052 ms."""
    inst = shared(tiny_dict, 0.8)
    ev = evaluate(inst, PIPES_ACROSS)
    assert ev.replica_times_s[1] == pytest.approx(112.48e-3, rel=REL)
    assert ev.time_s == pytest.approx((112.48 + 0.72052) * 1e-3, rel=REL)
    # the same link without sharing: tau = max(9.12, o = 20) = 20 ms
    d = copy.deepcopy(tiny_dict)
    d["network"]["inter_region"][0]["bandwidth_gbps"] = 0.8
    assert evaluate(instance_from_dict(d), PIPES_ACROSS).replica_times_s[1] == pytest.approx(92.48e-3, rel=REL)


@pytest.mark.parametrize("grid", [[["e0", "w0"], ["e1", "w1"]], [["e0", "w0", "e1", "w1"]]])
def test_long_pipelines_agree_with_the_simulator(tiny_dict, grid):
    """With many micro-batches the shared period is what the simulator's FIFO capacity
    resource runs at (the fill's own queueing is left out of the model: 2 % here)."""
    inst = shared(tiny_dict, 0.8, global_batch=64)
    P = len(grid[0])
    plan = Plan.make(grid, [0, 2, 4] if P == 2 else [0, 1, 2, 3, 4], [64 // len(grid)] * len(grid))
    ev, sim = evaluate(inst, plan), simulate(inst, plan)
    assert sim.pipeline_s == pytest.approx(ev.pipeline_s, rel=0.02)
    free = evaluate(shared(tiny_dict, None, global_batch=64), plan)
    assert ev.pipeline_s > 2 * free.pipeline_s      # the sharing is what decides these plans


def four_sites(tiny_dict, gbps: float | None, schedule: str, split: str):
    """Two devices per region on nodes of their own, a fast WAN (1 ms, 80 Gbit/s), 16
    micro-batches: replicas across the regions pay off until the pair is shared."""
    d = copy.deepcopy(tiny_dict)
    d["devices"] = [{"id": "e0", "type": "fast", "region": "east", "node": "e-n0"},
                    {"id": "e1", "type": "fast", "region": "east", "node": "e-n1"},
                    {"id": "w0", "type": "fast", "region": "west", "node": "w-n0"},
                    {"id": "w1", "type": "slow", "region": "west", "node": "w-n1"}]
    d["model"]["global_batch"] = 16
    d["network"]["inter_region"][0].update(latency_ms=1, bandwidth_gbps=80)
    d["options"].update(schedule=schedule, batch_split=split)
    if gbps is not None:
        d["network"]["inter_region"][0]["capacity_gbps"] = gbps
    return instance_from_dict(d)


# optima proved by brute force, CP-SAT and PuLP alike (uniform split, 1F1B), ms
# (before the rings overlapped the drain, model.md §3.3: 63.1278, 64.48, 74.8478, 76.92)
OPTIMA = {None: 61.6478, 40: 61.8478, 10: 70.2426, 2: 76.92}


@pytest.mark.parametrize("gbps", [None, 40, 10, 2])
def test_exact_solvers_and_brute_force_agree(tiny_dict, gbps):
    """As the pair's capacity falls the optimum moves: two pipelines across the regions
    (the rings inside them, the slow one overlapping the drain) while the pair carries
    them, then one pipeline inside east."""
    inst = four_sites(tiny_dict, gbps, "1f1b", "uniform")
    got = {s: get(s)(inst, SolveOptions(time_limit_s=120)) for s in ("bruteforce", "cpsat", "milp")}
    for res in got.values():
        assert res.status == "optimal"
        assert res.objective_value == pytest.approx(OPTIMA[gbps] * 1e-3, rel=1e-6)
        assert evaluate(inst, res.plan).time_s == pytest.approx(res.objective_value, rel=1e-9)


@pytest.mark.parametrize("schedule,split", [("gpipe", "uniform"), ("1f1b", "free"), ("gpipe", "free")])
def test_exact_solvers_agree_under_every_schedule_and_split(tiny_dict, schedule, split):
    inst = four_sites(tiny_dict, 10, schedule, split)
    brute = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
    for s in ("cpsat", "milp"):
        res = get(s)(inst, SolveOptions(time_limit_s=120))
        assert res.status == brute.status == "optimal"
        assert res.objective_value == pytest.approx(brute.objective_value, rel=1e-6)


def test_batched_evaluator_equals_the_reference(tiny_dict):
    """Random plans of every shape on the shared four-site instance: the batched
    evaluator's period and sync floors are the reference's."""
    inst = four_sites(tiny_dict, 10, "1f1b", "free")
    rng = np.random.default_rng(7)
    bev = BatchEvaluator(inst)
    for D, P in ((1, 2), (2, 2), (1, 4), (4, 1), (2, 1), (1, 3)):
        plans = []
        for _ in range(12):
            grid = rng.permutation(4)[: D * P].reshape(D, P)
            cuts = [0] + sorted(rng.choice(np.arange(1, 4), P - 1, replace=False).tolist()) + [4]
            split = np.full(D, 16 // D)
            plans.append(Plan.from_indices(inst.ids, grid, cuts, split.tolist()))
        for plan, row in zip(plans, bev.evaluate_plans(plans)):
            ref = evaluate(inst, plan)
            assert row.time_s[0] == pytest.approx(ref.time_s, rel=1e-9)
            assert row.allreduce_s[0] == pytest.approx(ref.allreduce_s, rel=1e-9)


@pytest.mark.parametrize("value,match", [(0, "must be positive"), (-1, "must be positive"),
                                         ("fast", "expected a finite number"), (1e-9, "must be at least")])
def test_bad_capacity_names_the_field(tiny_dict, value, match):
    d = copy.deepcopy(tiny_dict)
    d["network"]["inter_region"][0]["capacity_gbps"] = value
    with pytest.raises(InstanceError, match=r"network\.inter_region\[0\]\.capacity_gbps.*" + match):
        instance_from_dict(d)


def test_one_direction_only(tiny_dict):
    """{b, a} listed apart keeps its own capacity: east -> west shared, west -> east not."""
    d = copy.deepcopy(tiny_dict)
    link = d["network"]["inter_region"][0]
    d["network"]["inter_region"] = [dict(link, capacity_gbps=8), dict(link, a="west", b="east")]
    inst = instance_from_dict(d)
    assert inst.wan_capacity == {("east", "west"): 1e9}
    # only the east -> west edges of the rings share: the same floor as both ways
    assert evaluate(inst, RINGS_ACROSS).allreduce_s == pytest.approx(148.104e-3, rel=REL)
