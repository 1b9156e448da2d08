"""Issue 40: profiled per-layer times in Sailor's and Metis' formats become a GPU type's
efficiency curve; the files are written here from a known curve, which the import must
recover."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

import geotrain_opt as gt
from geotrain_opt.cost.calibrate import apply_calibration, load_calibration
from geotrain_opt.cost.profiles import import_profile
from geotrain_opt.errors import InstanceError

from .conftest import INSTANCES

DEMO = INSTANCES / "demo-8gpu.yaml"
TYPE = "A100-SXM4-40GB"
E, H = 0.62, 3000.0           # the curve the "measurements" follow: eff(n) = E n / (n + H)


def _layer_s(inst, b, tp=1):
    """One transformer layer's forward + backward of b sequences on one GPU of TYPE
    following the curve (degree tp: its share of the work plus a made-up all-reduce)."""
    m = inst.model
    peak = next(d.peak_flops for d in inst.devices if d.type == TYPE)
    n = b * m.seq_len / tp
    work = replace(m, micro_batch=b, recompute="none").layer_work_flop() / tp
    return work / (peak * E * n / (n + H)) + (0.0 if tp == 1 else 1e-3)


def _sailor(inst, path):
    L = inst.model.layers
    data = {str(b): {str(t): {str(i): ([1e-4, 2e-4, 1e-3] if i in (0, L + 1) else
                                       [_layer_s(inst, b, t) / 3, 2 * _layer_s(inst, b, t) / 3, 1e-3])
                              for i in range(L + 2)} for t in (1, 2)} for b in (1, 2, 4, 8)}
    path.write_text(json.dumps(data))


def _metis(inst, folder):
    L = inst.model.layers
    for b in (1, 2, 4):
        for t in (1, 2):
            ms = [0.3] + [_layer_s(inst, b, t) * 1e3] * L + [0.4]
            (folder / f"DeviceType.A100_tp{t}_bs{b}.json").write_text(json.dumps(
                {"model": {"model_name": "gpt2-medium", "num_layers": L + 2},
                 "execution_time": {"total_time_ms": sum(ms), "layer_compute_total_ms": ms}}))


@pytest.mark.parametrize("fmt", ["sailor", "metis"])
def test_the_curve_behind_the_profile_is_recovered(tmp_path, fmt):
    inst = gt.load_instance(DEMO)
    if fmt == "sailor":
        _sailor(inst, tmp_path / "profile.json")
        paths = [str(tmp_path / "profile.json")]
    else:
        _metis(inst, tmp_path)
        paths = [str(tmp_path)]
    cal = import_profile(inst, fmt, paths, TYPE)
    fit = cal["gpu_types"][TYPE]
    assert fit["efficiency"] == pytest.approx(E, rel=1e-9) and fit["half_tokens"] == pytest.approx(H, rel=1e-9)
    assert cal["fit"]["max_abs_error"] < 1e-9
    assert any("degree > 1 not fitted" in w for w in cal["warnings"])     # the TP-2 points
    # applied, a device of the type computes a layer in the profiled time
    dev = next(d for d in apply_calibration(inst, cal).devices if d.type == TYPE)
    n = inst.model.micro_batch * inst.model.seq_len
    assert dev.peak_flops * dev.efficiency_at(n) == pytest.approx(
        inst.model.layer_work_flop() / _layer_s(inst, inst.model.micro_batch), rel=1e-9)


def test_one_micro_batch_size_gives_a_constant_and_says_so(tmp_path):
    inst = gt.load_instance(DEMO)
    _metis(inst, tmp_path)
    cal = import_profile(inst, "metis", [str(tmp_path / "DeviceType.A100_tp1_bs2.json")], TYPE)
    fit = cal["gpu_types"][TYPE]
    n = 2 * inst.model.seq_len
    assert fit["half_tokens"] == 0 and fit["efficiency"] == pytest.approx(E * n / (n + H), rel=1e-9)
    assert any("do not vary the micro-batch" in w for w in cal["warnings"])


def test_profiles_that_cannot_be_this_model_are_refused(tmp_path):
    inst = gt.load_instance(DEMO)
    (tmp_path / "p.json").write_text(json.dumps({"1": {"1": {"0": [1e-4, 1e-4], "1": [1e-9, 1e-9], "2": [1e-4, 1e-4]}}}))
    with pytest.raises(InstanceError, match="x the peak"):
        import_profile(inst, "sailor", [str(tmp_path / "p.json")], TYPE)
    (tmp_path / "p.json").write_text(json.dumps({"1": {"2": {"0": [1, 1], "1": [1, 1], "2": [1, 1]}}}))
    with pytest.raises(InstanceError, match="no point at tensor-parallel degree 1"):
        import_profile(inst, "sailor", [str(tmp_path / "p.json")], TYPE)
    (tmp_path / "p.json").write_text(json.dumps({"1": {"1": {"0": [1, "x"]}}}))
    with pytest.raises(InstanceError, match=r"profile\.1\.1\.0\[1\]"):
        import_profile(inst, "sailor", [str(tmp_path / "p.json")], TYPE)
    with pytest.raises(InstanceError, match="--gpu-type"):
        import_profile(inst, "sailor", [str(tmp_path / "p.json")], "H200")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InstanceError, match="not a Metis profile name"):
        import_profile(inst, "metis", [str(tmp_path / "bad.json")], TYPE)


def test_cli_writes_a_calibration_that_evaluate_applies(tmp_path):
    inst = gt.load_instance(DEMO)
    _sailor(inst, tmp_path / "profile.json")
    run = lambda *a: subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    r = run("import-profile", "--format", "sailor", tmp_path / "profile.json", "--instance", DEMO,
            "--gpu-type", TYPE, "--out", tmp_path / "cal.json")
    assert r.returncode == 0, r.stderr
    assert load_calibration(tmp_path / "cal.json")["gpu_types"][TYPE]["half_tokens"] == pytest.approx(H, rel=1e-9)
    (tmp_path / "plan.json").write_text(json.dumps(
        {"grid": [["va-0", "va-1"]], "cuts": [0, 12, 24], "micro_batches": [8]}))
    r = run("evaluate", DEMO, tmp_path / "plan.json", "--calibration", tmp_path / "cal.json", "--json")
    assert r.returncode in (0, 1) and "time_s" in r.stdout, r.stderr
    r = run("import-profile", "--format", "sailor", tmp_path / "nope.json", "--instance", DEMO, "--gpu-type", TYPE)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
