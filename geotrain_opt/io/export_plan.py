"""Hand a plan to a training framework: a rank map every format shares, then
torch.distributed.pipelining, Megatron-LM, DeepSpeed and an MPI/DeepSpeed hostfile.

Ranks follow Megatron-LM's default order ``tp-cp-ep-dp-pp`` (its ``parallel_state``;
DeepSpeed's ``PipeModelDataParallelTopology`` numbers the same way): the tensor rank
varies fastest, then the replica, then the stage, rank = i + t (k + D j) for tensor
rank i of replica k, stage j. A framework that cannot express the plan (Megatron-LM
and DeepSpeed take neither arbitrary cuts nor unequal micro-batch counts per replica)
gets a one-line error naming what it lacks, never a silently different plan.
"""
from __future__ import annotations

import json
from typing import Any

from geotrain_opt.errors import PlanError
from geotrain_opt.cost.evaluator import check_plan, evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.common.provenance import PLAN_SCHEMA, PLAN_SCHEMA_TP

EXPORT_SCHEMA = "geotrain-opt.export/1"
FORMATS = ("torch-pipelining", "megatron", "deepspeed", "hostfile", "launch-megatron", "launch-torch")


def members(slot: Any) -> tuple[str, ...]:
    """A slot's GPUs: its device, or its tensor-parallel group's (model.md §14)."""
    return (slot,) if isinstance(slot, str) else tuple(slot)


def gpu_index(inst: Instance) -> dict[str, int]:
    """Each device's GPU number on its node: its place among the node's devices in the
    instance's order (``cuda:<n>``, the LOCAL_RANK torchrun would give it)."""
    seen: dict[str, int] = {}
    out = {}
    for d in inst.devices:
        out[d.id] = seen.get(d.node, 0)
        seen[d.node] = out[d.id] + 1
    return out


def rank_map(inst: Instance, plan: Plan, hosts: dict[str, str] | None = None) -> dict[str, Any]:
    """Ranks, stages, replicas and process groups of a checked plan; with ``hosts``
    (node -> address) each rank's host and the master's address."""
    check_plan(inst, plan, "plan")
    ev = evaluate(inst, plan)
    if not ev.feasible:      # a framework would run out of memory, or compute something else
        raise PlanError("plan", "infeasible, not exported: " + "; ".join(ev.violations))
    dev = {d.id: d for d in inst.devices}
    sizes = sorted({len(members(g)) for row in plan.grid for g in row})
    if len(sizes) > 1:
        raise PlanError("grid", f"the frameworks run one tensor-parallel degree in every slot; this plan has "
                                f"{'/'.join(map(str, sizes))}")
    P, D, t = plan.stages, plan.replicas, plan.tp
    rank = lambda i, k, j: i + t * (k + D * j)  # noqa: E731  (Megatron-LM's tp-dp-pp order)
    world = t * D * P
    host = (lambda node: hosts[node]) if hosts else (lambda node: node)  # noqa: E731
    master = host(dev[members(plan.grid[0][0])[0]].node)
    gpu = gpu_index(inst)
    ranks = []
    for j in range(P):
        for k in range(D):
            for i, gid in enumerate(members(plan.grid[k][j])):
                d = dev[gid]
                lr = gpu[gid]
                r = rank(i, k, j)
                ranks.append({"rank": r, "device": gid, "type": d.type, "node": d.node, "host": host(d.node),
                              "region": d.region, "local_rank": lr, "replica": k, "stage": j, "tensor_rank": i,
                              # model.md §10: the clock to lock the GPU at (e.g. nvidia-smi -lgc), 1 = full
                              "clock_fraction": plan.clock(gid),
                              "layers": [plan.cuts[j], plan.cuts[j + 1]],
                              "env": {"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(lr),
                                      "MASTER_ADDR": master, "GEOTRAIN_REPLICA": str(k), "GEOTRAIN_STAGE": str(j),
                                      "GEOTRAIN_TENSOR_RANK": str(i),
                                      "GEOTRAIN_LAYERS": f"{plan.cuts[j]}:{plan.cuts[j + 1]}",
                                      "GEOTRAIN_MICRO_BATCHES": str(plan.micro_batches[k]),
                                      "GEOTRAIN_MESH": f"{P},{D},{t}"}})
    b = inst.model.micro_batch
    return {
        "schema": EXPORT_SCHEMA, "plan_schema": PLAN_SCHEMA_TP if plan.groups else PLAN_SCHEMA,
        "instance": inst.name, "world_size": world, "pipeline_stages": P, "data_parallel_replicas": D,
        "tensor_parallel": t, "sequence_parallel": t > 1 and inst.options.sequence_parallel, "zero_stage": inst.options.zero_stage,
        "rank_order": "tp-dp-pp",
        "schedule": inst.options.schedule, "micro_batch_size": b, "global_batch": inst.model.global_batch,
        "recompute": inst.model.recompute,
        "accumulation_steps": inst.options.accumulation_steps,
        "stages": [{"stage": j, "layers": [plan.cuts[j], plan.cuts[j + 1]]} for j in range(P)],
        "replicas": [{"replica": k, "micro_batches": m, "samples": m * b,
                      "ranks": [rank(i, k, j) for j in range(P) for i in range(t)]}
                     for k, m in enumerate(plan.micro_batches)],
        "pipeline_groups": [[rank(i, k, j) for j in range(P)] for k in range(D) for i in range(t)],
        "data_parallel_groups": [[rank(i, k, j) for k in range(D)] for j in range(P) for i in range(t)],
        "tensor_groups": [[rank(i, k, j) for i in range(t)] for j in range(P) for k in range(D)],
        "ranks": ranks,
    }


