"""A corpus of malformed instances and plans: each error names the offending field."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from geotrain_opt import InstanceError, Plan, PlanError, evaluate, instance_from_dict
from geotrain_opt.errors import SolverError
from geotrain_opt.solvers import SolveOptions, get

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
    # a denormal speed overflowed every stage time to inf (issue 39's third campaign)
    ("efficiency denormal", _set("gpu_types.fast.efficiency", 1e-320), "gpu_types.fast.efficiency", "at least 1e-06"),
    ("peak denormal", _set("gpu_types.fast.peak_tflops", 1e-320), "gpu_types.fast.peak_tflops", "at least 1e-06"),
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
    ("NUL in a device id", _set("devices.0.id", "e\x000"), "devices[0].id", "printable"),
    ("newline in a region", _set("devices.1.region", "east\nwest"), "devices[1].region", "printable"),
    ("clock fraction 1e-320", _set("gpu_types.fast.clocks", [{"fraction": 1e-320, "busy_w": 200}]),
     "gpu_types.fast.clocks[0].fraction", "at least 0.01"),
    ("a dict as the name", _set("name", {"a": 1}), "name", "expected a string"),
    ("a list as the description", _set("description", ["x"]), "description", "expected a string"),
    ("an integer device id", _set("devices.0.id", 7), "devices[0].id", "expected a string"),
    ("a 200 KB name", _set("name", "x" * 200_000), "name", "longer than 200 characters"),
    ("zero WAN capacity", _set("network.inter_region", [{"a": "east", "b": "west", "latency_ms": 1, "bandwidth_gbps": 1,
                                                          "capacity_gbps": 0}]),
     "network.inter_region[0].capacity_gbps", "positive"),
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
    # True == 1 in Python: a one-stage, one-replica plan must not take a boolean (issue 39)
    ({"grid": [["e0"]], "cuts": [0, 4], "micro_batches": [4], "stages": True}, "stages", "integer"),
    ({"grid": [["e0"]], "cuts": [0, 4], "micro_batches": [4], "replicas": True}, "replicas", "integer"),
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


@pytest.mark.parametrize("split", [[-8], [5, -1], [4, 0]])
def test_non_positive_micro_batches_are_an_error_not_negative_numbers(tmp_path, split):
    """Issue 39: a replica with a count below one was reported infeasible with a negative
    time and energy (T = -0.00912 s, E = -18.9 J); there is no cost to report, so it is
    a fault of the plan, like bad cuts (model.md §8 item 4)."""
    grid = [["e0", "w0"]] if len(split) == 1 else [["e0", "w0"], ["e1", "w1"]]
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"grid": grid, "cuts": [0, 2, 4], "micro_batches": split}))
    for cmd in ("evaluate", "simulate"):
        r = run_cli(cmd, str(TINY), str(p))
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip() == f"error: plan: micro_batches: need positive integers, got {split}"
    with pytest.raises(PlanError, match="need positive integers"):
        evaluate(instance_from_dict(base()), Plan.from_dict(json.loads(p.read_text())))


def test_positive_split_off_the_total_stays_infeasible(tiny):
    """A split of positive counts that misses M is a plan with a cost: reported, infeasible."""
    ev = evaluate(tiny, Plan.make([["e0", "w0"]], [0, 2, 4], [3]))
    assert not ev.feasible and ev.time_s > 0 and ev.energy_j > 0
    assert ev.violations == ["micro_batches: need positive integers summing to M = 4, got [3]"]


@pytest.mark.parametrize("args,message", [
    (["--solver", "dtfm", "--offspring", "0"], "error: geotrain-opt solve: argument --offspring: must be >= 1, got 0"),
    (["--solver", "memetic", "--mutations", ""], "error: geotrain-opt solve: argument --mutations: empty value"),
    (["--solver", "memetic", "--ls-moves", ","], "error: memetic: option 'ls_moves' must list at least one value"),
])
def test_empty_or_zero_search_options_are_one_line_errors(args, message):
    """Issue 39: --offspring 0 and empty operator lists ran (exit 0) as if meant."""
    r = run_cli("solve", str(TINY), "-q", "--time-limit", "5", *args)
    assert r.returncode == 2 and r.stderr.strip() == message
    with pytest.raises(SolverError, match="offspring|at least one"):       # the API says the same
        get(args[1])(instance_from_dict(base()), SolveOptions(
            time_limit_s=5, extra={args[2].lstrip("-").replace("-", "_"): 0 if args[3] == "0" else []}))


def test_verify_without_solvers_is_an_error():
    r = run_cli("verify", str(TINY), "--solvers", " , ", "--time-limit", "2")
    assert r.returncode == 2 and r.stderr.strip() == "error: verify: --solvers: list at least one solver"


def test_report_refuses_what_is_no_result_and_reads_nan_as_missing(tmp_path):
    """Issue 39: report printed an empty table (exit 0) for a file of another schema or
    of no result rows, and a traceback for rows without n_gpus or objective."""
    other = tmp_path / "r2.jsonl"
    other.write_text(json.dumps({"schema": "geotrain-opt.result/2", "instance_name": "x", "solver": "memetic",
                                 "status": "optimal"}) + "\n")
    r = run_cli("report", str(other))
    assert r.returncode == 2 and "schema 'geotrain-opt.result/2' is not 'geotrain-opt.result/1'" in r.stderr
    empty = tmp_path / "none.jsonl"
    empty.write_text('{"a": 1}\n')
    r = run_cli("report", str(empty))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no result rows" in r.stderr
    thin = tmp_path / "thin.jsonl"
    thin.write_text('{"instance_name": "x", "solver": "memetic", "status": "heuristic", "time_s": NaN, '
                    '"objective_value": 2.5}\n')
    r = run_cli("report", str(thin))
    assert r.returncode == 0 and "| x | - | memetic | 1 | - |" in r.stdout and "nan" not in r.stdout.lower()


@pytest.mark.parametrize("change,words", [
    ({"time_limit": 0}, "time_limit must be a number of seconds"),
    ({"time_limit": -1}, "time_limit must be a number of seconds"),
    ({"time_limit": float("nan")}, "time_limit must be a number of seconds"),
    ({"time_limit": float("inf")}, "time_limit must be a number of seconds"),
    ({"seeds": [-1]}, "seeds must be a non-empty list of integers"),
    ({"seeds": ["0"]}, "seeds must be a non-empty list of integers"),
    ({"seeds": [1.5]}, "seeds must be a non-empty list of integers"),
    ({"seeds": []}, "seeds must be a non-empty list of integers"),
    ({"objective": "bogus"}, "objective must be one of time, energy"),
    ({"instances": "x.yaml"}, "needs non-empty 'instances' and 'solvers' lists"),
    ({"solvers": [3]}, "solvers: expected a name"),
    ({"solvers": [{"name": "greedy", "seeds": [True]}]}, "solvers: greedy: seeds must be"),
])
def test_bad_bench_suite_is_one_line(tmp_path, change, words):
    """Issue 39: suites with these values ran (exit 0) or raised a traceback."""
    from geotrain_opt.analysis.bench import load_suite
    from geotrain_opt.errors import GeoTrainError
    suite = {"instances": [str(TINY)], "solvers": ["greedy"], "time_limit": 1, "seeds": [0], **change}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(suite))
    with pytest.raises(GeoTrainError, match=words) as e:
        load_suite(path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("measured,words", [("1e308", "must be in"), ("1e-300", "must be in"), ("nan", "positive")])
def test_calibrate_refuses_measurements_out_of_range(tmp_path, measured, words):
    """Issue 39: 1e-300 s raised a traceback from the solver's arithmetic, 1e308 s fitted nonsense."""
    from geotrain_opt.cost.calibrate import read_runs
    (tmp_path / "t.yaml").write_text(TINY.read_text())
    (tmp_path / "p.json").write_text(json.dumps({"grid": [["e0", "w0"]], "cuts": [0, 2, 4], "micro_batches": [4]}))
    (tmp_path / "runs.csv").write_text(f"instance,plan,measured_s\nt.yaml,p.json,{measured}\n")
    with pytest.raises(InstanceError, match=words) as e:
        read_runs(tmp_path / "runs.csv")
    assert e.value.field == "<runs> line 2.measured_s"


