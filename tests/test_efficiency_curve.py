"""Efficiency as a function of the work (formulations/model.md §1, cost model v3):
eff(n) = efficiency * n / (n + half_tokens) for micro-batches of n tokens, by hand
on the tiny instance (constants of tests/test_choices.py), across the solvers, and
fitted back by calibrate."""
from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.bounds import instance_bound
from geotrain_opt.cost.calibrate import apply_calibration, calibrate, read_runs
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

REL = 1e-12
# tiny: per layer w = 3 F, F = b * 1000 * (24e6 + 4e6); head 6 b s h V = 6e10 b; M = 4 / b
WORK_B1 = 4 * 8.4e10 + 6e10          # one micro-batch of b = 1 through all four layers and the head


def curved(tiny_dict, half: float, options=(1, 2)):
    d = copy.deepcopy(tiny_dict)
    for t in d["gpu_types"].values():
        t["half_tokens"] = half
    d["model"]["micro_batch_options"] = list(options)
    return instance_from_dict(d)


def test_by_hand_on_one_device(tiny_dict):
    """fast: peak 100 TFLOP/s, efficiency 0.5, half_tokens 1000 (= s): at b = 1 it
    computes at 0.5 * 1000 / 2000 = 0.25 of peak, at b = 2 at 0.5 * 2000 / 3000 = 1/3."""
    inst = curved(tiny_dict, 1000.0)
    one = Plan.make([["e0"]], [0, 4], [4])
    assert evaluate(inst, one).time_s == pytest.approx(4 * WORK_B1 / 2.5e13, rel=REL)
    two = replace(Plan.make([["e0"]], [0, 4], [2]), micro_batch=2)
    assert evaluate(inst, two).time_s == pytest.approx(2 * 2 * WORK_B1 / (1e14 / 3), rel=REL)
    # without the curve both take 4 W / 5e13: the same work at the same speed
    flat = curved(tiny_dict, 0.0)
    assert evaluate(flat, one).time_s == pytest.approx(evaluate(flat, two).time_s, rel=REL)
    assert inst.arrays.speed[inst.index["w1"]] == pytest.approx(50e12 * 0.25, rel=REL)
    from geotrain_opt.io.describe import describe_instance
    assert "fast 0.5 x n/(n + 1000), 0.25 at micro-batch 1" in describe_instance(inst)


def test_a_curve_is_a_constant_at_each_size(tiny_dict):
    """Cross-check: every plan costs what it costs with the constant efficiency the
    curve gives at its micro-batch size, in the reference, batched and simulated paths."""
    from geotrain_opt.cost.evaluator import BatchEvaluator
    inst = curved(tiny_dict, 1500.0, options=())
    d = copy.deepcopy(tiny_dict)
    for t in d["gpu_types"].values():
        t["efficiency"] = 0.5 * 1000 / 2500
    const = instance_from_dict(d)
    for plan in (Plan.make([["e0", "w0"]], [0, 2, 4], [4]), Plan.make([["e0", "w1"], ["e1", "w0"]], [0, 1, 4], [2, 2]),
                 Plan.make([["w1", "e0", "w0"]], [0, 1, 2, 4], [4])):
        a, b = evaluate(inst, plan), evaluate(const, plan)
        assert (a.time_s, a.energy_j) == pytest.approx((b.time_s, b.energy_j), rel=REL)
        assert BatchEvaluator(inst).evaluate_plans([plan])[0].time_s[0] == pytest.approx(a.time_s, rel=1e-9)
        assert simulate(inst, plan).time_s == pytest.approx(simulate(const, plan).time_s, rel=1e-9)


def test_the_curve_moves_the_best_micro_batch(tiny_dict):
    """Constant efficiency: b = 1 (the shortest fill) is optimal; with GEMMs that
    need 2,000 tokens to reach half speed, the solvers prove b = 2 instead."""
    found = {}
    for half in (0.0, 2000.0):
        inst = curved(tiny_dict, half)
        res = get("cpsat")(inst, SolveOptions(time_limit_s=60))
        brute = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
        assert res.status == brute.status == "optimal"
        assert res.objective_value == pytest.approx(brute.objective_value, rel=1e-6)
        bound, _ = instance_bound(inst)
        assert bound <= res.objective_value * (1 + 1e-9)
        found[half] = res.plan.micro_batch or inst.model.micro_batch
    assert found == {0.0: 1, 2000.0: 2}