def to_torch_pipelining(inst: Instance, plan: Plan, hosts: dict[str, str] | None = None) -> dict[str, Any]:
    """The rank map plus what ``torch.distributed.pipelining`` asks for: split points
    (module paths where a new stage begins, for ``pipeline(split_spec=...)``), the
    schedule class and each replica's number of micro-batches (``n_microbatches``)."""
    out = rank_map(inst, plan, hosts)
    out["format"] = "torch-pipelining"
    out["split_spec"] = {f"layers.{c}": "BEGINNING" for c in plan.cuts[1:-1]}
    out["schedule_class"] = "ScheduleGPipe" if inst.options.schedule == "gpipe" else "Schedule1F1B"
    # init_device_mesh("cuda", mesh_shape, mesh_dim_names=...): rank r sits at [j, k, i]
    out["device_mesh"] = {"mesh_dim_names": ["pp", "dp", "tp"],
                          "mesh_shape": [plan.stages, plan.replicas, plan.tp]}
    out["usage"] = ("pipeline(module, mb_args, split_spec={k: SplitPoint.BEGINNING for k in split_spec}); "
                    "rank r builds stage ranks[r].stage of its replica's pipeline group with "
                    "replicas[ranks[r].replica].micro_batches micro-batches")
    return out


def _equal_batches(plan: Plan, what: str) -> int:
    if len(set(plan.micro_batches)) != 1:
        raise PlanError("micro_batches", f"{what} gives every replica the same number of micro-batches; "
                                         f"this plan has {list(plan.micro_batches)} (export --to torch-pipelining)")
    return plan.micro_batches[0]


def megatron_model_args(m: Any) -> list[str]:
    """The model as Megatron-LM's arguments (``megatron/training/arguments.py``): the
    shape, and the architecture of model.md §1.1 (SwiGLU, RMSNorm, RoPE, grouped-query
    attention, untied embeddings), so that Megatron builds the model that was priced."""
    args = ["--num-layers", str(m.layers), "--hidden-size", str(m.hidden),
            "--num-attention-heads", str(m.heads), "--ffn-hidden-size", str(m.ffn_hidden),
            "--seq-length", str(m.seq_len), "--max-position-embeddings", str(m.seq_len),
            "--vocab-size", str(m.vocab),
            "--position-embedding-type", "rope" if m.position == "rope" else "learned_absolute",
            "--normalization", "RMSNorm" if m.norm == "rmsnorm" else "LayerNorm"]
    if m.activation == "swiglu":
        args += ["--swiglu", "--disable-bias-linear"]   # the gated MLP of Llama-like models, without biases
    if m.query_groups != m.heads:
        args += ["--group-query-attention", "--num-query-groups", str(m.query_groups)]
    if not m.tied_embeddings:
        args += ["--untie-embeddings-and-output-weights"]
    args += ["--bf16"] if m.precision_bytes == 2 else []
    return args