def test_calibrate_refuses_a_parameter_named_twice(tmp_path):
    from geotrain_opt.cost.calibrate import calibrate, read_runs
    (tmp_path / "t.yaml").write_text(TINY.read_text())
    (tmp_path / "p.json").write_text(json.dumps({"grid": [["e0", "w0"]], "cuts": [0, 2, 4], "micro_batches": [4]}))
    (tmp_path / "runs.csv").write_text("instance,plan,measured_s\nt.yaml,p.json,0.05\n")
    with pytest.raises(InstanceError, match="efficiency given twice"):
        calibrate(read_runs(tmp_path / "runs.csv"), ("efficiency", "efficiency"))


def test_endless_stream_and_alias_bomb_are_one_line(tmp_path):
    """Issue 39: /dev/urandom as the instance hung every command; nine levels of YAML
    aliases in ``name`` hung validate; a 200 KB bad value was echoed whole."""
    r = run_cli("validate", "/dev/zero")
    assert r.returncode == 2 and r.stderr.strip() == ("error: instance /dev/zero: <file>: /dev/zero is longer "
                                                      "than 64 MiB (an endless stream?)")
    r = run_cli("evaluate", str(TINY), "/dev/zero")
    assert r.returncode == 2 and "an endless stream?" in r.stderr
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines + ["name: *i"]) + "\n")
    r = run_cli("validate", str(bomb))
    assert r.returncode == 2 and "YAML aliases are not supported (*a at line 2)" in r.stderr
    d = base()
    d["devices"][0]["type"] = "Z" * 200_000
    big = tmp_path / "big.json"
    big.write_text(json.dumps(d))
    r = run_cli("validate", str(big))
    assert r.returncode == 2 and len(r.stderr) < 600 and r.stderr.rstrip().endswith("... (cut)")


