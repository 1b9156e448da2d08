"""Costs of the tiny instance worked out by hand from formulations/model.md §3.

Constants of instances/tiny-4gpu-2region.yaml (b=1, s=h=1000, a=10, V=1e4, M=4):
  F = s*(24h^2 + 4sh) = 2.8e10, layer work w = 3F = 8.4e10 FLOP
  layer params 12h^2 + 13h = 12,013,000; activations s*h*(34 + 5as/h) = 8.4e7 B
  boundary A = s*h*2 = 2e6 B; embeddings V*h + s*h = 1.1e7; head params 1e7,
  head work 6*s*h*V = 6e10 FLOP, logits 4*s*V = 4e7 B
  speeds: fast 5e13 FLOP/s, slow 2.5e13; power fast 300/100 W, slow 200/50 W
  links: same node 1e-5 s / 1e11 B/s, same region 1e-4 s / 1e10, east-west 1e-2 s / 1e9
  PUE west 1.5; network energy 1e-8 J/B
"""
from __future__ import annotations

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.evaluator import BatchEvaluator

from .conftest import variant

REL = 1e-12


def approx(x):
    return pytest.approx(x, rel=REL)


def check_batch_matches(inst, plan, ev):
    b = BatchEvaluator(inst).evaluate_plans([plan])[0]
    assert b.time_s[0] == pytest.approx(ev.time_s, rel=1e-12)
    assert b.energy_j[0] == pytest.approx(ev.energy_j, rel=1e-12)
    assert bool(b.feasible[0]) == ev.feasible


def test_single_device(tiny):
    # W = 4w + head = 3.96e11; t = 7.92e-3; T = t + 3t = 0.03168; U = T so no wait energy
    plan = Plan.make([["e0"]], [0, 4], [4])
    ev = evaluate(tiny, plan)
    assert ev.feasible and ev.violations == []
    assert ev.time_s == approx(0.03168)
    assert ev.pipeline_s == approx(0.03168) and ev.allreduce_s == 0.0
    assert ev.busy_j == approx(9.504) and ev.wait_j == approx(0.0) and ev.network_j == 0.0
    assert ev.energy_j == approx(9.504)
    # N = 4*12,013,000 + 1.1e7 + 1e7 = 69,052,000 -> 16 B each; act = 4*8.4e7 + 4e7, 1 in flight
    assert ev.memory_bytes == {"e0": approx(1_104_832_000 + 376_000_000)}
    check_batch_matches(tiny, plan, ev)


def test_pipeline_only_cross_region(tiny):
    # t0 = 1.68e11/5e13 = 3.36e-3, t1 = 2.28e11/5e13 = 4.56e-3, link x = 0.01 + 2e6/1e9 = 0.012
    # without the window: T = 3.36e-3 + 4.56e-3 + 2*0.012 + 3*4.56e-3 = 0.0456. Under 1F1B
    # stage 0 holds at most 2 of the 4 micro-batches (model.md §3.1): each pair waits one
    # round trip L_0 = t0 + t1 + 2x = 0.03192, so T = 2 L_0 + 1 * tau (tau = t1) = 0.0684
    # (stage 1: 4 t1 + t0 + 2x = 0.04968 < 0.0684); the simulator's timeline: test_simulate.py
    plan = Plan.make([["e0", "w0"]], [0, 2, 4], [4])
    ev = evaluate(tiny, plan)
    assert ev.feasible
    assert ev.time_s == approx(0.0684)
    # busy: 300*0.01344 + 1.5*300*0.01824; wait: 100*(0.0684 - 0.01344) + 1.5*100*(0.0684 - 0.01824)
    assert ev.busy_j == approx(4.032 + 8.208)
    assert ev.wait_j == approx(5.496 + 7.524)
    # 2 * m * A = 1.6e7 bytes cross east-west at 1e-8 J/B
    assert ev.cross_region_bytes == approx(1.6e7)
    assert ev.network_j == approx(0.16)
    assert ev.energy_j == approx(12.24 + 13.02 + 0.16)
    # 1F1B: stage 0 keeps min(2, 4) = 2 micro-batches, stage 1 keeps 1
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 2 * 168_000_000)
    assert ev.memory_bytes["w0"] == approx(544_416_000 + 208_000_000)
    check_batch_matches(tiny, plan, ev)


def test_gpipe_memory(tiny_dict):
    inst = variant(tiny_dict, options__schedule="gpipe")
    ev = evaluate(inst, Plan.make([["e0", "w0"]], [0, 2, 4], [4]))
    # GPipe's phases (model.md §3): the forwards run at the link's 2 ms, the backwards at
    # w0's 3.04 ms: 3.36 + 4.56 + 24 + 3 * (2 + 3.04) = 47.04 ms (1F1B's window: 68.4 ms)
    assert ev.time_s == approx(0.04704)
    assert ev.memory_bytes["e0"] == approx(560_416_000 + 4 * 168_000_000)
    assert ev.memory_bytes["w0"] == approx(544_416_000 + 4 * 208_000_000)


def test_data_parallel_only(tiny):
    # T_k = 2t = 0.01584; ring e0<->e1 on one node: R = 2*69,052,000/1e11 + 2e-5
    plan = Plan.make([["e0"], ["e1"]], [0, 4], [2, 2])
    ev = evaluate(tiny, plan)
    assert ev.feasible
    assert ev.allreduce_s == approx(1.38104e-3 + 2e-5)
    assert ev.time_s == approx(0.01584 + 1.40104e-3)
    assert ev.busy_j == approx(9.504)
    assert ev.wait_j == approx(2 * 100 * 1.40104e-3)
    assert ev.network_j == 0.0
    check_batch_matches(tiny, plan, ev)


