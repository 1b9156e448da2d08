"""The project among other tools: the Python API, plan and model exports, result
provenance and schemas, CLI conventions."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import geotrain_opt as gt
from geotrain_opt import Plan, PlanError, SolverError
from geotrain_opt.io.export_plan import rank_map, to_deepspeed, to_hostfile, to_megatron, to_torch_pipelining
from geotrain_opt.solvers import SolveOptions

from .conftest import INSTANCES

DEMO = INSTANCES / "demo-8gpu.yaml"
DEMO_OPT = 0.19671812816410258     # cpsat and milp prove it (cost model v3: the window, kappa 0.25, the exposed fill;
                                    # 0.2034290 at kappa 0.5; v2 0.1937619)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------ Python API
def test_solve_api_matches_the_registry_and_checks_options():
    inst = gt.load_instance(DEMO)
    res = gt.solve(inst, "cpsat", time_limit=60)
    assert res.status == "optimal" and res.objective_value == pytest.approx(DEMO_OPT, rel=1e-9)
    assert gt.solve(DEMO, "memetic", time_limit=20, seed=1, generations=20).objective_value == pytest.approx(DEMO_OPT, rel=1e-6)
    with pytest.raises(SolverError, match=r"memetic: unknown option 'populaton' \(its options: .*population"):
        gt.solve(inst, "memetic", populaton=10)
    with pytest.raises(SolverError, match="unknown solver 'cp-sat'"):
        gt.solve(inst, "cp-sat")


def test_options_of_the_caller_are_not_changed():
    inst = gt.load_instance(INSTANCES / "tiny-4gpu-2region.yaml")
    opts = SolveOptions(time_limit_s=10, extra={"generations": 3})
    gt.solvers.get("plain-ga")(inst, opts)
    from geotrain_opt.analysis.fronts import pareto_front
    pareto_front(inst, "memetic", opts, points=5)
    assert opts.extra == {"generations": 3}


def test_results_carry_schema_and_provenance_and_load_into_a_frame(tmp_path):
    res = gt.solve(DEMO, "greedy")
    d = res.to_dict()
    assert d["schema"] == "geotrain-opt.result/1" and d["plan"]["schema"] == "geotrain-opt.plan/1"
    prov = d["provenance"]
    assert prov["versions"]["geotrain-opt"] == gt.__version__ and prov["versions"]["ortools"].startswith("9.")
    assert prov["python"].count(".") == 2 and prov["time_utc"].endswith("+00:00")
    frame = gt.results_frame([res])
    assert frame.loc[0, "solver"] == "greedy" and frame.loc[0, "version_numpy"] == prov["versions"]["numpy"]
    assert frame.loc[0, "time_s"] == pytest.approx(res.evaluation.time_s)
    # plans from another format version are refused, not misread
    bad = dict(d["plan"], schema="geotrain-opt.plan/9")
    with pytest.raises(PlanError, match="schema"):
        Plan.from_dict(bad)


def test_bench_rows_have_provenance_and_a_frame(tmp_path):
    from geotrain_opt.analysis.bench import run_suite
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: t\ntime_limit: 5\nseeds: [0]\ninstances: [{DEMO}]\nsolvers: [greedy, proportional]\n")
    out = tmp_path / "r.jsonl"
    run_suite(suite, out, workers=1, progress=False)
    frame = gt.results_frame(out)
    assert sorted(frame["solver"]) == ["greedy", "proportional"]
    assert frame["version_ortools"].notna().all() and frame["host"].notna().all()
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: t\ninstances: [{DEMO}]\nsolvers: [{{name: memetic, extra: {{populaton: 4}}}}]\n")
    with pytest.raises(gt.GeoTrainError, match="solvers: memetic: unknown option 'populaton'"):
        run_suite(bad, out, workers=1, progress=False)


# ----------------------------------------------------------------- plan export
def _plan():
    # demo-8gpu's optimum: two replicas of two stages, 14 + 10 layers
    return Plan.make([["va-2", "va-0"], ["va-3", "va-1"]], [0, 14, 24], [4, 4])


def test_rank_map_by_hand():
    inst = gt.load_instance(DEMO)
    m = rank_map(inst, _plan())
    assert (m["world_size"], m["pipeline_stages"], m["data_parallel_replicas"]) == (4, 2, 2)
    # Megatron-LM's default order tp-dp-pp: the replicas of a stage are consecutive ranks
    assert [r["device"] for r in m["ranks"]] == ["va-2", "va-3", "va-0", "va-1"]
    assert m["pipeline_groups"] == [[0, 2], [1, 3]] and m["data_parallel_groups"] == [[0, 1], [2, 3]]
    assert m["tensor_groups"] == [[0], [1], [2], [3]] and m["tensor_parallel"] == 1
    assert [r["layers"] for r in m["ranks"]] == [[0, 14], [0, 14], [14, 24], [14, 24]]
    nodes = {d.id: d.node for d in inst.devices}
    assert m["ranks"][0]["env"] == {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": nodes["va-2"],
                                    "GEOTRAIN_REPLICA": "0", "GEOTRAIN_STAGE": "0", "GEOTRAIN_TENSOR_RANK": "0",
                                    "GEOTRAIN_LAYERS": "0:14", "GEOTRAIN_MICRO_BATCHES": "4", "GEOTRAIN_MESH": "2,2,1"}
    # LOCAL_RANK is the GPU's number on its node: va-0, va-1 on va-n0 and va-2, va-3 on va-n1
    assert [(r["device"], r["node"], r["local_rank"]) for r in m["ranks"]] == [
        ("va-2", "va-n1", 0), ("va-3", "va-n1", 1), ("va-0", "va-n0", 0), ("va-1", "va-n0", 1)]
    assert [r["samples"] for r in m["replicas"]] == [4 * inst.model.micro_batch] * 2
    assert to_hostfile(inst, _plan()) == "va-n1 slots=2\nva-n0 slots=2\n"
    hosts = {"va-n0": "10.0.0.1", "va-n1": "10.0.0.2"}
    assert to_hostfile(inst, _plan(), hosts) == "10.0.0.2 slots=2\n10.0.0.1 slots=2\n"
    assert rank_map(inst, _plan(), hosts)["ranks"][3]["env"]["MASTER_ADDR"] == "10.0.0.2"


def test_framework_exports_say_what_they_cannot_express():
    inst = gt.load_instance(DEMO)
    tp = to_torch_pipelining(inst, _plan())
    assert tp["split_spec"] == {"layers.14": "BEGINNING"} and tp["schedule_class"] == "Schedule1F1B"
    meg = to_megatron(inst, _plan())["args"]
    assert meg[meg.index("--pipeline-model-parallel-size") + 1] == "2"
    assert meg[meg.index("--decoder-first-pipeline-num-layers") + 1] == "14"
    assert meg[meg.index("--global-batch-size") + 1] == str(8 * inst.model.micro_batch)
    ds = to_deepspeed(inst, _plan())
    assert ds["parts"] == [0, 14, 24] and ds["ds_config"]["gradient_accumulation_steps"] == 4
    free = inst.with_options(batch_split="free")
    uneven = Plan.make([["va-2", "va-0"], ["va-3", "va-1"]], [0, 14, 24], [5, 3])
    with pytest.raises(PlanError, match=r"micro_batches.*\[5, 3\]"):
        to_deepspeed(free, uneven)
    assert to_torch_pipelining(free, uneven)["replicas"][0]["micro_batches"] == 5    # torch can: n_microbatches per group
    three = Plan.make([["va-0", "va-1", "va-2", "va-3"]], [0, 6, 10, 17, 24], [8])
    with pytest.raises(PlanError, match=r"inner stages evenly.*\[6, 4, 7, 7\]"):
        to_megatron(inst, three)
    twice = Plan.make([["va-0", "va-0"]], [0, 12, 24], [8])
    with pytest.raises(PlanError):
        rank_map(inst, twice)


def test_export_plan_cli(tmp_path):
    res = tmp_path / "r.json"
    res.write_text(json.dumps({"plan": _plan().to_dict()}))
    r = cli("export-plan", DEMO, res, "--to", "torch-pipelining")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["world_size"] == 4
    r = cli("export-plan", DEMO, res, "--to", "megatron", "--out", tmp_path / "m.json")
    assert r.returncode == 0 and json.loads((tmp_path / "m.json").read_text())["format"] == "megatron"
    r = cli("export-plan", DEMO, res, "--to", "slurm")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- model export
def test_exported_models_solve_to_the_same_optimum_elsewhere(tmp_path):
    """The MPS file solved by HiGHS directly and the CP-SAT proto solved from its
    text form reach the optimum `solve` proves for that shape."""
    import highspy
    from ortools.sat.python import cp_model
    inst = gt.load_instance(DEMO)
    from geotrain_opt.io.export_model import export_model
    info = export_model(inst, 2, 2, "mps", tmp_path / "m.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)      # HiGHS stops at 1e-4 by default
    h.readModel(str(tmp_path / "m.mps"))
    h.run()
    # within HiGHS's feasibility tolerance on the big-M rows (solve re-evaluates plans exactly)
    assert h.getInfo().objective_function_value * info["t_unit_s"] == pytest.approx(DEMO_OPT, rel=1e-5)
    info = export_model(inst, 2, 2, "cpsat", tmp_path / "m.pbtxt")
    m = cp_model.CpModel()
    m.Proto().parse_text_format((tmp_path / "m.pbtxt").read_text())
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = 60
    s.parameters.num_workers = 2
    assert s.Solve(m) == cp_model.OPTIMAL
    # the integer model is a relaxation with ~2^-20 resolution (formulations/exact.md)
    assert s.ObjectiveValue() * info["t_unit_s"] == pytest.approx(DEMO_OPT, rel=1e-4)
    assert s.ObjectiveValue() * info["t_unit_s"] <= DEMO_OPT * (1 + 1e-9)
    r = cli("export-model", DEMO, "--shape", "9x9", "--format", "lp", "--out", tmp_path / "x.lp")
    assert r.returncode == 2 and "9x9 is not a feasible shape" in r.stderr
    r = cli("export-model", DEMO, "--shape", "2by2", "--format", "lp", "--out", tmp_path / "x.lp")
    assert r.returncode == 2 and "expected DxP" in r.stderr


# --------------------------------------------------------------- CLI conventions
def test_cli_version_json_and_quiet(tmp_path):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"geotrain-opt {gt.__version__}"
    r = cli("validate", DEMO, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["devices"] == 8
    r = cli("pareto", INSTANCES / "tiny-4gpu-2region.yaml", "--solver", "bruteforce", "--json", "-q")
    assert r.returncode == 0 and len(json.loads(r.stdout)["pareto"]) >= 1
    r = cli("verify", INSTANCES / "tiny-4gpu-2region.yaml", "--solvers", "bruteforce", "--json", "-q")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["ok"] is True and r.stderr == ""
    r = cli("solve", DEMO, "--solver", "milp", "--milp-solver", "NO_SUCH", "-q")
    assert r.returncode == 2 and "'NO_SUCH' is not available here (available: auto, highs, cbc" in r.stderr
    r = cli("solve", DEMO, "--solver", "cpsat", "--population", "4")
    assert r.returncode == 2 and "cpsat: unknown option 'population'" in r.stderr


def test_progress_goes_to_stderr(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: t\ntime_limit: 5\nseeds: [0]\ninstances: [{DEMO}]\nsolvers: [greedy]\n")
    r = cli("bench", suite, "--results", tmp_path / "r.jsonl", "--workers", "1")
    assert r.returncode == 0 and "[1/1]" in r.stderr and "[1/1]" not in r.stdout
    r = cli("verify", INSTANCES / "tiny-4gpu-2region.yaml", "--solvers", "bruteforce")
    assert "[1/1]" in r.stderr and "1 instances verified" in r.stdout


# --------------------------------------------------------------------- schemas
def test_schema_files_are_current_and_bundled_files_conform():
    import yaml
    from geotrain_opt.io.schema import DIR, SCHEMAS, render, schema_errors
    for kind in SCHEMAS:
        assert (DIR / f"{kind}.schema.json").read_text() == render(kind), f"run python -m geotrain_opt.io.schema --write"
    files = sorted(p for p in INSTANCES.rglob("*.yaml") if p.name != "index.yaml")   # the library's index is not one
    assert len(files) >= 40
    for p in files:
        assert schema_errors(yaml.safe_load(p.read_text())) == [], p
    res = gt.solve(DEMO, "greedy").to_dict()
    assert schema_errors(res, "result") == [] and schema_errors(res["plan"], "plan") == []


@pytest.mark.parametrize("path,value,where", [
    (("model", "layers"), -3, "model.layers"), (("options", "schedule"), "zb", "options.schedule"),
    (("objective", "lambda"), 2, "objective.lambda"), (("devices", 0, "efficiency"), 1.5, "devices[0].efficiency"),
    (("network", "intra_node", "bandwidth_gbps"), 0, "network.intra_node.bandwidth_gbps"),
    (("model", "hiden"), 5, "model"), (("energy", "pue", "virginia"), 0.5, "energy.pue.virginia")])
def test_schema_and_reader_reject_the_same_faults(tmp_path, path, value, where):
    """Each fault: the reader's one-line error and a schema error at the same place."""
    import copy

    import yaml
    from geotrain_opt.problem.instance import instance_from_dict
    from geotrain_opt.io.schema import schema_errors
    d = copy.deepcopy(yaml.safe_load(DEMO.read_text()))
    node = d
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    node[path[-1]] = value
    with pytest.raises(gt.InstanceError) as e:
        instance_from_dict(d)
    assert e.value.field.startswith(where.split(".")[0])
    errs = schema_errors(d)
    assert errs and any(x.startswith(where) for x in errs), errs


