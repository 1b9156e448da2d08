"""JSON Schemas (draft 2020-12) of the instance, plan and result files.

Built from the same field lists and ranges the reader enforces (instance/fields.py), so
the published schema and the loader cannot drift apart; the files under
``geotrain_opt/io/schemas/`` are this module's output (``python -m geotrain_opt.io.schema
--write``), and a test checks they are current. The reader stays the authority:
it also checks what a schema cannot say (a device's links exist, a type is in the
catalog or in gpu_types, wait power <= busy power, the model fits somewhere).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from geotrain_opt.problem.instance import BATCH_SPLITS, INT_MAX, LIMITS, MAX_DEVICES, OBJECTIVES, SCHEDULES
from geotrain_opt.problem.instance.network import MIN_CAPACITY_GBPS
from geotrain_opt.problem.instance.loading import MIN_EFFICIENCY, MIN_PEAK_TFLOPS
from geotrain_opt.common.provenance import PLAN_SCHEMA, PLAN_SCHEMA_TP, RESULT_SCHEMA

DIR = Path(__file__).parent / "schemas"
_URL = "https://geotrain-opt.invalid/schemas/"


def _num(key: str | None = None, *, positive: bool = False, nonneg: bool = False, maximum: float | None = None,
         doc: str = "", minimum: float | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "number"}
    if minimum is not None:           # a floor the loader enforces too
        s["minimum"] = minimum
    elif positive:
        s["exclusiveMinimum"] = 0
    elif nonneg:
        s["minimum"] = 0
    top = maximum if maximum is not None else LIMITS.get(key or "")
    if top is not None:
        s["maximum"] = top
    if doc:
        s["description"] = doc
    return s


def _int(key: str | None = None, minimum: int = 1, doc: str = "") -> dict[str, Any]:
    s: dict[str, Any] = {"type": "integer", "minimum": minimum, "maximum": int(LIMITS.get(key or "", INT_MAX))}
    if doc:
        s["description"] = doc
    return s


def _obj(props: dict[str, Any], required: tuple[str, ...] = (), doc: str = "") -> dict[str, Any]:
    s: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        s["required"] = list(required)
    if doc:
        s["description"] = doc
    return s


_STR = {"type": "string", "minLength": 1}


def instance_schema() -> dict[str, Any]:
    gpu = {
        "peak_tflops": _num("peak_tflops", minimum=MIN_PEAK_TFLOPS, doc="dense peak at the model's precision, TFLOP/s"),
        "efficiency": _num(minimum=MIN_EFFICIENCY, maximum=1, doc="achieved fraction of peak, in (0, 1] (saturated, "
                                                          "with half_tokens)"),
        "half_tokens": _num("half_tokens", nonneg=True,
                            doc="tokens per micro-batch at which the efficiency is half its value (model.md §1); "
                                "default 0: constant"),
        "memory_gib": _num("memory_gib", positive=True),
        "busy_w": _num("busy_w", positive=True, doc="board power while computing, W"),
        "wait_w": _num("wait_w", nonneg=True, doc="board power while waiting, W (<= busy_w)"),
        "price_per_hour": _num("price_per_hour", nonneg=True, doc="USD per GPU-hour (cost, §9); default 0"),
        "clocks": {"description": "lower clocks (model.md §10), or 'default' for the catalog's modelled table",
                   "anyOf": [{"type": "array", "items": _obj(
                       {"fraction": {"type": "number", "minimum": 0.01, "maximum": 1},
                        "busy_w": _num("busy_w", positive=True)}, ("fraction",))}, {"const": "default"}]},
    }
    link = {"latency_ms": _num("latency_ms", nonneg=True), "bandwidth_gbps": _num("bandwidth_gbps", positive=True)}
    link_obj = _obj(link, ("latency_ms", "bandwidth_gbps"))
    pair = _obj({"a": _STR, "b": _STR, **link}, ("a", "b", "latency_ms", "bandwidth_gbps"),
                doc="{a, b} covers both directions unless {b, a} is listed too")
    device = _obj({
        "id": _STR, "type": _STR, "region": _STR, "node": _STR,
        "count": _int("count", doc="this many identical devices (ids id_prefix0, id_prefix1, …)"),
        "id_prefix": _STR, "gpus_per_node": _int("gpus_per_node", minimum=0),
        "nic_gbps": _num("nic_gbps", positive=True, doc="the node's NIC, shared by its devices"),
        **gpu}, ("type", "region"))
    device["oneOf"] = [{"required": ["id"], "not": {"anyOf": [{"required": ["count"]}, {"required": ["id_prefix"]},
                                                              {"required": ["gpus_per_node"]}]}},
                       {"required": ["count"], "not": {"required": ["id"]}}]
    model = _obj({
        "preset": _STR,
        **{k: _int(k) for k in ("layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "global_batch",
                                "micro_batch")},
        "kv_heads": _int("kv_heads", doc="key/value heads (grouped-query attention); default: heads"),
        "activation": {"enum": ["gelu", "swiglu"], "description": "model.md §1.1: two MLP matrices, or three (gated)"},
        "norm": {"enum": ["layernorm", "rmsnorm"], "description": "for exports; no cost"},
        "position": {"enum": ["learned", "rope"], "description": "learned positions are an embedding table"},
        "tied_embeddings": {"type": "boolean", "description": "the output head shares the token embedding"},
        "precision_bytes": _int("precision_bytes"),
        "recompute": {"enum": ["none", "full", "selective"]},
        "attention": {"enum": ["standard", "flash"], "description": "model.md §1: flash keeps no attention scores"},
        "micro_batch_options": {"type": "array", "items": {"type": "integer", "minimum": 1},
                                "description": "micro-batch sizes a plan may choose (model.md §11)"},
        "recompute_options": {"type": "array", "items": {"enum": ["none", "full", "selective"]},
                              "description": "recomputation modes a plan may choose (model.md §11)"},
        "state_bytes": _num("state_bytes", positive=True, doc="optimizer + weight state per parameter, bytes"),
        "grad_bytes": _num("grad_bytes", positive=True, doc="gradient bytes per parameter in the all-reduce"),
        "layer_overrides": {"type": "array", "items": _obj({
            "layer": {"type": "integer", "minimum": 0, "maximum": int(LIMITS["layers"]) - 1},
            "work_scale": _num("work_scale", positive=True), "params_scale": _num("params_scale", positive=True),
            "act_scale": _num("act_scale", positive=True)}, ("layer",))},
    }, doc="a preset name, or the shape fields (a preset's fields can be overridden)")
    model["anyOf"] = [{"required": ["preset"]},
                      {"required": ["layers", "hidden", "heads", "seq_len", "vocab", "global_batch"]}]
    matrix = _obj({"order": {"type": "array", "items": _STR, "minItems": 1, "maxItems": MAX_DEVICES},
                   "latency_ms": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                   "bandwidth_gbps": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
                  ("order", "latency_ms", "bandwidth_gbps"),
                  doc="full n x n matrices in the device order given (diagonal ignored)")
    region_pair = _obj({"a": _STR, "b": _STR, **link,
                        "egress_usd_per_gb": _num("egress_usd_per_gb", nonneg=True,
                                                  doc="USD per GB sent from a to b (cost, §9); default 0"),
                        "capacity_gbps": {**_num("capacity_gbps", doc="aggregate Gbit/s from a to b that all of a "
                                                 "plan's traffic shares (§3.2); absent: every device pair has its "
                                                 "own link"), "minimum": MIN_CAPACITY_GBPS}},
                       ("a", "b", "latency_ms", "bandwidth_gbps"),
                       doc="{a, b} covers both directions unless {b, a} is listed too")
    by_type = _obj({"type": _STR, **link}, ("type", "latency_ms", "bandwidth_gbps"),
                   doc="the link between two GPUs of this type on one node (model.md §1)")
    network = _obj({"intra_node": link_obj, "intra_region": link_obj,
                    "intra_node_by_type": {"type": "array", "items": by_type},
                    "inter_region": {"type": "array", "items": region_pair}, "pairs": {"type": "array", "items": pair},
                    "matrix": matrix},
                   doc="tiers, then region pairs, then device pairs, then the matrix: later ones win")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": _URL + "instance.schema.json",
        "title": "geotrain-opt instance", "description": "formulations/model.md §1 and §8 (ranges)",
        **_obj({
            "name": {**_STR, "maxLength": 200}, "description": {"type": "string", "maxLength": 20_000},
            "source": {"type": "string", "maxLength": 20_000},
            "model": model,
            "gpu_types": {"type": "object", "additionalProperties": _obj({**gpu, "source": {"type": "string", "maxLength": 20_000}}),
                          "description": "new GPU types, or changes to the catalog's"},
            "devices": {"type": "array", "items": device, "minItems": 1},
            "network": network,
            "energy": _obj({"net_j_per_byte": _num("net_j_per_byte", nonneg=True),
                            "pue": {"type": "object", "additionalProperties": _num(maximum=LIMITS["pue"]) | {"minimum": 1}},
                            "carbon_g_per_kwh": {"type": "object",
                                                 "additionalProperties": _num("carbon_g_per_kwh", nonneg=True),
                                                 "description": "grams of CO2 per kWh by region (carbon, §9)"}}),
            "carbon_g_per_kwh": {"type": "object", "additionalProperties": _num("carbon_g_per_kwh", nonneg=True),
                                 "description": "grams of CO2 per kWh by region (or under energy)"},
            "options": _obj({"memory_headroom": _num(positive=True, maximum=1),
                             "schedule": {"enum": list(SCHEDULES)}, "batch_split": {"enum": list(BATCH_SPLITS)},
                             "max_devices": _int("max_devices"), "exposed_comm": _num(nonneg=True, maximum=1),
                             "accumulation_steps": _int("accumulation_steps"),
                             "host_stack_gbps": _num("host_stack_gbps", positive=True),
                             "zero_stage": {"enum": [0, 1, 2], "description": "ZeRO stage of the data-parallel "
                                                                             "group (model.md §15); default 0"},
                             "sequence_parallel": {"type": "boolean", "description": "tensor-parallel groups split "
                                                   "the activations outside their GEMMs too (model.md §14); "
                                                   "default true"},
                             "tensor_parallel": {"oneOf": [{"const": "auto"},
                                                           {"type": "array", "minItems": 1, "maxItems": 16,
                                                            "uniqueItems": True,
                                                            "items": {"type": "integer", "minimum": 1, "maximum": 1024}}],
                                                 "description": "degrees the solvers search (model.md §14); "
                                                                "default [1]"}}),
            "objective": _obj({"kind": {"enum": list(OBJECTIVES)}, "lambda": _num(nonneg=True, maximum=1),
                               "time_ref_s": _num("time_ref_s", positive=True),
                               "energy_ref_j": _num("energy_ref_j", positive=True),
                               "max_time_s": _num("max_time_s", positive=True),
                               "max_energy_j": _num("max_energy_j", positive=True),
                               "max_cost_usd": _num("max_cost_usd", positive=True),
                               "max_carbon_g": _num("max_carbon_g", positive=True)}),
        }, ("model", "devices", "network")),
    }


def plan_schema() -> dict[str, Any]:
    ints = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": _URL + "plan.schema.json",
        "title": "geotrain-opt plan", "description": "formulations/model.md §2",
        **_obj({"schema": {"enum": [PLAN_SCHEMA, PLAN_SCHEMA_TP]}, "stages": {"type": "integer", "minimum": 1},
                "replicas": {"type": "integer", "minimum": 1},
                "grid": {"type": "array", "minItems": 1,
                         "description": "grid[k][j]: device of replica k, stage j, or its tensor-parallel "
                                        "group's devices (model.md §14)",
                         "items": {"type": "array", "minItems": 1,
                                   "items": {"oneOf": [_STR, {"type": "array", "minItems": 1, "items": _STR}]}}},
                "cuts": ints | {"description": "P + 1 layer boundaries, 0 … L"},
                "micro_batches": ints | {"description": "micro-batches of each replica"},
                "micro_batch": {"type": "integer", "minimum": 1, "description": "model.md §11; default the model's"},
                "recompute": {"enum": ["none", "full", "selective"], "description": "model.md §11; default the model's"},
                "clocks": {"type": "object", "additionalProperties": {"type": "number", "exclusiveMinimum": 0,
                                                                      "maximum": 1},
                           "description": "device id -> clock fraction (model.md §10); default 1"}},
               ("grid", "cuts", "micro_batches")),
    }


def result_schema() -> dict[str, Any]:
    from geotrain_opt.solvers.result import STATUSES
    num_or_null = {"type": ["number", "null"]}
    result = _obj({
        "schema": {"const": RESULT_SCHEMA}, "solver": _STR, "status": {"enum": list(STATUSES)},
        "objective": {"type": "string"}, "objective_value": num_or_null, "best_bound": num_or_null, "gap": num_or_null,
        "seed": {"type": ["integer", "null"]}, "wall_s": {"type": "number", "minimum": 0},
        "settings": {"type": "object"}, "stats": {"type": "object"},
        "plan": {"anyOf": [{"$ref": "plan.schema.json"}, {"type": "null"}]},
        "evaluation": {"type": ["object", "null"]},
        "pareto": {"type": "array", "items": {"$ref": "#"}},
        "provenance": {"type": "object", "properties": {
            "versions": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            "python": {"type": "string"}, "host": {"type": "string"}, "platform": {"type": "string"},
            "cpus": {"type": ["integer", "null"]}, "commit": {"type": ["string", "null"]}, "time_utc": {"type": "string"}}},
    }, ("solver", "status", "objective", "plan"))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": _URL + "result.schema.json",
            "title": "geotrain-opt result", "description": "formulations/model.md §5", **result}


SCHEMAS = {"instance": instance_schema, "plan": plan_schema, "result": result_schema}


def render(kind: str) -> str:
    return json.dumps(SCHEMAS[kind](), indent=2, ensure_ascii=False) + "\n"


def schema_errors(data: Any, kind: str = "instance") -> list[str]:
    """'path: message' for each place ``data`` breaks the schema; [] if jsonschema is absent."""
    try:
        import jsonschema
        from referencing import Registry, Resource
    except ImportError:
        return []
    reg = Registry().with_resources(
        (_URL + f"{k}.schema.json", Resource.from_contents(f())) for k, f in SCHEMAS.items())
    v = jsonschema.Draft202012Validator(SCHEMAS[kind](), registry=reg)
    out = []
    for e in sorted(v.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".") or "<root>"
        out.append(f"{path}: {e.message}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        DIR.mkdir(exist_ok=True)
        for k in SCHEMAS:
            (DIR / f"{k}.schema.json").write_text(render(k))
            print(f"wrote {DIR / f'{k}.schema.json'}")
        return 0
    print("usage: python -m geotrain_opt.io.schema --write", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
