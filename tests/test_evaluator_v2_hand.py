"""The v2 terms of the cost model, worked out by hand on the tiny instance.

Same constants as tests/test_evaluator_hand.py (the tiny instance states
``exposed_comm: 0``, so those cases are v2 with v1 settings). Plan "pipe" is
replica e0 -> w0, cuts [0, 2, 4], m = 4: t0 = 3.36e-3, t1 = 4.56e-3, the link
east-west has occupancy o = A/beta = 2e6/1e9 = 2e-3 and x = 0.01 + 2e-3 = 0.012.
"""
from __future__ import annotations

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError

from .conftest import variant
from .test_evaluator_hand import approx, check_batch_matches

PIPE = Plan.make([["e0", "w0"]], [0, 2, 4], [4])


def test_exposed_comm_in_the_bottleneck(tiny_dict):
    # rows: r0 = t0 + 2k(0 + o) = 5.36e-3, r1 = t1 + 2k(o + 0) = 6.56e-3 (k = 0.5); tau = 6.56e-3.
    # GPipe (no window): the fill passes both rows, T = 5.36e-3 + 6.56e-3 + 2*0.012 + 3 * 6.56e-3
    # = 0.0556 (version 2 counted t0 + t1 in the fill, 0.0516; the simulator's timeline has the rows)
    gpipe = variant(tiny_dict, options__exposed_comm=0.5, options__schedule="gpipe")
    assert evaluate(gpipe, PIPE).time_s == approx(0.0556)
    assert simulate(gpipe, PIPE).time_s == pytest.approx(0.0556, rel=1e-9)
    # 1F1B: stage 0's window of 2 micro-batches, round trip L_0 = 5.36e-3 + 6.56e-3 + 2*0.012
    # = 0.03592 (the rows carry the exposed part): T = 2 L_0 + tau = 0.0784
    inst = variant(tiny_dict, options__exposed_comm=0.5)
    ev = evaluate(inst, PIPE)
    assert ev.time_s == approx(0.0784)
    # busy time is compute only: U = m t, so busy energy is unchanged by kappa
    assert ev.busy_j == approx(4.032 + 8.208)
    assert ev.wait_j == approx(100 * (0.0784 - 0.01344) + 1.5 * 100 * (0.0784 - 0.01824))
    check_batch_matches(inst, PIPE, ev)


def test_exposed_comm_full_and_default(tiny_dict):
    # k = 1, GPipe: rows 7.36e-3 and 8.56e-3 = tau; T = 7.36e-3 + 8.56e-3 + 0.024 + 3 * 8.56e-3 = 0.0656
    ev = evaluate(variant(tiny_dict, options__exposed_comm=1.0, options__schedule="gpipe"), PIPE)
    assert ev.time_s == approx(0.0656)
    # 1F1B: rows 7.36e-3 and 8.56e-3, L_0 = 0.03992, T = 2 L_0 + 8.56e-3 = 0.0884
    assert evaluate(variant(tiny_dict, options__exposed_comm=1.0), PIPE).time_s == approx(0.0884)
    d = dict(tiny_dict, options={k: v for k, v in tiny_dict["options"].items() if k != "exposed_comm"})
    inst = variant(d)
    assert inst.options.exposed_comm == 0.25         # the default (model.md §3, §8)
    # rows 4.36e-3 and 5.56e-3, L_0 = 0.03392, T = 2 L_0 + 5.56e-3 = 0.0734
    assert evaluate(inst, PIPE).time_s == approx(0.0734)


def test_accumulation_steps(tiny_dict):
    # S = 2 flushes of q = 2: T = 2 * (3.36e-3 + 4.56e-3 + 0.024) + (4 - 2) * 4.56e-3 = 0.07296
    inst = variant(tiny_dict, options__accumulation_steps=2)
    ev = evaluate(inst, PIPE)
    assert ev.time_s == approx(0.07296)
    assert ev.busy_j == approx(4.032 + 8.208)         # same work
    # 1F1B in-flight counts are min(P - j, q) = 2 and 1, as with one step here
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 2 * 168_000_000)
    check_batch_matches(inst, PIPE, ev)


def test_accumulation_steps_more_than_micro_batches(tiny_dict):
    # S_k = min(8, 4) = 4 flushes of one micro-batch: T = 4 * 0.03192 = 0.12768
    inst = variant(tiny_dict, options__accumulation_steps=8, options__schedule="gpipe")
    ev = evaluate(inst, PIPE)
    assert ev.time_s == approx(0.12768)
    # GPipe keeps q = 1 micro-batch in flight (logits included on the last stage)
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 168_000_000)
    assert ev.memory_bytes["w0"] == approx(544_416_000 + 208_000_000)
    check_batch_matches(inst, PIPE, ev)


