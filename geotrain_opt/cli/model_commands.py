"""``model import`` (a Hugging Face config to an instance's model section),
``import-profile`` (Sailor's or Metis' profiled layer times to an efficiency curve) and
``catalog`` (the GPU types and model presets the instances may name, with sources)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from geotrain_opt.common.outputs import check_writable, write_or_print
from geotrain_opt.errors import InstanceError


def cmd_model_import(args: argparse.Namespace) -> int:
    """Print (or write) the model section, or a whole instance when ``--instance`` names
    one whose model section it replaces; the result is loaded once to check it."""
    import yaml
    from geotrain_opt.io.hf_config import model_from_hf, read_hf_config
    from geotrain_opt.problem.instance import instance_from_dict
    from geotrain_opt.problem.instance.loading import parse_text
    from geotrain_opt.common.inputs import read_text_file
    check_writable(args.out, "--out")
    try:
        cfg = read_hf_config(args.config)
    except ValueError as e:
        raise InstanceError("config", str(e)) from None
    model = model_from_hf(cfg, global_batch=args.global_batch, micro_batch=args.micro_batch, seq_len=args.seq_len)
    if args.seq_len is None:
        print(f"note: seq_len {model['seq_len']} is the config's longest context; --seq-len sets the training "
              f"length", file=sys.stderr)
    if args.instance:
        try:
            data = parse_text(read_text_file(args.instance), args.instance)
        except ValueError as e:
            raise InstanceError("--instance", str(e)) from None
        if not isinstance(data, dict):
            raise InstanceError("--instance", "expected an instance (a mapping)")
        data = {**data, "model": model}
        instance_from_dict(data)              # a file that does not load is not written
        doc: dict[str, Any] = data
    else:
        doc = {"model": model}
    text = (f"# model from {args.config} (geotrain-opt model import)\n"
            + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))
    write_or_print(text, args.out)
    return 0


def cmd_import_profile(args: argparse.Namespace) -> int:
    """A Sailor or Metis profile as a calibration file (efficiency curve of one GPU type)."""
    from geotrain_opt.cost.profiles import import_profile
    from geotrain_opt.problem.instance import load_instance
    check_writable(args.out, "--out")
    inst = load_instance(args.instance)
    cal = import_profile(inst, args.format, args.profile, args.gpu_type)
    text = json.dumps(cal, indent=2) + "\n"
    fit = cal["gpu_types"][args.gpu_type]
    for w in cal["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"{args.gpu_type}: efficiency {fit['efficiency']:.4f}, half_tokens {fit['half_tokens']:.1f} "
          f"({len(cal['fit']['points'])} point(s), worst error {cal['fit']['max_abs_error']:.1%})", file=sys.stderr)
    write_or_print(text, args.out, "apply with --calibration")
    return 0


def catalog_rows() -> dict[str, list[dict[str, Any]]]:
    """Every GPU type and model preset, as the instance loader sees them."""
    from dataclasses import asdict
    from geotrain_opt.problem.catalog import GPU_CATALOG, MODEL_PRESETS
    gpus = [{k: v for k, v in asdict(g).items() if k != "clocks"} for g in GPU_CATALOG.values()]
    presets = [{"name": p.name, **p.fields(), "kv_heads": p.kv_heads or p.heads, "source": p.source}
               for p in MODEL_PRESETS.values()]
    return {"gpu_types": gpus, "model_presets": presets}


def cmd_catalog(args: argparse.Namespace) -> int:
    from geotrain_opt.io.describe import table
    rows = catalog_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(table([[g["name"], f"{g['peak_tflops']:g}", f"{g['efficiency']:g}", f"{g['memory_gib']:g}",
                  f"{g['busy_w']:g}", f"{g['wait_w']:g}", g["source"]] for g in rows["gpu_types"]],
                ["GPU type", "peak TFLOP/s", "efficiency", "GiB", "busy W", "wait W", "source"]))
    print()
    print(table([[p["name"], str(p["layers"]), str(p["hidden"]), f"{p['heads']}/{p['kv_heads']}", str(p["seq_len"]),
                  str(p["vocab"]), f"{p['ffn_hidden']} {p['activation']}", f"{p['norm']}, {p['position']}",
                  p["source"]] for p in rows["model_presets"]],
                ["preset", "layers", "hidden", "heads/KV", "seq", "vocab", "MLP", "norm, positions", "source"]))
    return 0


def add_parsers(sub: Any) -> None:
    """``model import``, ``import-profile`` and ``catalog``."""
    from geotrain_opt.cli.args import _number
    p = sub.add_parser("model", help="models from their Hugging Face configs")
    msub = p.add_subparsers(dest="model_command", required=True)
    q = msub.add_parser("import", help="a Hugging Face config.json as an instance's model section")
    q.add_argument("config", help="the model's config.json (a local file)")
    q.add_argument("--global-batch", type=_number(1, 100_000_000, integer=True), required=True,
                   help="sequences per iteration (not in the config)")
    q.add_argument("--micro-batch", type=_number(1, 1_000_000, integer=True), default=1)
    q.add_argument("--seq-len", type=_number(1, 10_000_000, integer=True),
                   help="training sequence length (default: the config's max_position_embeddings)")
    q.add_argument("--instance", help="an instance whose model section to replace (written as a new file)")
    q.add_argument("--out", help="file to write (default: standard output)")
    q.set_defaults(fn=cmd_model_import)
    p = sub.add_parser("import-profile", help="per-layer times profiled by Sailor or Metis as a GPU type's "
                                              "efficiency curve (a calibration file for --calibration)")
    p.add_argument("profile", nargs="+", help="sailor: profile.json; metis: DeviceType.<GPU>_tp<t>_bs<b>.json files "
                                              "or their folder")
    p.add_argument("--format", required=True, choices=("sailor", "metis"))
    p.add_argument("--instance", required=True, help="the instance whose model was profiled")
    p.add_argument("--gpu-type", required=True, help="the instance's GPU type the profile is of")
    p.add_argument("--out", help="calibration JSON to write (default: standard output)")
    p.set_defaults(fn=cmd_import_profile)
    p = sub.add_parser("catalog", help="the GPU types and model presets instances may name, with their sources")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_catalog)