def test_over_long_output_name_is_one_line(tmp_path):
    """Issue 39: every writer raised OSError (ENAMETOOLONG) as an internal error."""
    r = run_cli("solve", str(TINY), "--solver", "greedy", "-q", "--out", str(tmp_path / ("x" * 300 + ".json")))
    assert r.returncode == 2 and r.stderr.strip().startswith("error: --out: file name longer than")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cal,field", [([1, 2], "<calibration>"), ({"gpu_types": [1]}, "<calibration>.gpu_types"),
                                       ({"options": [1]}, "<calibration>.options"),
                                       ({"gpu_types": {"fast": "x"}}, "<calibration>.gpu_types.fast")])
def test_calibration_of_the_wrong_shape_names_the_field(tmp_path, cal, field):
    """Issue 39: a list where an object belongs raised AttributeError."""
    from geotrain_opt.cost.calibrate import load_calibration
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal))
    with pytest.raises(InstanceError) as e:
        load_calibration(path)
    assert e.value.field == field


@pytest.mark.parametrize("delay", [0.15, 0.3, 0.5, 0.8])
def test_an_early_interrupt_is_one_line(delay):
    """Issue 39: Ctrl-C while the modules load printed a raw KeyboardInterrupt traceback.
    Whenever the signal lands (before, during or after the solve), no traceback."""
    import signal
    import time
    proc = subprocess.Popen([sys.executable, "-m", "geotrain_opt.cli", "solve", str(TINY), "--solver", "cpsat",
                             "--time-limit", "20", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # -SIGINT: the signal landed before the interpreter set up its handler (nothing printed)
    assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)


@pytest.mark.parametrize("stage", ["bound_shapes", "seed", "passes"])
@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_an_interrupted_exact_solve_returns_a_plan(monkeypatch, stage, engine):
    """Issue 39: Ctrl-C before the first model (bounds, seeding) ended cpsat and milp
    with "interrupted" and no plan, though constructive plans exist. Wherever it lands,
    the result is the best plan known (a constructive one at least), status feasible."""
    from geotrain_opt.solvers.exact.driver import ExactDriver

    def stop(self):
        raise KeyboardInterrupt
    monkeypatch.setattr(ExactDriver, stage, stop)
    inst = instance_from_dict(base())
    res = get(engine)(inst, SolveOptions(time_limit_s=30))
    assert res.status == "feasible" and res.plan is not None and res.stats["interrupted"]
    assert evaluate(inst, res.plan).acceptable
    assert res.best_bound is not None and res.best_bound <= res.objective_value