def to_megatron(inst: Instance, plan: Plan, hosts: dict[str, str] | None = None) -> dict[str, Any]:
    """Megatron-LM arguments. Megatron splits layers evenly, except that the first and
    last stage may differ (``--decoder-first/last-pipeline-num-layers``)."""
    m = _equal_batches(plan, "megatron: Megatron-LM")
    sizes = [plan.cuts[j + 1] - plan.cuts[j] for j in range(plan.stages)]
    args = ["--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.stages),
            *megatron_model_args(inst.model),
            "--micro-batch-size", str(inst.model.micro_batch),
            "--global-batch-size", str(m * inst.model.micro_batch * plan.replicas)]
    inner = sizes[1:-1]
    if len(set(inner)) > 1:
        raise PlanError("cuts", f"megatron: Megatron-LM splits the inner stages evenly; these cuts give "
                                f"{sizes} layers (export --to torch-pipelining)")
    if plan.stages > 1 and (not inner or sizes[0] != inner[0] or sizes[-1] != inner[0]):
        args += ["--decoder-first-pipeline-num-layers", str(sizes[0]),
                 "--decoder-last-pipeline-num-layers", str(sizes[-1])]
    if plan.tp > 1 and inst.options.sequence_parallel:
        args += ["--sequence-parallel"]          # model.md §14: groups run with sequence parallelism
    if inst.options.zero_stage:
        args += ["--use-distributed-optimizer"]  # §15: the optimizer state divided over the replicas
    if inst.model.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif inst.model.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    out = rank_map(inst, plan, hosts)
    out.update(format="megatron", args=args,
               note="launch the ranks in the rank map's order: it is Megatron-LM's default order "
                    "tp-cp-ep-dp-pp (tensor ranks consecutive, then replicas, then stages); "
                    "export --to launch-megatron --hosts HOSTS writes the per-node commands")
    return out


# DeepSpeed's PipelineModule takes a partition_method ("parameters", "uniform",
# "type:regex"), never explicit boundaries; its partitioner stores them in self.parts,
# so a subclass that sets self.parts is how a given partition is run.
_DS_MODULE = """from deepspeed.pipe import PipelineModule

class PlannedPipelineModule(PipelineModule):
    \"\"\"PipelineModule with geotrain-opt's stage boundaries over the transformer layers;
    `before` = the layer specs ahead of the first transformer layer (e.g. 1: the embedding).\"\"\"
    def __init__(self, *args, parts, before=1, **kwargs):
        self._planned, self._before = parts, before
        super().__init__(*args, **kwargs)

    def _partition_layers(self, method="uniform"):
        bounds = [0] + [self._before + p for p in self._planned[1:-1]] + [len(self._layer_specs)]
        self.parts = bounds
        stage = self._topo.get_coord(self.global_rank).pipe
        self._set_bounds(start=bounds[stage], stop=bounds[stage + 1])
"""


def to_deepspeed(inst: Instance, plan: Plan, hosts: dict[str, str] | None = None) -> dict[str, Any]:
    """A DeepSpeed config, the layer boundaries (``parts``) and the ``PipelineModule``
    subclass that runs them."""
    m = _equal_batches(plan, "deepspeed: DeepSpeed")
    if inst.options.zero_stage > 1 and plan.stages > 1:
        raise PlanError("options.zero_stage", "deepspeed: DeepSpeed's pipeline engine runs ZeRO stage 1 at most "
                                              "(export --to megatron or torch-pipelining)")
    b = inst.model.micro_batch
    out = rank_map(inst, plan, hosts)
    out.update(format="deepspeed",
               ds_config={"train_batch_size": m * b * plan.replicas, "train_micro_batch_size_per_gpu": b,
                          "gradient_accumulation_steps": m, "pipeline": {"stages": plan.stages},
                          **({"zero_optimization": {"stage": inst.options.zero_stage}}
                             if inst.options.zero_stage else {}),
                          "bf16": {"enabled": inst.model.precision_bytes == 2}},
               parts=list(plan.cuts), pipeline_module=_DS_MODULE,
               note="transformer layer i goes to the stage s with parts[s] <= i < parts[s+1]; PipelineModule takes "
                    "no explicit partition, so build the model with pipeline_module's PlannedPipelineModule(..., "
                    "parts=parts, topology=PipeModelDataParallelTopology(num_pp, num_mp, num_dp)), whose rank "
                    "order (model fastest, then data, then pipe) is this export's")
    return out