def test_milp_is_not_fooled_by_another_highs_in_the_process(tmp_path):
    """HiGHS has one thread scheduler per process: a user's own highspy model run with
    another thread count made every later MILP solve fail, reported by PuLP as
    'infeasible' or 'not solved' (found through the export test above)."""
    import highspy
    from geotrain_opt.io.export_model import export_model
    export_model(gt.load_instance(DEMO), 1, 2, "mps", tmp_path / "m.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.readModel(str(tmp_path / "m.mps"))
    h.run()
    res = gt.solve(DEMO, "milp", time_limit=60, workers=2)
    assert res.status == "optimal" and res.objective_value == pytest.approx(DEMO_OPT, rel=1e-6)


def test_an_export_gives_back_its_plan(tmp_path):
    """benchmarks/real_execution.py runs what export-plan wrote: the round trip is exact."""
    from geotrain_opt.io.export_plan import export, load_plan_or_export
    inst = gt.load_instance(DEMO).with_options(batch_split="free")
    plan = Plan.make([["va-2", "va-0", "oh-0"], ["va-3", "va-1", "oh-1"]], [0, 9, 17, 24], [5, 3])
    even = Plan.make(plan.grid, [0, 8, 16, 24], [4, 4])      # what Megatron-LM and DeepSpeed can express
    for fmt, p in (("torch-pipelining", plan), ("megatron", even), ("deepspeed", even)):
        f = tmp_path / f"{fmt}.json"
        f.write_text(export(inst, p, fmt))
        back, meta = load_plan_or_export(str(f))
        assert back == p and meta["format"] == fmt
    res = tmp_path / "plan.json"
    res.write_text(plan.to_json())
    assert load_plan_or_export(str(res)) == (plan, None)


def test_pareto_cli_reports_indicators_against_a_reference(tmp_path):
    tiny = INSTANCES / "tiny" / "tiny-4-s2.yaml"
    exact = tmp_path / "exact.json"
    r = cli("pareto", tiny, "--solver", "bruteforce", "--out", exact, "-q")
    assert r.returncode == 0 and "hypervolume" in r.stdout
    r = cli("pareto", tiny, "--solver", "memetic", "--time-limit", "5", "--reference", exact, "--json", "-q")
    st = json.loads(r.stdout)["stats"]
    # no heuristic front beats the exact one: ε >= 1, IGD+ >= 0, hypervolume at most the reference's
    assert st["epsilon"] >= 1 - 1e-12 and st["igd_plus"] >= 0
    assert st["hypervolume"] <= st["reference_hypervolume"] * (1 + 1e-12)
    r = cli("pareto", tiny, "--solver", "bruteforce", "--reference", tmp_path / "missing.json", "-q")
    assert r.returncode == 2 and "--reference" in r.stderr


def test_json_on_the_other_commands(tmp_path):
    r = cli("describe", DEMO, "--json")
    d = json.loads(r.stdout)
    assert d["devices"] == 8 and sum(g["count"] for g in d["groups"]) == 8 and d["smallest_plan"]["grid"]
    r = cli("generate", "--family", "tiny", "--gpus", "4", "--seed", "1", "--json", "--out", tmp_path / "g.json")
    assert r.returncode == 0 and gt.load_instance(tmp_path / "g.json").n == 4
    res = tmp_path / "r.json"
    res.write_text(json.dumps({"plan": _plan().to_dict()}))
    r = cli("plot", DEMO, "--kind", "gantt", "--plan", res, "--out", tmp_path / "g", "--json")
    assert json.loads(r.stdout)["written"] == [str(tmp_path / "g.png"), str(tmp_path / "g.svg")]
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: t\ntime_limit: 5\nseeds: [0]\ninstances: [{DEMO}]\nsolvers: [greedy]\n")
    r = cli("bench", suite, "--results", tmp_path / "b.jsonl", "--workers", "1", "--json", "-q")
    d = json.loads(r.stdout)
    assert d["ran"] == 1 and d["rows"][0]["solver"] == "greedy" and d["rows"][0]["provenance"]["versions"]


def test_solver_options_are_typed():
    with pytest.raises(SolverError, match=r"option 'population' must be int, got '40'"):
        gt.solve(DEMO, "memetic", population="40")
    with pytest.raises(SolverError, match=r"option 'parallel' must be bool, got 1"):
        gt.solve(DEMO, "memetic", parallel=1)
    with pytest.raises(SolverError, match=r"'mutations': unknown value 'flip' \(one of swap"):
        gt.solve(DEMO, "memetic", mutations=["swap", "flip"])
    with pytest.raises(SolverError, match=r"'island_backend': unknown value 'gpu'"):
        gt.solve(DEMO, "memetic", island_backend="gpu")
