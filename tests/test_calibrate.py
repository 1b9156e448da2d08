"""calibrate: least squares recovers parameters that generated the 'measurements'."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from geotrain_opt import Plan, evaluate, load_instance
from geotrain_opt.cost.calibrate import apply_calibration, calibrate, read_runs
from geotrain_opt.errors import InstanceError

from .conftest import TINY

PLANS = [
    Plan.make([["e0", "w0"]], [0, 2, 4], [4]),
    Plan.make([["w1", "e1"]], [0, 1, 4], [4]),
    Plan.make([["e0"], ["w1"]], [0, 4], [2, 2]),
    Plan.make([["e0", "w1"], ["e1", "w0"]], [0, 2, 4], [2, 2]),
    Plan.make([["w1", "e0", "w0"]], [0, 1, 2, 4], [4]),
]
TRUE = {"gpu_types": {"fast": {"efficiency": 0.37}, "slow": {"efficiency": 0.62}},
        "options": {"exposed_comm": 0.3}}


def _runs_folder(tmp_path):
    inst = load_instance(TINY)
    truth = apply_calibration(inst, TRUE)
    (tmp_path / "tiny.yaml").write_text(TINY.read_text())
    rows = ["# synthetic measurements", "instance,plan,measured_s"]
    for i, p in enumerate(PLANS):
        (tmp_path / f"p{i}.json").write_text(json.dumps(p.to_dict()))
        rows.append(f"tiny.yaml,p{i}.json,{float(evaluate(truth, p).time_s)!r}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    return tmp_path / "runs.csv"


def test_calibrate_recovers_generating_parameters(tmp_path):
    # every message between nodes crosses the one east-west link, so kappa is told
    # apart from gamma only with gamma left out (tests/test_host_stack.py fits both)
    cal = calibrate(read_runs(_runs_folder(tmp_path)), ("efficiency", "exposed_comm"))
    assert cal["gpu_types"]["fast"]["efficiency"] == pytest.approx(0.37, rel=1e-5)
    assert cal["gpu_types"]["slow"]["efficiency"] == pytest.approx(0.62, rel=1e-5)
    assert cal["options"]["exposed_comm"] == pytest.approx(0.3, abs=1e-5)
    assert cal["fit"]["points"] == 5 and cal["fit"]["median_abs_rel_err"] < 1e-7


def test_calibrate_efficiency_only_keeps_kappa(tmp_path):
    cal = calibrate(read_runs(_runs_folder(tmp_path)), ("efficiency",))
    assert "options" not in cal
    assert cal["fit"]["median_abs_rel_err"] > 1e-4      # kappa 0 cannot explain kappa 0.3 runs


def test_cli_calibrate_then_evaluate(tmp_path):
    csv = _runs_folder(tmp_path)
    out = tmp_path / "cal.json"
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "calibrate", str(csv), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "evaluate", str(tmp_path / "tiny.yaml"),
                        str(tmp_path / "p0.json"), "--calibration", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = evaluate(apply_calibration(load_instance(TINY), TRUE), PLANS[0]).time_s
    assert json.loads(r.stdout)["time_s"] == pytest.approx(want, rel=1e-6)


def test_bad_runs_file(tmp_path):
    (tmp_path / "runs.csv").write_text("instance,plan\nx.yaml,p.json\n")
    with pytest.raises(InstanceError, match="measured_s"):
        read_runs(tmp_path / "runs.csv")
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "calibrate", str(tmp_path / "runs.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_calibration_file(tmp_path):
    (tmp_path / "cal.json").write_text(json.dumps({"options": {"exposed_comm": 3}}))
    (tmp_path / "p.json").write_text(json.dumps(PLANS[0].to_dict()))
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "evaluate", str(TINY), str(tmp_path / "p.json"),
                        "--calibration", str(tmp_path / "cal.json")], capture_output=True, text=True)
    assert r.returncode == 2 and "exposed_comm" in r.stderr


def test_predict_batches_every_run_as_the_reference_evaluates_it():
    """``predict`` (called for every step of the fit) applies a calibration once per
    instance and evaluates the runs' plans in batches; each run's T is the reference
    evaluator's on the calibrated instance, over two instances and four shapes."""
    from geotrain_opt.cost.calibrate import Run, predict
    tiny, demo = load_instance(TINY), load_instance("instances/demo-8gpu.yaml")
    plans = [(tiny, Plan.make([["e0", "w0"]], [0, 2, 4], [4])), (tiny, Plan.make([["e0"], ["e1"]], [0, 4], [2, 2])),
             (tiny, Plan.make([["e0", "e1"]], [0, 1, 4], [4])), (tiny, Plan.make([["e0", "w0"]], [0, 1, 4], [4])),
             (demo, Plan.make([["va-0", "va-2"], ["va-1", "va-3"]], [0, 14, 24], [4, 4]))]
    runs = [Run(inst, plan, 1.0, f"run {i}") for i, (inst, plan) in enumerate(plans)]
    cal = {"gpu_types": {"fast": {"efficiency": 0.4}}, "options": {"exposed_comm": 0.3, "host_stack_gbps": 20.0}}
    want = [evaluate(apply_calibration(r.instance, cal), r.plan).time_s for r in runs]
    assert predict(runs, cal) == pytest.approx(want, rel=1e-12)
    assert want[0] != want[3]          # the calibration and the plans matter
