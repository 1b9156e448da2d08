"""Dollars and grams per iteration (formulations/model.md §9), worked out by hand on
the tiny instance (constants in tests/test_evaluator_hand.py), and the cost and
carbon objectives through the solvers.

Prices: fast GPUs 3.6 USD/h (1e-3 USD/s), slow 1.8 USD/h; egress east<->west
0.09 USD/GB (9e-11 USD/B). Carbon: east 360 g/kWh (1e-4 g/J), west 720 g/kWh (2e-4 g/J).
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.errors import InstanceError
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

from .conftest import reference_and_batch

REL = 1e-12


def priced(tiny_dict, *, reverse_egress=None, **objective):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["price_per_hour"] = 3.6
    d["gpu_types"]["slow"]["price_per_hour"] = 1.8
    link = d["network"]["inter_region"][0]
    link["egress_usd_per_gb"] = 0.09
    if reverse_egress is not None:
        d["network"]["inter_region"].append({"a": "west", "b": "east", "latency_ms": link["latency_ms"],
                                             "bandwidth_gbps": link["bandwidth_gbps"],
                                             "egress_usd_per_gb": reverse_egress})
    d["energy"]["carbon_g_per_kwh"] = {"east": 360, "west": 720}
    d["objective"] = {"kind": "time", **objective}
    return instance_from_dict(d)


def both(inst, plan):
    return reference_and_batch(inst, plan, "cost_usd", "carbon_g")


def test_pipeline_across_regions(tiny_dict):
    inst = priced(tiny_dict)
    ev = both(inst, Plan.make([["e0", "w0"]], [0, 2, 4], [4]))
    # T = 0.0684 (1F1B's window: tests/test_evaluator_hand.py)
    assert ev.time_s == pytest.approx(0.0684, rel=REL)
    # two fast GPUs for T: 0.0684 * 2e-3; 4 activations east->west and 4 gradients back, 2e6 B each, 9e-11 USD/B
    assert ev.cost_usd == pytest.approx(0.0684 * 2e-3 + 2 * 8e6 * 9e-11, rel=REL)
    # e0: (4.032 + 5.496) J at 1e-4 g/J; w0 (PUE 1.5 included): (8.208 + 7.524) J at 2e-4;
    # network 1.6e7 B * 1e-8 J/B at the mean 1.5e-4 g/J
    assert ev.carbon_g == pytest.approx(9.528e-4 + 15.732 * 2e-4 + 0.16 * 1.5e-4, rel=REL)
    assert ev.to_dict()["cost_usd"] == ev.cost_usd and ev.to_dict()["carbon_g"] == ev.carbon_g


def test_egress_is_priced_per_direction(tiny_dict):
    inst = priced(tiny_dict, reverse_egress=0.01)          # west -> east is cheaper
    ev = both(inst, Plan.make([["e0", "w0"]], [0, 2, 4], [4]))
    assert ev.cost_usd == pytest.approx(0.0684 * 2e-3 + 8e6 * 9e-11 + 8e6 * 1e-11, rel=REL)


def test_data_parallel_ring_across_regions(tiny_dict):
    inst = priced(tiny_dict)
    ev = both(inst, Plan.make([["e0"], ["w0"]], [0, 4], [2, 2]))
    # T = 2 * 7.92e-3 + 2*69,052,000/1e9 + 2*0.01 = 0.173944; each directed ring edge sends 138,104,000 B
    assert ev.time_s == pytest.approx(0.173944, rel=REL)
    assert ev.cost_usd == pytest.approx(0.173944 * 2e-3 + 2 * 138_104_000 * 9e-11, rel=REL)


def test_within_a_region_no_egress_and_the_slow_gpu_is_cheaper(tiny_dict):
    inst = priced(tiny_dict)
    ev = both(inst, Plan.make([["w1"]], [0, 4], [4]))
    # slow GPU alone: t = 3.96e11 / 2.5e13 per micro-batch, T = 4t, no wait, no link
    T = 4 * 3.96e11 / 2.5e13
    assert ev.time_s == pytest.approx(T, rel=REL)
    assert ev.cost_usd == pytest.approx(T * 5e-4, rel=REL)
    assert ev.carbon_g == pytest.approx(1.5 * 200 * T * 2e-4, rel=REL)


def test_unpriced_instances_report_neither(tiny):
    ev = evaluate(tiny, Plan.make([["e0", "w0"]], [0, 2, 4], [4]))
    assert ev.cost_usd is None and ev.carbon_g is None
    assert "cost_usd" not in ev.to_dict() and "carbon_g" not in ev.to_dict()
    b = BatchEvaluator(tiny).evaluate_plans([Plan.make([["e0"]], [0, 4], [4])])[0]
    assert b.cost_usd is None and b.carbon_g is None


def test_batched_equals_reference_on_random_plans(tiny_dict):
    from geotrain_opt.io.generate import generate
    d = generate("geo", 16, 3)
    for i, t in enumerate(sorted({dev["type"] for dev in d["devices"]})):
        d.setdefault("gpu_types", {})[t] = {"price_per_hour": 1.0 + i}
    for e in d["network"]["inter_region"]:
        e["egress_usd_per_gb"] = 0.02 + 0.01 * len(e["a"])
    d.setdefault("energy", {})["net_j_per_byte"] = 1e-7
    d["energy"]["carbon_g_per_kwh"] = {r: 100.0 * (k + 1) for k, r in enumerate(sorted({x["region"] for x in d["devices"]}))}
    inst = instance_from_dict(d)
    rng = np.random.default_rng(0)
    ev_b = BatchEvaluator(inst)
    L, M = inst.model.layers, inst.model.num_micro_batches
    for D, P in [(1, 3), (2, 2), (3, 4)]:
        if M % D:
            continue
        grids = np.stack([rng.permutation(inst.n)[: D * P].reshape(D, P) for _ in range(20)])
        cuts = np.stack([np.r_[0, np.sort(rng.choice(np.arange(1, L), P - 1, replace=False)), L] for _ in range(20)])
        mb = np.full((20, D), M // D)
        res = ev_b(grids, cuts, mb)
        for i in range(20):
            ev = evaluate(inst, Plan.from_indices(inst.ids, grids[i], cuts[i], mb[i]))
            assert res.cost_usd[i] == pytest.approx(ev.cost_usd, rel=1e-10)
            assert res.carbon_g[i] == pytest.approx(ev.carbon_g, rel=1e-10)


def test_bad_price_fields(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["price_per_hour"] = -1
    with pytest.raises(InstanceError, match=r"gpu_types.fast.price_per_hour: must not be negative"):
        instance_from_dict(d)
    d = copy.deepcopy(tiny_dict)
    d["energy"]["carbon_g_per_kwh"] = {"mars": 100}
    with pytest.raises(InstanceError, match=r"energy.carbon_g_per_kwh.mars: unknown region"):
        instance_from_dict(d)
    d = copy.deepcopy(tiny_dict)
    d["network"]["intra_region"]["egress_usd_per_gb"] = 0.1       # egress is what leaves a region
    with pytest.raises(InstanceError, match=r"network.intra_region.egress_usd_per_gb: unknown field"):
        instance_from_dict(d)


def test_cost_and_carbon_objectives_bruteforce_and_memetic_agree(tiny_dict):
    for kind, metric in (("cost", "cost_usd"), ("carbon", "carbon_g")):
        inst = priced(tiny_dict, kind=kind)
        best = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
        assert best.status == "optimal" and best.objective_value == getattr(best.evaluation, metric)
        heur = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=0, extra={"generations": 20}))
        assert heur.objective_value == pytest.approx(best.objective_value, rel=1e-9)
        fastest = get("bruteforce")(inst.with_options(kind="time"), SolveOptions(time_limit_s=60))
        # the fastest plan is no cheaper (it is what a time-only planner would pick)
        assert getattr(fastest.evaluation, metric) >= best.objective_value * (1 - 1e-12)
        for name in ("greedy", "random-search", "simulated-annealing", "dtfm"):
            r = get(name)(inst, SolveOptions(time_limit_s=5, seed=0, extra={"max_evaluations": 500}
                                             if name in ("random-search", "simulated-annealing") else {}))
            assert r.objective_value == getattr(r.evaluation, metric) >= best.objective_value * (1 - 1e-12)


def test_cheapest_plan_on_the_tiny_instance_is_the_slow_gpu(tiny_dict):
    inst = priced(tiny_dict, kind="cost")
    best = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
    # a single device pays no wait and no egress; per FLOP the slow GPU costs 5e-4/2.5e13 = 2e-17 USD
    # against 1e-3/5e13 = 2e-17 for a fast one: a tie on cost, broken by time (the fast one)
    assert best.plan.devices in (["e0"], ["e1"], ["w0"]) and best.plan.replicas == 1
    assert best.objective_value == pytest.approx(0.03168 * 1e-3, rel=REL)


def test_cost_limit_binds(tiny_dict):
    inst = priced(tiny_dict, kind="time", max_cost_usd=3.3e-5)   # the fastest plan costs 3.448e-5
    res = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
    assert res.evaluation.cost_usd <= 3.3e-5 and res.evaluation.acceptable
    unlimited = get("bruteforce")(inst.with_options(max_cost_usd=None), SolveOptions(time_limit_s=60))
    assert unlimited.evaluation.time_s < res.evaluation.time_s
    with pytest.raises(InstanceError, match="objective.kind: cost needs prices"):
        instance_from_dict(tiny_dict).with_options(kind="cost")


@pytest.mark.parametrize("model", ["devices", "classes"])
@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_exact_engines_prove_the_brute_force_optimum(tiny_dict, engine, model):
    """Cost and carbon are modelled as energy is, at other rates (formulations/exact.md §3.4):
    both engines, both models, objectives and limits, against brute force."""
    cases = [dict(kind="cost"), dict(kind="carbon"), dict(kind="time", max_cost_usd=3.3e-5),
             dict(kind="time", max_carbon_g=1.2e-3), dict(kind="energy", max_cost_usd=4e-4)]
    for objective in cases:
        for reverse in (None, 0.01):
            inst = priced(tiny_dict, reverse_egress=reverse, **objective)
            ref = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
            res = get(engine)(inst, SolveOptions(time_limit_s=60, extra={"exact_model": model}))
            assert res.status == ref.status == "optimal", (objective, reverse)
            assert res.objective_value == pytest.approx(ref.objective_value, rel=1e-6), (objective, reverse)
            # ties broken as brute force breaks them: by T
            assert res.evaluation.time_s == pytest.approx(ref.evaluation.time_s, rel=1e-6), (objective, reverse)
            assert res.evaluation.acceptable


def test_exact_priced_on_a_generated_instance():
    """8 devices in 4 regions, egress and carbon: CP-SAT and the MILP agree with
    each other and with the memetic plan (which can only be worse)."""
    from geotrain_opt.io.generate import generate
    d = generate("small", 8, 2)
    for i, t in enumerate(sorted({dev["type"] for dev in d["devices"]})):
        d.setdefault("gpu_types", {})[t] = {"price_per_hour": [2.0, 0.9, 3.1, 1.4][i % 4]}
    for e in d["network"].get("inter_region", []):
        e["egress_usd_per_gb"] = 0.05
    d.setdefault("energy", {})["carbon_g_per_kwh"] = {r: 50.0 + 300.0 * k for k, r in
                                                      enumerate(sorted({x["region"] for x in d["devices"]}))}
    d["energy"].setdefault("net_j_per_byte", 5e-8)
    for kind in ("cost", "carbon"):
        d["objective"] = {"kind": kind}
        inst = instance_from_dict(d)
        a = get("cpsat")(inst, SolveOptions(time_limit_s=60))
        b = get("milp")(inst, SolveOptions(time_limit_s=60))
        h = get("memetic")(inst, SolveOptions(time_limit_s=30, seed=0, extra={"generations": 15}))
        assert a.status == b.status == "optimal"
        assert a.objective_value == pytest.approx(b.objective_value, rel=1e-6)
        assert h.objective_value >= a.objective_value * (1 - 1e-9)


@pytest.mark.parametrize("objectives", [("cost", "carbon"), ("time", "cost"), ("carbon", "energy")])
def test_fronts_over_any_two_metrics(tiny_dict, objectives):
    """Exact ε-walks (both engines) equal brute force's own front; NSGA-II's points are
    dominated by or equal to it."""
    from geotrain_opt.analysis.fronts import front_points, pareto_front
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"].update(price_per_hour=3.6, clocks=[{"fraction": 0.5, "busy_w": 120}])
    d["gpu_types"]["slow"]["price_per_hour"] = 1.8
    d["network"]["inter_region"][0]["egress_usd_per_gb"] = 0.09
    d["energy"]["carbon_g_per_kwh"] = {"east": 400, "west": 120}
    inst = instance_from_dict(d)
    ref = front_points(pareto_front(inst, "bruteforce", SolveOptions(time_limit_s=120), 0, objectives))
    assert len(ref) >= 2
    for engine in ("cpsat", "milp"):
        got = front_points(pareto_front(inst, engine, SolveOptions(time_limit_s=120), 50, objectives))
        assert len(got) == len(ref)
        for (a, b), (x, y) in zip(sorted(got), sorted(ref)):
            assert a == pytest.approx(x, rel=1e-6) and b == pytest.approx(y, rel=1e-6)
    heur = pareto_front(inst, "memetic", SolveOptions(time_limit_s=30, seed=0, extra={"generations": 20}), 0,
                        objectives)
    assert heur.stats["front"] == list(objectives)
    for a, b in front_points(heur):
        assert any(x <= a * (1 + 1e-9) and y <= b * (1 + 1e-9) for x, y in ref)


def test_intensities_at_the_top_level_read_the_same(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["carbon_g_per_kwh"] = {"east": 360, "west": 720}
    top = instance_from_dict(d)
    assert top.carbon_region == priced(tiny_dict).carbon_region
    d["energy"]["carbon_g_per_kwh"] = {"east": 1}
    with pytest.raises(InstanceError, match="carbon_g_per_kwh: given twice"):
        instance_from_dict(d)
    d = copy.deepcopy(tiny_dict)
    d["carbon_g_per_kwh"] = {"mars": 5}
    with pytest.raises(InstanceError, match=r"carbon_g_per_kwh.mars: unknown region"):
        instance_from_dict(d)


def test_a_front_over_choices_keeps_its_own_metrics(tiny_dict):
    """With micro-batch sizes and recomputation (§11) brute force runs per choice and
    the fronts are merged: the merge must filter by the front's own pair (time, carbon
    here: five points, a different set from the time-energy filter's), not by time and
    energy. Oracle: each choice's front alone, merged by hand;
    CP-SAT's ε-walk (choices searched with the shapes) must find the same front."""
    from geotrain_opt.analysis.fronts import front_points, pareto_front
    from geotrain_opt.cost.objective import pareto_filter
    from geotrain_opt.solvers import spec
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"].update(price_per_hour=3.6, clocks=[{"fraction": 0.5, "busy_w": 120}])
    d["gpu_types"]["slow"]["price_per_hour"] = 1.8
    d["network"]["inter_region"][0]["egress_usd_per_gb"] = 0.09
    d["energy"]["carbon_g_per_kwh"] = {"east": 400, "west": 120}
    d["model"]["micro_batch_options"] = [1, 2]
    d["model"]["recompute_options"] = ["none", "full"]
    inst = instance_from_dict(d)
    pair = ("time", "carbon")
    pts = []
    for b, r in inst.model.choices():
        own = spec("bruteforce").load()(inst.variant(b, r), SolveOptions(time_limit_s=120,
                                                                          extra={"pareto": True, "front": list(pair)}))
        pts += [(p.evaluation.time_s, p.evaluation.carbon_g) for p in own.pareto]
    oracle = sorted(pts[i] for i in pareto_filter(pts))
    assert len(oracle) == 5
    for engine, points in (("bruteforce", 0), ("cpsat", 50)):
        got = sorted(front_points(pareto_front(inst, engine, SolveOptions(time_limit_s=120), points, pair)))
        assert len(got) == len(oracle), engine
        for (a, b), (x, y) in zip(got, oracle):
            assert a == pytest.approx(x, rel=1e-6) and b == pytest.approx(y, rel=1e-6), engine
