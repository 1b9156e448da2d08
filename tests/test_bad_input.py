"""A corpus of malformed instances and plans: each error names the offending field."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from geotrain_opt import InstanceError, Plan, PlanError, evaluate, instance_from_dict

from .conftest import TINY


def base():
    return yaml.safe_load(TINY.read_text())


def mutate(fn):
    d = base()
    fn(d)
    return d


def _set(path, value):
    def f(d):
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return f


def _del(path):
    def f(d):
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        del node[keys[-1]]
    return f


CASES = [
    ("unknown GPU type", _set("devices.0.type", "Z100"), "devices[0].type", "unknown GPU type"),
    ("missing model", _del("model"), "model", "missing"),
    ("missing devices", _del("devices"), "devices", "missing"),
    ("missing device region", _del("devices.1.region"), "devices[1].region", "missing"),
    ("missing layers", _del("model.layers"), "model.layers", "missing"),
    ("negative bandwidth", _set("network.intra_region.bandwidth_gbps", -5), "network.intra_region.bandwidth_gbps", "positive"),
    ("zero bandwidth inter", _set("network.inter_region", [{"a": "east", "b": "west", "latency_ms": 1, "bandwidth_gbps": 0}]),
     "network.inter_region[0].bandwidth_gbps", "positive"),
    ("negative latency", _set("network.intra_node.latency_ms", -1), "network.intra_node.latency_ms", "negative"),
    ("zero memory", _set("gpu_types.fast.memory_gib", 0), "gpu_types.fast.memory_gib", "positive"),
    ("negative peak", _set("gpu_types.slow.peak_tflops", -3), "gpu_types.slow.peak_tflops", "positive"),
    ("efficiency above 1", _set("gpu_types.fast.efficiency", 1.5), "gpu_types.fast.efficiency", "(0, 1]"),
    ("wait above busy", _set("gpu_types.fast.wait_w", 500), "gpu_types.fast.wait_w", "exceeds busy"),
    ("duplicate ids", _set("devices.1.id", "e0"), "devices[1].id", "duplicate"),
    ("batch not divisible", _set("model.micro_batch", 3), "model.global_batch", "multiple of micro_batch"),
    ("unknown region in link", _set("network.inter_region", [{"a": "east", "b": "mars", "latency_ms": 1, "bandwidth_gbps": 1}]),
     "network.inter_region[0].b", "unknown region"),
    ("missing inter-region entry", _set("network.inter_region", []), "network.inter_region", "no entry"),
    ("unknown schedule", _set("options.schedule", "zigzag"), "options.schedule", "one of"),
    ("unknown batch split", _set("options.batch_split", "random"), "options.batch_split", "one of"),
    ("headroom above 1", _set("options.memory_headroom", 1.2), "options.memory_headroom", "(0, 1]"),
    ("unknown objective", _set("objective.kind", "latency"), "objective.kind", "one of"),
    ("cost without prices", _set("objective.kind", "cost"), "objective.kind", "cost needs prices"),
    ("carbon limit without intensities", _set("objective.max_carbon_g", 5.0), "objective.max_carbon_g", "carbon needs"),
    ("lambda out of range", _set("objective.lambda", 2), "objective.lambda", "[0, 1]"),
    ("unknown preset", _set("model.preset", "gpt-9"), "model.preset", "unknown preset"),
    ("string layers", _set("model.layers", "four"), "model.layers", "integer"),
    ("unknown top-level key", _set("devicez", []), "devicez", "unknown field"),
    ("unknown device key", _set("devices.0.colour", "red"), "devices[0].colour", "unknown field"),
    ("pue below 1", _set("energy.pue", {"west": 0.5}), "energy.pue.west", ">= 1"),
    ("pue unknown region", _set("energy.pue", {"north": 1.2}), "energy.pue.north", "unknown region"),
    ("negative network energy", _set("energy.net_j_per_byte", -1), "energy.net_j_per_byte", "negative"),
    ("devices not a list", _set("devices", {"a": 1}), "devices", "non-empty list"),
    ("count without type", _set("devices", [{"count": 2, "region": "east"}]), "devices[0].type", "missing"),
    ("zero count", _set("devices", [{"count": 0, "type": "fast", "region": "east"}]), "devices[0].count", ">= 1"),
    ("link to itself", _set("network.pairs", [{"a": "e0", "b": "e0", "latency_ms": 1, "bandwidth_gbps": 1}]),
     "network.pairs[0].b", "two different"),
    ("model fits nowhere", _set("gpu_types.fast.memory_gib", 0.01), "model", "fits on no subset"),
    ("layer override out of range", _set("model.layer_overrides", [{"layer": 9, "work_scale": 2}]),
     "model.layer_overrides[0].layer", "out of range"),
]


@pytest.mark.parametrize("name,fn,field,words", CASES, ids=[c[0] for c in CASES])
def test_bad_instance(name, fn, field, words):
    d = base()
    if name == "model fits nowhere":
        d["gpu_types"]["slow"]["memory_gib"] = 0.01
    fn(d)
    with pytest.raises(InstanceError) as e:
        instance_from_dict(d)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_corpus_is_large_enough():
    assert len(CASES) >= 20


PLAN_CASES = [
    ({"cuts": [0, 4], "micro_batches": [4]}, "grid", "missing"),
    ({"grid": [["e0"]], "micro_batches": [4]}, "cuts", "missing"),
    ({"grid": [["e0"]], "cuts": [0, 4]}, "micro_batches", "missing"),
    ({"grid": [["e0", "w0"], ["e1"]], "cuts": [0, 4], "micro_batches": [2, 2]}, "grid", "same number"),
    ({"grid": [["e0"]], "cuts": [0, 2, 4], "micro_batches": [4]}, "cuts", "expected 2 cut points"),
    ({"grid": [["e0"]], "cuts": [0, 4], "micro_batches": [2, 2]}, "micro_batches", "one per replica"),
    ({"grid": [["e0"]], "cuts": [0, "4"], "micro_batches": [4]}, "cuts", "integers"),
    ({"grid": [["e0"]], "cuts": [0, 4], "micro_batches": [4], "stages": 3}, "stages", "grid has 1"),
    ([1, 2], "<root>", "JSON object"),
]


@pytest.mark.parametrize("d,field,words", PLAN_CASES)
def test_bad_plan(d, field, words):
    with pytest.raises(PlanError) as e:
        Plan.from_dict(d)
    assert e.value.field == field and words in str(e.value)


def test_unknown_device_in_plan(tiny):
    with pytest.raises(PlanError) as e:
        evaluate(tiny, Plan.make([["e0", "zz"]], [0, 2, 4], [4]))
    assert e.value.field == "grid" and "'zz'" in str(e.value)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *args], capture_output=True, text=True)


def test_cli_malformed_yaml_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nmodel: {layers: 4\ndevices: [\n")
    r = run_cli("validate", str(p))
    assert r.returncode == 2
    assert r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"error: instance {p}: <file>: malformed YAML at line")
    assert "Traceback" not in r.stderr


def test_cli_bad_field_one_line(tmp_path):
    d = base()
    d["devices"][2]["type"] = "H900"
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    r = run_cli("describe", str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "devices[2].type" in r.stderr and "Traceback" not in r.stderr


def test_cli_bad_plan_one_line(tmp_path):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"grid": [["e0"]], "cuts": [0, 4]}))
    r = run_cli("evaluate", str(TINY), str(p))
    assert r.returncode == 2 and r.stderr.strip() == "error: plan: micro_batches: missing required field"


def test_cli_missing_file():
    r = run_cli("validate", "/nonexistent/x.yaml")
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_solve_out_not_clobbered_on_error(tmp_path):
    out = tmp_path / "result.json"
    out.write_text("keep me")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: 3\n")
    r = run_cli("solve", str(bad), "--solver", "bruteforce", "--out", str(out))
    assert r.returncode == 2 and out.read_text() == "keep me"


def test_json_instance_loads_like_yaml(tmp_path):
    from geotrain_opt import load_instance
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(base()))
    a, b = load_instance(p), load_instance(TINY)
    assert a.ids == b.ids and (a.alpha == b.alpha).all() and (a.beta == b.beta).all()
    bad = tmp_path / "bad.json"
    bad.write_text("{\"model\": ")
    with pytest.raises(InstanceError) as e:
        load_instance(bad)
    assert "malformed JSON at line 1" in str(e.value)


def test_plan_json_round_trip(tmp_path):
    plan = Plan.make([["e0", "w0"], ["e1", "w1"]], [0, 1, 4], [2, 2])
    assert Plan.from_dict(json.loads(plan.to_json())) == plan
    p = tmp_path / "p.json"
    p.write_text(plan.to_json())
    assert Plan.load(p) == plan


ONE_GPU = {"name": "one", "model": {"preset": "gpt3-xl", "layers": 4, "global_batch": 8},
           "devices": [{"count": 1, "type": "A100-SXM4-80GB", "region": "r"}],
           "network": {"intra_region": {"latency_ms": 1, "bandwidth_gbps": 10}}}


@pytest.mark.parametrize("solver", ["memetic", "plain-ga", "greedy", "dtfm", "cpsat"])
def test_one_gpu_instance_is_solved_not_crashed(solver):
    """Issue 39: memetic crashed on any one-GPU instance (a local-search move with no
    pair of devices to swap asked the batched evaluator for zero plans). The only plan
    is the whole model on the one GPU, and every solver returns it."""
    from geotrain_opt.solvers import SolveOptions, get
    inst = instance_from_dict(ONE_GPU)
    res = get(solver)(inst, SolveOptions(time_limit_s=10, seed=0, extra={"generations": 3} if solver in ("memetic", "plain-ga") else {}))
    assert res.plan is not None and res.plan.grid == (("r-0",),) and res.plan.cuts == (0, 4)
    assert res.objective_value == pytest.approx(evaluate(inst, res.plan).time_s, rel=1e-12)


def test_batch_evaluator_takes_zero_plans():
    import numpy as np
    from geotrain_opt.cost.evaluator import BatchEvaluator
    inst = instance_from_dict(ONE_GPU)
    out = BatchEvaluator(inst)(np.zeros((0, 1, 1), dtype=np.int64), np.zeros((0, 2), dtype=np.int64),
                               np.zeros((0, 1), dtype=np.int64))
    assert out.time_s.shape == (0,) and out.feasible.shape == (0,)


def test_dtfm_shape_larger_than_the_cluster_is_one_line(tmp_path):
    """Issue 39: dtfm --shape 99x99 on a one-GPU instance raised an IndexError."""
    path = tmp_path / "one.json"
    path.write_text(json.dumps(ONE_GPU))
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "solve", str(path), "--solver", "dtfm",
                        "--shape", "99x99", "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: dtfm: option 'shape' 99x99 needs 9801 GPUs, the instance has 1"]
