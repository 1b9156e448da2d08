"""The hosts' network stack (``host_stack_gbps`` gamma, formulations/model.md §3): a
pipeline message between nodes holds both its stages A/gamma more. By hand on the
tiny instance with the timelines drawn out, against the simulator, across the exact
solvers, and fitted back by calibrate.

tiny (instances/tiny-4gpu-2region.yaml, kappa 0): a layer is 8.4e10 FLOP per
micro-batch, the head 6e10; fast devices compute 5e13 FLOP/s. Cut [0, 2, 4]: stage 0
t0 = 1.68e11 / 5e13 = 3.36 ms (forward 1.12, backward 2.24), stage 1 t1 = 2.28e11 / 5e13
= 4.56 ms (forward 1.52, backward 3.04). A message is 2e6 bytes: e0 -> w0 (east to west,
1e9 B/s, 10 ms) takes x = 12 ms; e0 -> e1 (one node, 1e11 B/s, 0.01 ms) x = 0.03 ms.
A host stack of 3.2 Gbit/s (4e8 B/s) holds each message between nodes A/gamma = 5 ms.
"""
from __future__ import annotations

import copy
import csv
import json

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.cost.calibrate import apply_calibration, calibrate, load_calibration, read_runs
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get

REL = 1e-12
ACROSS = Plan.make([["e0", "w0"]], [0, 2, 4], [4])      # two nodes: every message pays A/gamma
WITHIN = Plan.make([["e0", "e1"]], [0, 2, 4], [4])      # one node: none does


def with_mu(tiny_dict, mu_ms: float, schedule: str = "gpipe", kappa: float = 0.0):
    """tiny with a host stack that holds each 2e6-byte message between nodes mu_ms."""
    d = copy.deepcopy(tiny_dict)
    d["options"].update(schedule=schedule, exposed_comm=kappa)
    if mu_ms:
        d["options"]["host_stack_gbps"] = 2e6 * 8 / (mu_ms * 1e-3) / 1e9
    return instance_from_dict(d)


def test_gpipe_by_hand(tiny_dict):
    """A/gamma = 5 ms: each forward and backward of a stage holds it 5 ms more per message
    between nodes (e = 5 ms on the one hop). GPipe, four micro-batches:

        stage 0  F0 0-6.12  F1 -12.24  F2 -18.36  F3 -24.48   ...  B0 64.24-71.48 ... B3 88.36-95.60
        link        x = 12 ms each way
        stage 1  F0 18.12-24.64 ... F3 37.68-44.20  B0 -52.24 ... B3 68.32-76.36

    T = (t0 + 2e) + 2x + 4 (t1 + 2e) = 13.36 + 24 + 58.24 = 95.60 ms, which is
    S (r0 + r1 + 2x) + (m - S) tau with r_j = t_j + 2e, tau = r1 = 14.56 ms."""
    inst = with_mu(tiny_dict, 5.0)
    assert evaluate(inst, ACROSS).time_s == pytest.approx(95.60e-3, rel=REL)
    assert simulate(inst, ACROSS).time_s == pytest.approx(95.60e-3, rel=1e-9)
    # inside a node the host stack is not passed: 3.36 + 4.56 + 0.06 + 3 * 4.56
    assert evaluate(inst, WITHIN).time_s == pytest.approx(21.66e-3, rel=REL)
    assert evaluate(with_mu(tiny_dict, 0.0), WITHIN).time_s == pytest.approx(21.66e-3, rel=REL)
    # without a host stack the forward phase is link-bound (o = 2 ms > f1 = 1.52 ms), so the
    # period is 2 + 3.04 ms: 3.36 + 4.56 + 24 + 3 * 5.04 = 47.04 (tests/test_simulate.py's timeline)
    assert evaluate(with_mu(tiny_dict, 0.0), ACROSS).time_s == pytest.approx(47.04e-3, rel=REL)


def test_1f1b_window_by_hand(tiny_dict):
    """1F1B: stage 0 holds two micro-batches, so F2 waits for B0, whose round trip is
    L0 = r0 + r1 + 2x = 13.36 + 14.56 + 24 = 51.92 ms: T = 2 L0 + tau = 118.40 ms."""
    inst = with_mu(tiny_dict, 5.0, schedule="1f1b")
    assert evaluate(inst, ACROSS).time_s == pytest.approx(118.40e-3, rel=REL)
    assert simulate(inst, ACROSS).time_s == pytest.approx(118.40e-3, rel=1e-9)


