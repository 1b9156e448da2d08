"""The discrete-event simulator: hand-computed schedules exactly, the analytic
model where it is exact (GPipe; balanced pipelines without communication)."""
from __future__ import annotations

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.simulate import simulate, stage_order

from .conftest import variant


def test_1f1b_order():
    assert stage_order(2, 0, 4, "1f1b") == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    assert stage_order(2, 1, 4, "1f1b") == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]
    assert stage_order(3, 0, 2, "gpipe") == [("F", 0), ("F", 1), ("B", 1), ("B", 0)]


def test_two_stages_across_the_wan_by_hand(tiny):
    # e0 -> w0, cuts [0,2,4], m = 4. Stage 0: 3.36 ms per micro-batch (F 1.12, B 2.24);
    # stage 1: 4.56 ms (F = 1.68e11/3 + 2e10 FLOP -> 1.52 ms, B 3.04 ms); hop 10 + 2 ms.
    plan = Plan.make([["e0", "w0"]], [0, 2, 4], [4])
    r = simulate(tiny, plan, record=True)
    # 1F1B keeps at most two micro-batches in flight on stage 0, so the 12 ms hops are
    # not hidden: S0 runs F0 F1 | B0 at 29.68 F2 | B1 at 34.24 F3 | B2 at 61.6 | B3 66.16-68.4
    assert r.time_s == pytest.approx(0.0684, rel=1e-12)
    s0 = [(k, i, round(s * 1e3, 6)) for d, k, i, s, _e in r.ops if d == "e0"]
    assert s0 == [("F", 0, 0.0), ("F", 1, 1.12), ("B", 0, 29.68), ("F", 2, 31.92), ("B", 1, 34.24),
                  ("F", 3, 36.48), ("B", 2, 61.6), ("B", 3, 66.16)]
    assert r.busy_s["e0"] == pytest.approx(4 * 3.36e-3) and r.busy_s["w0"] == pytest.approx(4 * 4.56e-3)
    # the analytic model charges the same window (model.md §3.1): 2 round trips of
    # 31.92 ms and one period of 4.56 ms, 68.4 ms (version 2, without it: 45.6 ms)
    assert evaluate(tiny, plan).time_s == pytest.approx(0.0684, rel=1e-12)


def test_gpipe_by_hand_link_bound_forwards(tiny_dict):
    inst = variant(tiny_dict, options__schedule="gpipe")
    plan = Plan.make([["e0", "w0"]], [0, 2, 4], [4])
    r = simulate(inst, plan)
    # stage 0's forwards (1.12 ms) outpace the WAN link (2 ms per activation), so
    # activations reach w0 at 13.12, 15.12, 17.12, 19.12 ms; w0 ends its backwards at
    # 23.68 .. 32.8; gradients arrive at 35.68 .. 44.8; e0's last backward ends 47.04 ms.
    assert r.time_s == pytest.approx(0.04704, rel=1e-12)
    # the analytic model (version 3) gives each phase its own bottleneck: the forwards
    # the link's 2 ms, the backwards w0's 3.04 ms, 3.36 + 4.56 + 24 + 3 (2 + 3.04) = 47.04 ms
    # (version 2 charged one max(t_j, A/beta) = 4.56 ms per micro-batch: 45.6 ms)
    assert evaluate(inst, plan).time_s == pytest.approx(0.04704, rel=1e-12)


def test_rendezvous_by_hand(tiny_dict):
    inst = variant(tiny_dict, options__schedule="gpipe", model__global_batch=1)
    plan = Plan.make([["e0", "w0"]], [0, 2, 4], [1])
    plain, rv = simulate(inst, plan), simulate(inst, plan, rendezvous=True)
    # plain: F0 ends 1.12, arrives 13.12; w0 runs to 17.68; gradient arrives 29.68; end 31.92 ms
    assert plain.time_s == pytest.approx(0.03192, rel=1e-12)
    # rendezvous: w0 posts its receive at 0, the notice reaches e0 at 10 ms, the
    # activation arrives at 22; w0 ends 26.56; e0 posted at 1.12 (notice at 11.12,
    # already past), the gradient arrives 38.56; end 40.8 ms
    assert rv.time_s == pytest.approx(0.0408, rel=1e-12)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("m", [1, 3, 8])