def test_ring_across_regions_network_energy(tiny):
    # R = 2*69,052,000/1e9 + 2*0.01 = 0.158104; two directed ring edges cross the WAN,
    # each carries 2(D-1)/D * 2 B * N = 138,104,000 B
    plan = Plan.make([["e0"], ["w0"]], [0, 4], [2, 2])
    ev = evaluate(tiny, plan)
    assert ev.time_s == approx(0.01584 + 0.158104)
    assert ev.cross_region_bytes == approx(276_208_000)
    assert ev.network_j == approx(2.76208)
    assert ev.busy_j == approx(4.752 + 7.128)
    assert ev.wait_j == approx(15.8104 + 23.7156)
    assert ev.energy_j == approx(54.16808)
    check_batch_matches(tiny, plan, ev)


def test_pipeline_and_data_parallel_uneven_cuts(tiny):
    plan = Plan.make([["e0", "w0"], ["e1", "w1"]], [0, 1, 4], [2, 2])
    ev = evaluate(tiny, plan)
    # replica 0: 1.68e-3 + 6.24e-3 + 0.024 + 6.24e-3; replica 1 (slow w1): 1.68e-3 + 2*1.248e-2 + 0.024
    assert ev.replica_times_s == [approx(0.03816), approx(0.05064)]
    # ring stage 0 on one node (N0 = 23,013,000), stage 1 across nodes (N1 = 46,039,000)
    assert ev.stage_allreduce_s == [approx(4.6026e-4 + 2e-5), approx(9.2078e-3 + 2e-4)]
    # the rings start after their stage's drain (model.md §3.3): stage 0's at
    # max T_k = 50.64 ms, stage 1's at max(38.16, 50.64) - (2/3 1.68 + 12) = 37.52 ms,
    # so T = max(50.64 + 0.48026, 37.52 + 9.4078) = 51.12026 ms (60.0478 before §3.3)
    assert ev.stage_sync_start_s == [approx(0.05064), approx(0.03752)]
    assert ev.time_s == approx(0.05112026)
    assert ev.busy_j == approx(1.008 + 1.008 + 5.616 + 7.488)
    # waiting at 100 W (e0, e1), 150 W (w0, PUE 1.5), 75 W (w1) for T less 3.36, 3.36, 12.48, 24.96 ms
    assert ev.wait_j == approx(2 * 4.776026 + 5.796039 + 1.9620195)
    assert ev.network_j == approx(0.16)
    assert ev.energy_j == approx(1.008 + 1.008 + 5.616 + 7.488 + 17.3101105 + 0.16)
    assert ev.memory_bytes == {"e0": approx(536_208_000), "e1": approx(536_208_000),
                               "w0": approx(1_028_624_000), "w1": approx(1_028_624_000)}
    check_batch_matches(tiny, plan, ev)


def test_memory_infeasible(tiny_dict):
    d = dict(tiny_dict)
    d["gpu_types"] = {**tiny_dict["gpu_types"], "slow": {**tiny_dict["gpu_types"]["slow"], "memory_gib": 1}}
    inst = variant(d)
    plan = Plan.make([["w1"]], [0, 4], [4])
    ev = evaluate(inst, plan)
    assert not ev.feasible
    assert len(ev.violations) == 1 and ev.violations[0].startswith("memory: w1")
    assert ev.memory_bytes["w1"] == approx(1_480_832_000)   # > 0.9 GiB usable
    check_batch_matches(inst, plan, ev)


def test_structural_violations(tiny):
    ev = evaluate(tiny, Plan.make([["e0", "e0"]], [0, 2, 4], [3]))
    text = " | ".join(ev.violations)
    assert not ev.feasible
    assert "used twice" in text and "micro_batches" in text


@pytest.mark.parametrize("cuts", [[0, 3, 3], [0, 14, 30], [0, 5, 4], [1, 2, 4], [0, -1, 4]])
def test_cuts_without_a_layer_range_are_errors(tiny, cuts):
    """No cost exists for such cuts: one PlanError, in evaluate, simulate and --hint alike."""
    from geotrain_opt.errors import PlanError
    from geotrain_opt.cost.simulate import simulate
    plan = Plan.make([["e0", "w0"]], cuts, [4])
    for fn in (evaluate, simulate):
        with pytest.raises(PlanError, match=r"plan: cuts: need 0 = c_0 < c_1 < ... < c_P = 4"):
            fn(tiny, plan)


def test_uniform_split_enforced(tiny):
    ev = evaluate(tiny, Plan.make([["e0"], ["e1"]], [0, 4], [1, 3]))
    assert not ev.feasible and any("uniform" in v for v in ev.violations)


def test_free_split_accepts_uneven(tiny_dict):
    inst = variant(tiny_dict, options__batch_split="free")
    ev = evaluate(inst, Plan.make([["e0"], ["w1"]], [0, 4], [3, 1]))
    assert ev.feasible
    # replica 0: 3 * 7.92e-3; replica 1 on slow: 1 * 1.584e-2 -> max 0.02376
    assert ev.pipeline_s == approx(0.02376)


def test_epsilon_limits_reported(tiny_dict):
    inst = variant(tiny_dict, objective__max_time_s=0.02)
    ev = evaluate(inst, Plan.make([["e0"]], [0, 4], [4]))
    assert ev.feasible and not ev.within_limits
    assert ev.limit_violations[0].startswith("max_time_s")
