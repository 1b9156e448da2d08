"""DT-FM's scenarios and measured configurations under cost model v2."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from geotrain_opt.problem import dtfm_scenarios as dt
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.problem.plan import Plan

SETTINGS = [(L, B) for L in (24, 32, 40) for B in (1024, 2048, 4096)]


def plans(case: str, L: int, B: int):
    inst = instance_from_dict(dt.scenario(case, L, B))
    mb = [inst.model.num_micro_batches // 8] * 8
    return inst, {lay: Plan.make(dt.layout_grid(inst.ids, lay), dt.equal_cuts(L, 8), mb)
                  for lay in ("strided", "blocked")}


@pytest.mark.parametrize("case", ["1", "3", "4", "5"])
def test_the_configurations_dtfm_ran_are_feasible(case):
    for L, B in SETTINGS:
        inst, p = plans(case, L, B)
        ev = evaluate(inst, p["strided"])
        assert ev.feasible, ev.violations
        # version 1 kept the logits of all 64 in-flight micro-batches: 64 x 4bsV = 24.5 GiB alone
        last = p["strided"].grid[0][-1]
        v1_extra = (64 - 1) * 4 * 2048 * 50257
        assert ev.memory_bytes[last] + v1_extra > 0.9 * 16 * 2**30 > ev.memory_bytes[last]


def test_megatron_layout_at_default_settings():
    """Measured, the Megatron layout (pipelines across instances) is slower in all nine
    settings. At default settings (no host network stack, model.md §3) the model says
    so only from B = 2048 on: at B = 1024 the strided layout's ring across instances
    weighs more than the pipelines' kappa o. With the stack fitted on Cases 1 and 3 it
    ranks all nine as measured (test_calibrated_on_cases_1_and_3)."""
    for L, B in SETTINGS:
        inst, p = plans("1", L, B)
        slower = evaluate(inst, p["blocked"]).time_s > evaluate(inst, p["strided"]).time_s
        assert slower == (B >= 2048), (L, B)


def test_accumulation_steps_follow_the_launch():
    assert [dt.run_options(B)["accumulation_steps"] for B in (1024, 2048, 4096)] == [2, 4, 8]
    assert dt.run_options(96, 1)["accumulation_steps"] == 1


def test_calibrated_on_cases_1_and_3(tmp_path):
    """The fidelity benchmark's fit: small error on what it saw, the microbenchmark
    (not seen) within 4 % median, Megatron slower 9 of 9 by 15 % or more."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fidelity_dtfm as fid
    from geotrain_opt.cost.calibrate import apply_calibration, calibrate, fit_errors, read_runs

    runs = read_runs(fid.subset(fid.write_runs(tmp_path), {"case1", "case3"}, "c13.csv"))
    cal = calibrate(runs)
    assert 0.5 < cal["gpu_types"][dt.GPU]["efficiency"] < 0.65
    assert fit_errors(runs, cal)["median_abs_rel_err"] < 0.06
    micro = read_runs(fid.subset(fid.write_runs(tmp_path), {"micro"}, "micro.csv"))
    assert fit_errors(micro, cal)["median_abs_rel_err"] < 0.04   # 3.3 % (GPipe's link-bound phases at 1 Gbit/s)
    assert 0.0 < 8.0 / cal["options"]["host_stack_gbps"] < 2.0      # ns per byte: 4-40 Gbit/s
    for L, B in SETTINGS:
        inst, p = plans("1", L, B)
        inst = apply_calibration(inst, cal)
        assert evaluate(inst, p["blocked"]).time_s > 1.15 * evaluate(inst, p["strided"]).time_s, (L, B)


def test_unknown_case_and_layout():
    with pytest.raises(ValueError, match="unknown DT-FM case"):
        dt.scenario("6")
    with pytest.raises(ValueError, match="unknown layout"):
        dt.layout_grid(["a"], "diagonal", 1, 1)


def test_describe_shows_the_v2_settings():
    from geotrain_opt.io.describe import describe_instance
    text = describe_instance(instance_from_dict(dt.scenario("1", 24, 2048)))
    assert "recompute full" in text and "exposed comm (kappa) 0.25" in text and "accumulation steps 4" in text
    assert "NICs: 8 node(s) of 8 GPU(s) with a 25 Gbit/s NIC (3.125 Gbit/s per GPU)" in text