def test_balanced_pipeline_without_communication(tiny_dict, schedule, m):
    # four equal stages on one node, network made free: both schedules run in
    # (m + P - 1) * t, exactly the analytic sum(t) + (m - 1) * tau
    d = dict(tiny_dict)
    d["devices"] = [{"count": 4, "type": "fast", "region": "east", "node": "n0", "id_prefix": "g"}]
    d["network"] = {"intra_node": {"latency_ms": 0, "bandwidth_gbps": 1e12}}
    d["energy"] = {"net_j_per_byte": 0.0}
    d["model"] = {**tiny_dict["model"], "layers": 8, "vocab": 8, "global_batch": m}
    inst = variant(d, options__schedule=schedule)
    plan = Plan.make([["g0", "g1", "g2", "g3"]], [0, 2, 4, 6, 8], [m])
    assert simulate(inst, plan).time_s == pytest.approx(evaluate(inst, plan).time_s, rel=1e-6)


def test_ring_allreduce_step_by_step(tiny):
    # D = 2 on one node: 2(D-1) = 2 steps of N/2 gradient bytes each way, 1e-5 s latency
    plan = Plan.make([["e0"], ["e1"]], [0, 4], [2, 2])
    r = simulate(tiny, plan)
    assert r.allreduce_s == pytest.approx(2 * (1e-5 + 2 * 69_052_000 / 2 / 1e11), rel=1e-12)
    assert r.time_s == pytest.approx(evaluate(tiny, plan).time_s, rel=1e-12)   # one edge pair: equal


def test_shared_links_slow_down_parallel_wan_transfers(tiny):
    plan = Plan.make([["e0", "w0"], ["e1", "w1"]], [0, 1, 4], [2, 2])
    own, shared = simulate(tiny, plan), simulate(tiny, plan, shared_links=True)
    assert shared.time_s > own.time_s


def test_the_model_vs_simulator_guard(tiny):
    """solve attaches the simulated time of its plan where that is cheap, and warns
    when the cost model is more than 10 % off (formulations/simulator.md)."""
    from geotrain_opt.cost.simulate import simulation_check
    # 1F1B over the WAN: the window makes the two agree (68.4 ms both)
    ok = simulation_check(tiny, Plan.make([["e0", "w0"]], [0, 2, 4], [4]), 0.0684)
    assert ok["time_s"] == pytest.approx(0.0684, rel=1e-12) and abs(ok["error"]) < 1e-9 and "warning" not in ok
    # two replicas: each stage's ring starts when that stage is done, in both (model.md
    # §3.3): e1 -> w1 (w1 slow, t = 9.12 ms) 3.36 + 9.12 + 24 + 9.12 = 45.6 ms, then stage 0's
    # ring (e0, e1 on one node: 2 * 35,026,000 B / 1e11 B/s + 2 * 0.01 ms) 0.72052 ms; stage 1's
    # (7.0052 ms) runs while stage 0 drains. Before §3.3 the cost model charged 45.6 + 7.0052
    # ms, 13.6 % above the simulator, and the guard said so; it says so of any such claim
    plan = Plan.make([["e0", "w0"], ["e1", "w1"]], [0, 2, 4], [2, 2])
    T = evaluate(tiny, plan).time_s
    assert T == pytest.approx(0.04632052, rel=1e-12)
    same = simulation_check(tiny, plan, T)
    assert abs(same["error"]) < 1e-9 and "warning" not in same
    off = simulation_check(tiny, plan, 0.0526052)
    assert off["error"] == pytest.approx(0.04632052 / 0.0526052 - 1, rel=1e-9) and "warning" in off
    assert simulation_check(tiny, plan, T, max_ops=10) is None          # too big to simulate: not done
    res = __import__("geotrain_opt").solve(tiny, "greedy", time_limit=30)        # a constructive plan, no search
    assert res.stats["simulation"]["analytic_s"] == res.evaluation.time_s
