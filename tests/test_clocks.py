"""GPU clocks as a decision (formulations/model.md §10), by hand on the tiny instance
(constants in tests/test_evaluator_hand.py; exposed_comm 0 there) with the fast type
also able to run at half clock drawing 120 W."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.errors import InstanceError, PlanError
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

from .conftest import reference_and_batch

REL = 1e-12


def clocked(tiny_dict, **objective):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["clocks"] = [{"fraction": 0.5, "busy_w": 120}, {"fraction": 0.75, "busy_w": 190}]
    d["objective"] = {"kind": "time", **objective}
    return instance_from_dict(d)


def both(inst, plan):
    return reference_and_batch(inst, plan, "time_s", "energy_j")


def test_levels_fastest_first(tiny_dict):
    inst = clocked(tiny_dict)
    assert inst.devices[0].levels == ((1.0, 300.0), (0.75, 190.0), (0.5, 120.0))
    assert inst.devices[3].levels == ((1.0, 200.0),)          # the slow type lists none


def test_one_device_at_half_clock(tiny_dict):
    inst = clocked(tiny_dict)
    ev = both(inst, Plan.make([["e0"]], [0, 4], [4], {"e0": 0.5}))
    # t = 3.96e11 / (0.5 * 5e13) = 0.01584 per micro-batch, T = 4t; busy at 120 W, no wait
    assert ev.time_s == pytest.approx(0.06336, rel=REL)
    assert ev.busy_j == pytest.approx(120 * 0.06336, rel=REL) and ev.wait_j == pytest.approx(0.0, abs=1e-15)
    full = evaluate(inst, Plan.make([["e0"]], [0, 4], [4]))
    assert full.energy_j == pytest.approx(9.504, rel=REL) and ev.energy_j < full.energy_j


def test_slow_stage_off_the_critical_path(tiny_dict):
    inst = clocked(tiny_dict)
    ev = both(inst, Plan.make([["e0", "w0"]], [0, 2, 4], [4], {"e0": 0.5}))
    # t0 = 1.68e11 / 2.5e13 = 6.72e-3 (now the slowest stage), t1 = 4.56e-3, x = 0.012;
    # 1F1B's window on stage 0 (two of four in flight): 2 (t0 + t1 + 2x) + t0 = 0.07728
    assert ev.time_s == pytest.approx(2 * (6.72e-3 + 4.56e-3 + 0.024) + 6.72e-3, rel=REL)
    assert ev.busy_j == pytest.approx(120 * 4 * 6.72e-3 + 1.5 * 300 * 4 * 4.56e-3, rel=REL)
    assert ev.wait_j == pytest.approx(100 * (0.07728 - 0.02688) + 150 * (0.07728 - 0.01824), rel=REL)
    assert ev.energy_j == pytest.approx(11.4336 + 13.896 + 0.16, rel=REL)


def test_plan_files_carry_clocks(tiny_dict, tmp_path):
    plan = Plan.make([["e0", "w0"]], [0, 2, 4], [4], {"e0": 0.75, "w0": 1.0})
    assert plan.clocks == (("e0", 0.75),) and plan.to_dict()["clocks"] == {"e0": 0.75}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(plan.to_dict()))
    assert Plan.load(f) == plan
    assert "clocks" not in Plan.make([["e0"]], [0, 4], [4]).to_dict()        # files without clocks: unchanged
    inst = clocked(tiny_dict)
    with pytest.raises(PlanError, match=r"clocks: device 'e0' has no clock 0.6 \(its clocks: 1, 0.75, 0.5\)"):
        evaluate(inst, Plan.make([["e0"]], [0, 4], [4], {"e0": 0.6}))
    with pytest.raises(PlanError, match=r"clocks: device 'e1' is not in the grid"):
        Plan.from_dict({"grid": [["e0"]], "cuts": [0, 4], "micro_batches": [4], "clocks": {"e1": 0.5}})


@pytest.mark.parametrize("clocks, field, words", [
    ([{"fraction": 1.2, "busy_w": 100}], "gpu_types.fast.clocks[0].fraction", "at most 1"),
    ([{"fraction": 0.5, "busy_w": 90}], "gpu_types.fast.clocks[0].busy_w", "below wait power 100"),
    ([{"fraction": 0.5, "busy_w": 150}, {"fraction": 0.5, "busy_w": 160}], "gpu_types.fast.clocks[1].fraction",
     "listed twice"),
    ([{"fraction": 1.0, "busy_w": 250}], "gpu_types.fast.clocks[0].busy_w", "clock 1 is the type's own"),
    ({"fraction": 0.5}, "gpu_types.fast.clocks", "expected a list"),
    ("defaults", "gpu_types.fast.clocks", "or 'default'"),
    ([{"fraction": 0.5, "watts": 150}], "gpu_types.fast.clocks[0].watts", "unknown field"),
])
def test_bad_clocks(tiny_dict, clocks, field, words):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["clocks"] = clocks
    with pytest.raises(InstanceError) as e:
        instance_from_dict(d)
    assert e.value.field == field and words in str(e.value)


def test_default_clock_table(tiny_dict):
    """``clocks: default``: P(f) = wait + (busy - wait) f^3 at 0.85 and 0.7, at the type's
    (or device's) own powers: fast 300/100 W -> 100 + 200 * 0.614125 and 100 + 200 * 0.343;
    a catalog A100 (400/85 W) at 0.7 -> 85 + 315 * 0.343 = 193.045."""
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["clocks"] = "default"
    d["devices"][3]["type"] = "A100-SXM4-40GB"
    d["devices"][3]["clocks"] = "default"
    inst = instance_from_dict(d)
    assert inst.devices[0].levels == ((1.0, 300.0), (0.85, 222.8), (0.7, 168.6))
    assert inst.devices[3].levels == ((1.0, 400.0), (0.85, 278.4), (0.7, 193.0))


def test_batched_clocks_equal_reference_on_random_plans(tiny_dict):
    inst = clocked(tiny_dict)
    rng = np.random.default_rng(1)
    ev = BatchEvaluator(inst)
    for D, P in [(1, 2), (2, 2), (1, 4), (4, 1)]:
        grids = np.stack([rng.permutation(inst.n)[: D * P].reshape(D, P) for _ in range(30)])
        cuts = np.tile(np.linspace(0, 4, P + 1).astype(int), (30, 1))
        mb = np.full((30, D), 4 // D)
        clk = rng.integers(0, 3, size=(30, D, P)) * (inst.arrays.n_levels[grids] > 1)
        res = ev(grids, cuts, mb, clk)
        for i in range(30):
            levels = {inst.ids[g]: inst.devices[g].levels[c][0] for g, c in zip(grids[i].ravel(), clk[i].ravel())}
            ref = evaluate(inst, Plan.from_indices(inst.ids, grids[i], cuts[i], mb[i], levels))
            assert res.time_s[i] == pytest.approx(ref.time_s, rel=1e-12)
            assert res.energy_j[i] == pytest.approx(ref.energy_j, rel=1e-12)


@pytest.mark.parametrize("objective", [dict(kind="energy"), dict(kind="weighted", **{"lambda": 0.5}),
                                       dict(kind="time"), dict(kind="time", max_energy_j=12.0)])
def test_memetic_reaches_the_brute_force_optimum_with_clocks(tiny_dict, objective):
    inst = clocked(tiny_dict, **objective)
    best = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
    assert best.status == "optimal"
    for seed in range(3):
        heur = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=seed, extra={"generations": 25}))
        assert heur.objective_value == pytest.approx(best.objective_value, rel=1e-9), seed
        assert heur.evaluation.energy_j == pytest.approx(best.evaluation.energy_j, rel=1e-9), seed


def test_clocks_save_energy_at_equal_time(tiny_dict):
    """The fastest plan leaves a stage idle part of the time: a lower clock there keeps
    T and saves energy, which the time objective's tie-break (least E) finds."""
    plain = get("bruteforce")(instance_from_dict(tiny_dict), SolveOptions(time_limit_s=60))
    inst = clocked(tiny_dict)
    best = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
    assert best.evaluation.time_s == pytest.approx(plain.evaluation.time_s, rel=1e-12)
    assert best.evaluation.energy_j <= plain.evaluation.energy_j
    energy = get("bruteforce")(clocked(tiny_dict, kind="energy"), SolveOptions(time_limit_s=120))
    unclocked = get("bruteforce")(variant_energy(tiny_dict), SolveOptions(time_limit_s=60))
    assert energy.evaluation.energy_j < unclocked.evaluation.energy_j            # the lever pays
    assert energy.plan.clocks                                                    # and is used


def variant_energy(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["objective"] = {"kind": "energy"}
    return instance_from_dict(d)


@pytest.mark.parametrize("model", ["devices", "classes"])
@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_exact_engines_prove_the_brute_force_optimum_with_clocks(tiny_dict, engine, model):
    """A device (class) at each of its clocks is one unit of the model (formulations/exact.md
    §3.8): the optimum equals brute force's, objective and tie-break, for every objective."""
    cases = [dict(kind="energy"), dict(kind="weighted", **{"lambda": 0.3}), dict(kind="time"),
             dict(kind="time", max_energy_j=12.0), dict(kind="energy", max_time_s=0.03)]
    for objective in cases:
        inst = clocked(tiny_dict, **objective)
        ref = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
        res = get(engine)(inst, SolveOptions(time_limit_s=60, extra={"exact_model": model}))
        assert res.status == ref.status == "optimal", objective
        assert res.objective_value == pytest.approx(ref.objective_value, rel=1e-6), objective
        assert res.evaluation.energy_j == pytest.approx(ref.evaluation.energy_j, rel=1e-6), objective
        assert res.evaluation.time_s == pytest.approx(ref.evaluation.time_s, rel=1e-6), objective


def test_exact_carbon_with_clocks_and_a_hint(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["clocks"] = [{"fraction": 0.6, "busy_w": 150}]
    d["gpu_types"]["slow"]["clocks"] = [{"fraction": 0.5, "busy_w": 90}]
    d["energy"]["carbon_g_per_kwh"] = {"east": 400, "west": 100}
    d["objective"] = {"kind": "carbon"}
    inst = instance_from_dict(d)
    ref = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
    hint = Plan.make([["w0", "w1"]], [0, 2, 4], [4], {"w1": 0.5})
    for engine in ("cpsat", "milp"):
        res = get(engine)(inst, SolveOptions(time_limit_s=60, hint=hint))
        assert res.status == "optimal" and res.objective_value == pytest.approx(ref.objective_value, rel=1e-6)


def test_simulator_runs_each_device_at_its_clock(tiny_dict):
    from geotrain_opt.cost.simulate import simulate
    inst = clocked(tiny_dict)
    plan = Plan.make([["e0"]], [0, 4], [4], {"e0": 0.5})
    sim, ev = simulate(inst, plan), evaluate(inst, plan)
    # one device, no transfers: the discrete-event run is the analytic one
    assert sim.time_s == pytest.approx(ev.time_s, rel=1e-12) and sim.energy_j == pytest.approx(ev.energy_j, rel=1e-12)
    assert sim.time_s == pytest.approx(2 * simulate(inst, Plan.make([["e0"]], [0, 4], [4])).time_s, rel=1e-12)