def test_bad_half_tokens(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["half_tokens"] = -1
    with pytest.raises(InstanceError, match=r"gpu_types\.fast\.half_tokens.*negative"):
        instance_from_dict(d)
    d["gpu_types"]["fast"]["half_tokens"] = "many"
    with pytest.raises(InstanceError, match=r"gpu_types\.fast\.half_tokens"):
        instance_from_dict(d)


# ------------------------------------------------------------------ calibrate
TRUE = {"gpu_types": {"fast": {"efficiency": 0.6, "half_tokens": 1200.0},
                      "slow": {"efficiency": 0.45, "half_tokens": 400.0}},
        "options": {"exposed_comm": 0.3}}
PLANS = [Plan.make([["e0", "w0"]], [0, 2, 4], [4]), Plan.make([["w1", "e1"]], [0, 1, 4], [4]),
         Plan.make([["e0"], ["w1"]], [0, 4], [2, 2]), Plan.make([["e0", "w1"], ["e1", "w0"]], [0, 2, 4], [2, 2]),
         Plan.make([["w1", "e0", "w0"]], [0, 1, 2, 4], [4]), Plan.make([["w1"]], [0, 4], [4])]


def _runs(tmp_path, tiny_dict, sizes):
    """Runs 'measured' on the tiny instance with the TRUE curves, each plan at each
    micro-batch size in ``sizes`` (its split rescaled)."""
    d = copy.deepcopy(tiny_dict)
    d["model"]["micro_batch_options"] = [1, 2]
    (tmp_path / "tiny.json").write_text(json.dumps(d))
    truth = apply_calibration(instance_from_dict(d), TRUE)
    rows = ["instance,plan,measured_s"]
    for i, p in enumerate(PLANS):
        for b in sizes:
            q = replace(p, micro_batch=None if b == 1 else b, micro_batches=tuple(m // b for m in p.micro_batches))
            (tmp_path / f"p{i}b{b}.json").write_text(json.dumps(q.to_dict()))
            rows.append(f"tiny.json,p{i}b{b}.json,{float(evaluate(truth, q).time_s)!r}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    return read_runs(tmp_path / "runs.csv")


def test_calibrate_recovers_the_curves(tmp_path, tiny_dict):
    cal = calibrate(_runs(tmp_path, tiny_dict, (1, 2)), ("efficiency", "half_tokens", "exposed_comm"))
    for t, v in TRUE["gpu_types"].items():
        assert cal["gpu_types"][t]["efficiency"] == pytest.approx(v["efficiency"], rel=1e-4), t
        assert cal["gpu_types"][t]["half_tokens"] == pytest.approx(v["half_tokens"], rel=1e-3), t
    assert cal["options"]["exposed_comm"] == pytest.approx(0.3, abs=1e-5)
    assert cal["fit"]["median_abs_rel_err"] < 1e-7 and cal["warnings"] == []


def test_one_micro_batch_size_cannot_identify_a_curve(tmp_path, tiny_dict):
    """At one size a curve is indistinguishable from a constant: held (at 0, the
    instance's), said so, and the efficiency fitted is the curve's value there."""
    cal = calibrate(_runs(tmp_path, tiny_dict, (2,)), ("efficiency", "half_tokens", "exposed_comm"))
    assert "half_tokens" not in cal["gpu_types"]["fast"]
    assert sum("half_tokens of" in w and "held" in w for w in cal["warnings"]) == 2
    assert cal["gpu_types"]["fast"]["efficiency"] == pytest.approx(0.6 * 2000 / 3200, rel=1e-4)
    assert cal["fit"]["median_abs_rel_err"] < 1e-7


def test_as_many_parameters_as_runs_is_said(tmp_path, tiny_dict):
    """Three parameters on three runs used to report an error of 1e-16 and nothing
    else; fewer runs than parameters is refused."""
    runs = _runs(tmp_path, tiny_dict, (1,))
    cal = calibrate([runs[0], runs[1], runs[3]], ("efficiency", "exposed_comm"))
    assert any("3 parameters on 3 runs" in w for w in cal["warnings"])
    with pytest.raises(InstanceError, match="3 parameters .* but only 2 measured run"):
        calibrate(runs[:2], ("efficiency", "exposed_comm"))


def test_runs_that_do_not_vary_a_parameter(tmp_path, tiny_dict):
    """kappa with single-stage runs only: nothing depends on it, it is held. Two
    types whose runs each use both in one fixed proportion cannot be told apart."""
    runs = _runs(tmp_path, tiny_dict, (1, 2))
    single = [r for r in runs if r.plan.stages == 1]
    cal = calibrate(single, ("efficiency", "exposed_comm"))
    assert "options" not in cal and any(w.startswith("exposed_comm held") for w in cal["warnings"])
    mixed = [r for r in runs if set(r.plan.devices) == {"e0", "w1"} and r.plan.stages == 1]
    assert len(mixed) == 2      # e0 and w1 as two replicas: T = max of the two, only the slower counts
    cal = calibrate(mixed, ("efficiency",))
    assert any("not determined" in w for w in cal["warnings"]), cal["warnings"]