def to_hostfile(inst: Instance, plan: Plan, hosts: dict[str, str] | None = None) -> str:
    """``host slots=N`` lines (DeepSpeed/OpenMPI), nodes in the order of their first
    rank, each named by its address when ``hosts`` maps it."""
    slots: dict[str, int] = {}
    for r in rank_map(inst, plan, hosts)["ranks"]:
        slots[r["host"]] = slots.get(r["host"], 0) + 1
    return "".join(f"{node} slots={n}\n" for node, n in slots.items())


def export(inst: Instance, plan: Plan, fmt: str, hosts: dict[str, str] | None = None, **launch: Any) -> str:
    """The file text of ``plan`` in format ``fmt`` (one of FORMATS); ``hosts`` maps
    nodes to addresses; ``launch`` (entry, port) shapes the launch scripts."""
    from geotrain_opt.cost.evaluator import plan_instance
    inst = plan_instance(inst, plan)          # the plan's micro-batch size (§11)
    if fmt == "hostfile":
        return to_hostfile(inst, plan, hosts)
    if fmt.startswith("launch-"):
        from geotrain_opt.io.launch import check_hosts, launch_script
        check_hosts(rank_map(inst, plan)["ranks"], hosts)
        fw = fmt.removeprefix("launch-")
        m = to_megatron(inst, plan, hosts) if fw == "megatron" else rank_map(inst, plan, hosts)
        return launch_script(inst, plan, fw, m, **launch)
    makers = {"torch-pipelining": to_torch_pipelining, "megatron": to_megatron, "deepspeed": to_deepspeed}
    if fmt not in makers:
        raise PlanError("--to", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    return json.dumps(makers[fmt](inst, plan, hosts), indent=2) + "\n"


def plan_from_export(d: dict[str, Any]) -> Plan:
    """The plan behind an export (any JSON format above): ranks back to the grid,
    stage layer ranges back to the cuts, replicas back to the split."""
    if not isinstance(d, dict) or d.get("schema") != EXPORT_SCHEMA:
        raise PlanError("schema", f"not a geotrain-opt export ({EXPORT_SCHEMA})")
    try:
        P, D = int(d["pipeline_stages"]), int(d["data_parallel_replicas"])
        slots: list[list[dict[int, str]]] = [[{} for _ in range(P)] for _ in range(D)]
        for r in d["ranks"]:
            slots[int(r["replica"])][int(r["stage"])][int(r.get("tensor_rank", 0))] = str(r["device"])
        grid = [[[s[i] for i in sorted(s)] if len(s) > 1 else next(iter(s.values()), "") for s in row]
                for row in slots]
        cuts = [int(s["layers"][0]) for s in d["stages"]] + [int(d["stages"][-1]["layers"][1])]
        mb = [int(r["micro_batches"]) for r in d["replicas"]]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise PlanError("ranks", f"malformed export ({type(e).__name__}: {e})") from None
    return Plan.from_dict({"grid": grid, "cuts": cuts, "micro_batches": mb})


def load_plan_or_export(path: str) -> tuple[Plan, dict[str, Any] | None]:
    """A plan, result or export file: (plan, the export or None)."""
    from geotrain_opt.common.inputs import read_text_file
    try:
        d = json.loads(read_text_file(path, 256 << 20))
    except (ValueError, RecursionError) as e:          # JSONDecodeError is a ValueError
        raise PlanError("<file>", str(e)[:200]) from None
    if isinstance(d, dict) and d.get("schema") == EXPORT_SCHEMA:
        return plan_from_export(d), d
    return Plan.load(path), None
