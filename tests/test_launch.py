"""Issue 40: from a Hugging Face config and a hosts file to per-node launch commands
whose arguments describe the plan's model and ranks (checked by parsing them back),
the architecture the export names, and figures at real scale."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import yaml

import geotrain_opt as gt
from geotrain_opt import Plan
from geotrain_opt.errors import InstanceError
from geotrain_opt.io.hf_config import model_from_hf

from .conftest import INSTANCES

# meta-llama/Llama-2-7b-hf and -70b-hf config.json, the fields that shape the model
LLAMA7B = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
           "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
           "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000}
LLAMA70B = dict(LLAMA7B, hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_hidden_layers=80,
                num_key_value_heads=8)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _model(cfg):
    base = yaml.safe_load((INSTANCES / "llama7b-3region-28.yaml").read_text())
    return gt.instance_from_dict(dict(base, model=model_from_hf(cfg, global_batch=512))).model


def test_hf_configs_give_the_published_parameter_counts():
    # Hugging Face counts 6,738,415,616 and 68,976,648,192 parameters; the cost model
    # adds a bias per MLP unit and per norm (model.md §1), 0.02 % here
    assert _model(LLAMA7B).total_params() == pytest.approx(6_738_415_616, rel=3e-4)
    m70 = _model(LLAMA70B)
    assert m70.query_groups == 8 and m70.total_params() == pytest.approx(68_976_648_192, rel=3e-4)
    # grouped-query attention: K and V are h x h/8, so a layer holds 2h^2 + 2h^2/8 attention weights
    h = 8192
    assert m70.layer_matrix_params() == 2 * h * h + 2 * h * h / 8 + 3 * h * 28672


def test_the_import_prices_like_the_preset():
    preset = gt.load_instance(INSTANCES / "llama7b-3region-28.yaml").model
    imported = _model(LLAMA7B)
    assert (imported.activation, imported.norm, imported.position, imported.tied_embeddings) == \
           (preset.activation, preset.norm, preset.position, preset.tied_embeddings) == \
           ("swiglu", "rmsnorm", "rope", False)
    assert imported.layer_work_flop() == preset.layer_work_flop()
    assert imported.total_params() == preset.total_params()
    # SwiGLU's three matrices of width 11008 cost what two of 16512 did (model.md §1.1)
    b, s, h = 1, 4096, 4096
    assert preset.layer_forward_flop() == b * s * (8 * h * h + 4 * h * 16512 + 4 * s * h)


@pytest.mark.parametrize("change, field", [
    ({"num_local_experts": 8}, "num_local_experts"),
    ({"model_type": "t5"}, "model_type"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"head_dim": 256}, "head_dim"),
    ({"num_hidden_layers": "32"}, "num_hidden_layers"),
])
def test_configs_it_cannot_price_are_refused(change, field):
    with pytest.raises(InstanceError, match=field):
        model_from_hf(dict(LLAMA7B, **change), global_batch=512)


def test_the_kv_heads_must_divide_the_heads_and_the_degrees_both():
    base = yaml.safe_load((INSTANCES / "llama7b-3region-28.yaml").read_text())
    with pytest.raises(InstanceError, match="kv_heads"):
        gt.instance_from_dict(dict(base, model=dict(base["model"], kv_heads=5)))
    bad = dict(base, model=dict(base["model"], heads=12, hidden=3072), options={"tensor_parallel": [8]})
    with pytest.raises(InstanceError, match="degree 8 does not divide"):
        gt.instance_from_dict(bad)
    auto = gt.instance_from_dict(dict(bad, options={"tensor_parallel": "auto"}))
    assert auto.options.tensor_parallel == (1, 2, 4)     # 8 does not divide 12 heads


# ------------------------------------------------------------ launch, parsed back
def _parse_launch(text: str) -> tuple[list[str], dict[str, list[dict[str, str]]], dict[str, str]]:
    """(the ARGS array, node -> each process's environment, the exported globals)."""
    args: list[str] = []
    procs: dict[str, list[dict[str, str]]] = {}
    glob: dict[str, str] = {}
    node = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("ARGS=("):
            args = shlex.split(s[len("ARGS=("):-1])
        elif s.startswith("export "):
            glob.update(kv.split("=", 1) for kv in shlex.split(s)[1:])
        elif s.endswith(")") and not s.startswith("*") or ")  #" in s:
            node = s.split(")")[0]
            procs[node] = []
        elif "RANK=" in s and node:
            words = shlex.split(s.split("#")[0].rstrip(" &"))
            procs[node].append(dict(w.split("=", 1) for w in words if "=" in w and not w.startswith('"')))
    return args, procs, glob


def _grid_back(inst, procs, t, P, D):
    """The grid the launched ranks form: LOCAL_RANK is the GPU's place on its node in
    the instance, RANK = i + t (k + D j) (Megatron-LM's tp-dp-pp order)."""
    on_node = {}
    for dev in inst.devices:
        on_node.setdefault(dev.node, []).append(dev.id)
    grid = [[[None] * t for _ in range(P)] for _ in range(D)]
    for node, ps in procs.items():
        for p in ps:
            rank = int(p["RANK"])
            grid[(rank // t) % D][rank // (t * D)][rank % t] = on_node[node][int(p["LOCAL_RANK"])]
    return grid


def _arg(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


@pytest.fixture(scope="module")
def geo7b(tmp_path_factory):
    """The issue's flow: a config.json, `model import` into the 7B cluster (TP searched),
    a hosts file, a plan with TP groups on two nodes."""
    d = tmp_path_factory.mktemp("geo7b")
    (d / "config.json").write_text(json.dumps(LLAMA7B))
    base = yaml.safe_load((INSTANCES / "llama7b-3region-28.yaml").read_text())
    base["options"] = dict(base["options"], tensor_parallel=[1, 2])
    (d / "cluster.yaml").write_text(yaml.safe_dump(base))
    r = cli("model", "import", d / "config.json", "--global-batch", 512, "--instance", d / "cluster.yaml",
            "--out", d / "inst.yaml")
    assert r.returncode == 0, r.stderr
    inst = gt.load_instance(d / "inst.yaml")
    plan = Plan.make([[("a-0", "a-1"), ("a-8", "a-9")], [("a-2", "a-3"), ("a-10", "a-11")]], [0, 16, 32], [256, 256])
    (d / "plan.json").write_text(json.dumps(plan.to_dict()))
    (d / "hosts.yaml").write_text("a-n0: 10.1.0.1\na-n1: 10.1.0.2\nh-n0: 10.2.0.1\n")
    return d, inst, plan


def test_megatron_launch_parses_back_to_the_plan(geo7b):
    d, inst, plan = geo7b
    assert gt.evaluate(inst, plan).feasible
    r = cli("export-plan", d / "inst.yaml", d / "plan.json", "--to", "launch-megatron", "--hosts", d / "hosts.yaml",
            "--out", d / "launch.sh")
    assert r.returncode == 0, r.stderr
    args, procs, glob = _parse_launch((d / "launch.sh").read_text())
    # the model Megatron-LM builds is the one priced
    m = inst.model
    assert (int(_arg(args, "--num-layers")), int(_arg(args, "--hidden-size")), int(_arg(args, "--num-attention-heads")),
            int(_arg(args, "--ffn-hidden-size")), int(_arg(args, "--seq-length"))) == (32, 4096, 32, 11008, 4096)
    assert {"--swiglu", "--untie-embeddings-and-output-weights"} <= set(args) and "--group-query-attention" not in args
    assert _arg(args, "--normalization") == "RMSNorm" and _arg(args, "--position-embedding-type") == "rope"
    assert int(_arg(args, "--global-batch-size")) == m.global_batch and int(_arg(args, "--micro-batch-size")) == 1
    t, P = int(_arg(args, "--tensor-model-parallel-size")), int(_arg(args, "--pipeline-model-parallel-size"))
    W = int(glob["WORLD_SIZE"])
    D = W // (t * P)
    assert (t, P, D, W) == (2, 2, 2, 8) and "--sequence-parallel" in args
    assert glob["MASTER_ADDR"] == "10.1.0.1"
    grid = _grid_back(inst, procs, t, P, D)
    assert sorted(int(p["RANK"]) for ps in procs.values() for p in ps) == list(range(W))
    assert [[tuple(s) for s in row] for row in grid] == [list(row) for row in plan.grid]
    first = int(_arg(args, "--decoder-first-pipeline-num-layers", 32 // P))
    assert [0, first, 32] == list(plan.cuts)


def test_from_config_to_launch_through_an_exportable_solve(geo7b):
    """The issue's flow end to end: the imported 7B instance solved for a plan
    Megatron-LM runs, then its launch script, whose ranks give back that plan."""
    d, inst, _ = geo7b
    r = cli("solve", d / "inst.yaml", "--solver", "greedy", "--exportable", "megatron", "--out", d / "m.json")
    assert r.returncode == 0 and "--exportable megatron" in r.stdout, r.stdout + r.stderr
    plan = Plan.load(d / "m.json")
    (d / "hosts-all.yaml").write_text("".join(f"{n}: 10.9.0.{i}\n" for i, n in
                                              enumerate(sorted({x.node for x in inst.devices}))))
    r = cli("export-plan", d / "inst.yaml", d / "m.json", "--to", "launch-megatron", "--hosts", d / "hosts-all.yaml")
    assert r.returncode == 0, r.stderr
    args, procs, glob = _parse_launch(r.stdout)
    t, P = int(_arg(args, "--tensor-model-parallel-size")), int(_arg(args, "--pipeline-model-parallel-size"))
    D = int(glob["WORLD_SIZE"]) // (t * P)
    grid = _grid_back(inst, procs, t, P, D)
    want = [[list(s) if not isinstance(s, str) else [s] for s in row] for row in plan.grid]
    assert grid == want and (P, D) == (plan.stages, plan.replicas)
    first = int(_arg(args, "--decoder-first-pipeline-num-layers", plan.cuts[1]))
    last = int(_arg(args, "--decoder-last-pipeline-num-layers", 32 - plan.cuts[-2]))
    assert (plan.cuts[1], 32 - plan.cuts[-2]) == (first, last)


def test_torch_launch_carries_stage_replica_and_layers(geo7b):
    d, inst, plan = geo7b
    r = cli("export-plan", d / "inst.yaml", d / "plan.json", "--to", "launch-torch", "--hosts", d / "hosts.yaml",
            "--entry", "my train.py")
    assert r.returncode == 0, r.stderr
    assert "'my train.py'" in r.stdout          # quoted for the shell
    _, procs, glob = _parse_launch(r.stdout)
    dev = {x.id: x for x in inst.devices}
    for node, ps in procs.items():
        for p in ps:
            k, j, i = int(p["GEOTRAIN_REPLICA"]), int(p["GEOTRAIN_STAGE"]), int(p["GEOTRAIN_TENSOR_RANK"])
            gid = plan.grid[k][j][i]
            assert dev[gid].node == node
            assert p["GEOTRAIN_LAYERS"] == f"{plan.cuts[j]}:{plan.cuts[j + 1]}"
            assert p["GEOTRAIN_MICRO_BATCHES"] == "256" and p["GEOTRAIN_MESH"] == "2,2,2"


def test_launch_needs_every_node_address(geo7b, tmp_path):
    d, inst, plan = geo7b
    r = cli("export-plan", d / "inst.yaml", d / "plan.json", "--to", "launch-megatron")
    assert r.returncode == 2 and "--hosts" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "h.yaml").write_text("a-n0: 10.1.0.1\n")
    r = cli("export-plan", d / "inst.yaml", d / "plan.json", "--to", "launch-megatron", "--hosts", tmp_path / "h.yaml")
    assert r.returncode != 0 and "a-n1" in r.stderr
    (tmp_path / "h.yaml").write_text("a-n0: '10.1.0.1; reboot'\na-n1: x\n")
    r = cli("export-plan", d / "inst.yaml", d / "plan.json", "--to", "launch-megatron", "--hosts", tmp_path / "h.yaml")
    assert r.returncode == 2 and "a-n0" in r.stderr


def test_megatron_names_grouped_query_attention_and_tied_embeddings():
    from geotrain_opt.io.export_plan import megatron_model_args
    base = yaml.safe_load((INSTANCES / "llama7b-3region-28.yaml").read_text())
    m70 = gt.instance_from_dict(dict(base, model=model_from_hf(LLAMA70B, global_batch=512))).model
    a = megatron_model_args(m70)
    assert _arg(a, "--num-query-groups") == "8" and "--group-query-attention" in a
    gpt = gt.load_instance(INSTANCES / "demo-8gpu.yaml").model
    a = megatron_model_args(gpt)
    assert "--swiglu" not in a and _arg(a, "--position-embedding-type") == "learned_absolute"


# ------------------------------------------------------------------- figures
def test_a_long_schedule_is_drawn_as_fill_and_drain(tmp_path):
    from geotrain_opt.cost.simulate import simulate
    from geotrain_opt.io.gantt import gantt, windows
    inst = gt.load_instance(INSTANCES / "llama7b-3region-28.yaml")
    plan = Plan.make([["a-0", "a-8", "h-0"], ["a-1", "a-9", "h-1"]], [0, 10, 21, 32], [256, 256])
    sim = simulate(inst, plan, record=True)
    (a0, a1), (b0, b1) = windows(sim.ops, plan, sim.time_s)
    # the fill ends once the last stage ran micro-batch P + 1's forward; the drain starts
    # with the first stage's backward of micro-batch m - P - 2
    assert a0 == 0 and b1 == sim.time_s and a1 < b0
    assert a1 == max(e for d, k, i, s, e in sim.ops if k == "F" and i == 4 and d in ("h-0", "h-1"))
    assert (b1 - b0) + (a1 - a0) < 0.2 * sim.time_s        # the steady state is most of the iteration
    # 2 (P + 2) micro-batches or fewer: the whole iteration
    demo = gt.load_instance(INSTANCES / "demo-8gpu.yaml")
    few = Plan.make([["va-2", "va-0"], ["va-3", "va-1"]], [0, 14, 24], [4, 4])
    assert windows(simulate(demo, few, record=True).ops, few, 1.0) == [(0.0, 1.0)]
    out = gantt(inst, plan, tmp_path / "g")
    assert all((tmp_path / p).stat().st_size > 1000 for p in out)


def test_the_map_places_cloud_regions_and_refuses_invented_ones(tmp_path):
    from geotrain_opt.problem.regions import region_position
    assert region_position("us-east-1") == region_position("eastus") == region_position("virginia") == (38.9, -77.4)
    assert region_position("europe-west4") == region_position("westeurope")
    assert region_position("us-east") is None and region_position("us-east", {"us-east": (1.0, 2.0)}) == (1.0, 2.0)
    inst = INSTANCES / "llama7b-3region-28.yaml"
    r = cli("plot", inst, "--kind", "map", "--out", tmp_path / "m")
    assert r.returncode == 2 and "us-east" in r.stderr and not (tmp_path / "m.png").exists()
    (tmp_path / "c.yaml").write_text("us-east: [39, -77.5]\neurope-west: [50.1, 8.7]\nasia-east: [24.1, 120.5]\n")
    r = cli("plot", inst, "--kind", "map", "--out", tmp_path / "m", "--coords", tmp_path / "c.yaml")
    assert r.returncode == 0, r.stderr
    (tmp_path / "c.yaml").write_text("us-east: [139, -77.5]\n")
    r = cli("plot", inst, "--kind", "map", "--out", tmp_path / "m2", "--coords", tmp_path / "c.yaml")
    assert r.returncode == 2 and "--coords.us-east" in r.stderr


def test_catalog_lists_types_and_presets_with_sources():
    r = cli("catalog", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    p70 = next(p for p in rows["model_presets"] if p["name"] == "llama2-70b")
    assert (p70["kv_heads"], p70["ffn_hidden"], p70["activation"]) == (8, 28672, "swiglu")
    assert all(g["source"] for g in rows["gpu_types"]) and all(p["source"] for p in rows["model_presets"])


def test_pareto_figure_from_saved_fronts_labels_and_proof_marks(tmp_path):
    from geotrain_opt.cli.commands import _saved_fronts
    inst = gt.load_instance(INSTANCES / "tiny-4gpu-2region.yaml")
    exact = gt.pareto(inst, "cpsat", points=20, time_limit=60)
    exact.save(tmp_path / "exact.json")
    fronts, labels, marks = _saved_fronts(inst, str(tmp_path / "exact.json"))
    pts = [p for p in exact.pareto]
    assert fronts["cpsat"] == [(p.evaluation.time_s, p.evaluation.energy_j) for p in pts]
    assert labels["cpsat"] == [f"{p.plan.replicas}x{p.plan.stages}" for p in pts]
    assert marks["cpsat"] == [True] * len(pts) and len(pts) >= 2       # every point of the ε-walk proven
    r = cli("plot", INSTANCES / "tiny-4gpu-2region.yaml", "--kind", "pareto", "--results", tmp_path / "exact.json",
            "--out", tmp_path / "front")
    assert r.returncode == 0 and (tmp_path / "front.png").stat().st_size > 1000, r.stderr
    (tmp_path / "plan.json").write_text(json.dumps({"plan": pts[0].plan.to_dict()}))
    r = cli("plot", INSTANCES / "tiny-4gpu-2region.yaml", "--kind", "pareto", "--results", tmp_path / "plan.json",
            "--out", tmp_path / "f2")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "--results" in r.stderr
