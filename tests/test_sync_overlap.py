"""The data-parallel sync overlaps the drain (formulations/model.md §3.3): stage j's ring
starts once every replica's stage j has run its last backward, so a ring of a later
stage runs while the stages before it drain. By hand, against the simulator, in the
batched evaluator, and across CP-SAT, the MILP and brute force.

The instance: tiny-4gpu-2region's model (a message 2e6 bytes, 2 bytes of gradient per
parameter, kappa 0, 1F1B) on four equal GPUs: e0, e1 on one node in the east, e2 on a
second east node, w0 in the west. Cut [0, 2, 4]: t0 = 3.36 ms, t1 = 4.56 ms (the head's
too), forwards t/3, backwards 2.24 and 3.04 ms; N0 = 35.026e6, N1 = 34.026e6 parameters.
Links: one node 0.01 ms + 2e6/1e11 = 0.03 ms, one region 0.1 + 0.2 = 0.3 ms, east-west
10 + 2 = 12 ms per message.
"""
from __future__ import annotations

import copy

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

REL = 1e-12
# stage 0's ring inside a node, stage 1's across the WAN; replica 1's pipeline crosses too
PLAN = Plan.make([["e0", "e2"], ["e1", "w0"]], [0, 2, 4], [2, 2])


@pytest.fixture
def four(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["devices"] = [{"id": "e0", "type": "fast", "region": "east", "node": "east-n0"},
                    {"id": "e1", "type": "fast", "region": "east", "node": "east-n0"},
                    {"id": "e2", "type": "fast", "region": "east", "node": "east-n1"},
                    {"id": "w0", "type": "fast", "region": "west", "node": "west-n0"}]
    return d


def test_a_later_stage_s_ring_overlaps_the_drain_by_hand(four):
    """Replica 1 (e1 -> w0), 1F1B, two micro-batches, times in ms:

        e1  F1 0-1.12  F2 1.12-2.24 ............................ B1 29.68-31.92 ... B2 34.24-36.48
        link e1->w0: F1 1.12-3.12 (+10 ms) arrives 13.12; F2 3.12-5.12, arrives 15.12
        w0  F1 13.12-14.64  B1 14.64-17.68  F2 17.68-19.2  B2 19.2-22.24
        link w0->e1: B1 leaves 17.68, arrives 29.68; B2 leaves 22.24, arrives 34.24

    T_1 = fill + tau = (3.36 + 4.56 + 2 * 12) + 4.56 = 36.48; replica 0 (e0 -> e2, 0.3 ms
    hops) T_0 = 8.52 + 4.56 = 13.08. The drain from stage 1 to stage 0 is the backward of
    stage 0 and the hop down: d_01 = 2.24 + 0.3 = 2.54, d_11 = 2.24 + 12 = 14.24, so stage
    1 is done at max(13.08 - 2.54, 36.48 - 14.24) = 22.24 (w0's B2 above). Its ring
    e2 <-> w0 is 2 steps of 34.026e6 bytes over 1e9 B/s plus 10 ms: R1 = 88.052, from 22.24
    to 110.292; stage 0's ring e0 <-> e1 (R0 = 70.052e6 / 1e11 + 0.02 = 0.72052) runs from
    36.48 to 37.20052. T = 110.292 ms; version 3 before this charged 36.48 + 88.052."""
    inst = instance_from_dict(four)
    ev = evaluate(inst, PLAN)
    assert ev.replica_times_s == pytest.approx([13.08e-3, 36.48e-3], rel=REL)
    assert ev.stage_allreduce_s == pytest.approx([0.72052e-3, 88.052e-3], rel=REL)
    assert ev.stage_sync_start_s == pytest.approx([36.48e-3, 22.24e-3], rel=REL)
    assert ev.time_s == pytest.approx(110.292e-3, rel=REL)
    assert ev.time_s < ev.pipeline_s + ev.allreduce_s - 14e-3
    # the waiting energy follows the shorter T
    pw = inst.arrays.p_wait
    assert ev.wait_j == pytest.approx(sum(pw[inst.index[g]] * (ev.time_s - 2 * (3.36e-3 if j == 0 else 4.56e-3))
                                          for row in PLAN.grid for j, g in enumerate(row)), rel=1e-9)
    batched = BatchEvaluator(inst).evaluate_plans([PLAN])[0]
    assert batched.time_s[0] == pytest.approx(ev.time_s, rel=1e-12)
    # the simulator runs the timeline above step by step: the same T to rounding
    sim = simulate(inst, PLAN)
    assert sim.time_s == pytest.approx(ev.time_s, rel=1e-9)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_the_simulator_agrees_on_every_layout_of_the_four(four, schedule):
    """Every plan of two replicas and two stages on the four GPUs, both schedules: the
    pipelines here are exact for the simulator, so T is too, overlap and all."""
    import itertools
    four["options"]["schedule"] = schedule
    inst = instance_from_dict(four)
    seen = 0
    for order in itertools.permutations(["e0", "e1", "e2", "w0"]):
        plan = Plan.make([list(order[:2]), list(order[2:])], [0, 2, 4], [2, 2])
        ev = evaluate(inst, plan)
        assert simulate(inst, plan).time_s == pytest.approx(ev.time_s, rel=1e-9), order
        assert ev.time_s <= ev.pipeline_s + ev.allreduce_s * (1 + 1e-12)
        assert ev.time_s >= max(ev.pipeline_s, ev.replica_times_s[0] + 0.0) - 1e-15
        seen += 1
    assert seen == 24


def test_one_replica_has_no_sync(four):
    inst = instance_from_dict(four)
    ev = evaluate(inst, Plan.make([["e0", "e2"]], [0, 2, 4], [4]))
    assert ev.allreduce_s == 0.0 and ev.time_s == ev.pipeline_s


def test_exact_solvers_and_brute_force_agree_on_the_overlap(four):
    """The exact model states T >= PT_k - d_kj + R_j (formulations/exact.md §3.10): its
    optimum is brute force's, and this instance's best plan is the hand plan's T or better."""
    four["model"]["global_batch"] = 4
    inst = instance_from_dict(four)
    opts = SolveOptions(time_limit_s=120, workers=1, seed=0)
    bf, cp, mi = (get(name)(inst, opts) for name in ("bruteforce", "cpsat", "milp"))
    assert bf.status == cp.status == mi.status == "optimal"
    assert cp.evaluation.time_s == pytest.approx(bf.evaluation.time_s, rel=1e-6)
    assert mi.evaluation.time_s == pytest.approx(bf.evaluation.time_s, rel=1e-6)
    assert bf.evaluation.time_s <= 110.292e-3