def test_gpipe_memory_with_two_steps(tiny_dict):
    inst = variant(tiny_dict, options__accumulation_steps=2, options__schedule="gpipe")
    ev = evaluate(inst, PIPE)
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 2 * 168_000_000)
    assert ev.memory_bytes["w0"] == approx(544_416_000 + 2 * 208_000_000)


def test_logits_once_under_recomputation(tiny_dict):
    # recompute full: act per layer 2sbh = 2e6 B, logits 4e7 B held once;
    # GPipe, 4 in flight: w0 = 16 * 34,026,000 + 2 * 2e6 * 4 + 4e7 = 600,416,000
    inst = variant(tiny_dict, model__recompute="full", options__schedule="gpipe")
    ev = evaluate(inst, PIPE)
    assert ev.memory_bytes["w0"] == approx(600_416_000)
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 2 * 2e6 * 4)
    # work 4F per layer: t0 = 2.24e11/5e13 = 4.48e-3, t1 = (2.24e11 + 6e10)/5e13 = 5.68e-3
    # forwards (a quarter of the layers' work, a third of the head's): f1 = (5.6e10 + 2e10)/5e13
    # = 1.52e-3 < o = 2e-3, so GPipe's forward phase runs at the link, the backward at
    # b1 = 4.16e-3: T = 4.48e-3 + 5.68e-3 + 0.024 + 3 * (2e-3 + 4.16e-3) = 0.05264 (kappa = 0)
    assert ev.time_s == approx(0.05264)
    check_batch_matches(inst, PIPE, ev)


def _with_nic(tiny_dict, east_nic, east_nic_2=None):
    devs = [dict(d) for d in tiny_dict["devices"]]
    devs[0]["nic_gbps"] = east_nic
    devs[1]["nic_gbps"] = east_nic if east_nic_2 is None else east_nic_2
    return variant(dict(tiny_dict, devices=devs))


def test_nic_share_caps_cross_node_bandwidth(tiny_dict):
    # east-n0 (e0, e1) has an 8 Gbit/s = 1e9 B/s NIC: each device gets 5e8 B/s off-node.
    # ring e0 <-> w0: beta_eff = min(1e9, 5e8) -> R = 2 * 69,052,000 / 5e8 + 2 * 0.01 = 0.296208
    inst = _with_nic(tiny_dict, 8)
    ev = evaluate(inst, Plan.make([["e0"], ["w0"]], [0, 4], [2, 2]))
    assert ev.allreduce_s == approx(0.296208)
    assert ev.time_s == approx(0.01584 + 0.296208)
    check_batch_matches(inst, Plan.make([["e0"], ["w0"]], [0, 4], [2, 2]), ev)
    # inside the node the NIC is not used: e0 <-> e1 as before
    ev2 = evaluate(inst, Plan.make([["e0"], ["e1"]], [0, 4], [2, 2]))
    assert ev2.allreduce_s == approx(1.38104e-3 + 2e-5)


def test_nic_share_in_pipeline(tiny_dict):
    # pipeline e0 -> w0: o = 2e6 / 5e8 = 4e-3, x = 0.014; kappa = 0. Without the window
    # T = 3.36e-3 + 4.56e-3 + 0.028 + 3 * 4.56e-3 = 0.04960; with it (1F1B, stage 0 holds
    # two): L_0 = 3.36e-3 + 4.56e-3 + 0.028 = 0.03592, T = 2 L_0 + 4.56e-3 = 0.0764
    ev = evaluate(_with_nic(tiny_dict, 8), PIPE)
    assert ev.time_s == approx(0.0764)


def test_nic_must_agree_within_a_node(tiny_dict):
    with pytest.raises(InstanceError) as e:
        _with_nic(tiny_dict, 8, 16)
    assert "devices[1].nic_gbps" in str(e.value) and "east-n0" in str(e.value)


@pytest.mark.parametrize("field,value,text", [
    ("options__exposed_comm", 1.5, "options.exposed_comm"),
    ("options__exposed_comm", -0.1, "options.exposed_comm"),
    ("options__accumulation_steps", 0, "options.accumulation_steps"),
    ("options__accumulation_steps", 1.5, "options.accumulation_steps"),
])
def test_v2_option_errors(tiny_dict, field, value, text):
    with pytest.raises(InstanceError) as e:
        variant(tiny_dict, **{field: value})
    assert text in str(e.value)