def test_kappa_and_the_host_stack_add_up(tiny_dict):
    """e = kappa o + A/gamma: kappa 0.5 (o = 2 ms) and A/gamma = 4 ms is e = 5 ms, the case above."""
    inst = with_mu(tiny_dict, 4.0, kappa=0.5)
    assert evaluate(inst, ACROSS).time_s == pytest.approx(95.60e-3, rel=REL)
    bev = BatchEvaluator(inst).evaluate_plans([ACROSS, WITHIN])
    assert bev[0].time_s[0] == pytest.approx(95.60e-3, rel=1e-9)
    assert bev[1].time_s[0] == pytest.approx(evaluate(inst, WITHIN).time_s, rel=1e-9)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_exact_solvers_agree_with_brute_force(tiny_dict, schedule):
    """With a host stack the node of every stage matters: CP-SAT and brute force prove the same
    optimum, and it is worse than without it only where a message must leave a node."""
    inst = with_mu(tiny_dict, 20.0, schedule=schedule)
    brute = get("bruteforce")(inst, SolveOptions(time_limit_s=120))
    cp = get("cpsat")(inst, SolveOptions(time_limit_s=120))
    assert brute.status == cp.status == "optimal"
    assert cp.objective_value == pytest.approx(brute.objective_value, rel=1e-6)
    assert evaluate(inst, cp.plan).time_s == pytest.approx(cp.objective_value, rel=1e-9)
    # a pipeline inside east-n0 pays no host stack: the optimum is no worse than that plan
    assert cp.objective_value <= evaluate(inst, WITHIN).time_s * (1 + 1e-9)


def test_bad_value_names_the_field(tiny_dict):
    d = copy.deepcopy(tiny_dict)
    d["options"]["host_stack_gbps"] = 0
    with pytest.raises(InstanceError, match="host_stack_gbps"):
        instance_from_dict(d)


def _runs(tmp_path, tiny_dict, kappa: float, mu_ms: float, bandwidths: tuple[float, ...]) -> list:
    """Runs 'measured' with the model itself at (kappa, mu), on the tiny instance with
    the east-west link at each bandwidth, through a pipeline across nodes and one within."""
    rows = []
    for i, bw in enumerate(bandwidths):
        d = copy.deepcopy(tiny_dict)
        d["network"]["inter_region"][0]["bandwidth_gbps"] = bw
        d["name"], d["options"]["schedule"] = f"bw{i}", "gpipe"
        (tmp_path / f"bw{i}.json").write_text(json.dumps(d))
        truth = with_mu(d, mu_ms, kappa=kappa)
        for name, plan in (("across", ACROSS), ("within", WITHIN), ("across8", Plan.make([["e0", "w0"]], [0, 1, 4], [4]))):
            (tmp_path / f"{name}.json").write_text(json.dumps(plan.to_dict()))
            rows.append({"instance": f"bw{i}.json", "plan": f"{name}.json",
                         "measured_s": repr(float(evaluate(truth, plan).time_s))})
    with (tmp_path / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["instance", "plan", "measured_s"])
        w.writeheader()
        w.writerows(rows)
    return read_runs(tmp_path / "runs.csv")


def test_calibrate_recovers_kappa_and_mu(tmp_path, tiny_dict):
    """Messages across nodes at two bandwidths tell kappa from mu: both come back."""
    runs = _runs(tmp_path, tiny_dict, 0.3, 6.0, (8.0, 2.0))
    cal = calibrate(runs, ("exposed_comm", "host_stack_gbps"))
    assert cal["options"]["exposed_comm"] == pytest.approx(0.3, abs=1e-4)
    assert cal["options"]["host_stack_gbps"] == pytest.approx(16e6 / 6.0 / 1e9 * 1e3, rel=1e-4)   # 6 ms
    assert cal["fit"]["median_abs_rel_err"] < 1e-6
    # the calibration file round-trips into an instance in ms
    (tmp_path / "cal.json").write_text(json.dumps(cal))
    inst = apply_calibration(runs[0].instance, load_calibration(tmp_path / "cal.json"))
    assert inst.arrays.mu == pytest.approx(6e-3, rel=1e-4)


def test_calibrate_holds_kappa_when_it_cannot_tell_them_apart(tmp_path, tiny_dict):
    """One bandwidth: kappa o and A/gamma move every run alike, so kappa is held (at the
    instance's 0) with a warning and gamma takes it all: e = 0.3 * 2 + 6 = 6.6 ms."""
    runs = _runs(tmp_path, tiny_dict, 0.3, 6.0, (8.0,))
    cal = calibrate(runs, ("exposed_comm", "host_stack_gbps"))
    assert "exposed_comm" not in cal.get("options", {})
    assert any("exposed_comm held at 0" in w and "fit alike" in w for w in cal["warnings"])
    assert cal["options"]["host_stack_gbps"] == pytest.approx(16e6 / 6.6 / 1e9 * 1e3, rel=1e-3)


def test_calibrate_holds_mu_without_a_message_between_nodes(tmp_path, tiny_dict):
    runs = [r for r in _runs(tmp_path, tiny_dict, 0.3, 6.0, (8.0,)) if "within" in r.label]
    cal = calibrate(runs, ("host_stack_gbps", "efficiency"))
    assert any("host_stack_gbps held at none" in w for w in cal["warnings"])
    with pytest.raises(InstanceError, match="host_stack_gbps"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"options": {"host_stack_gbps": -2}}))
        load_calibration(bad)
