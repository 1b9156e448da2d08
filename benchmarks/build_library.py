"""Build (or extend) the benchmark library ``instances/lib/`` (issue 41): copy each
instance in, run the exact and memetic solvers on it, record the best plan, the best
lower bound and the status, with the solver, version and command of each.

    python benchmarks/build_library.py [--time-limit 30] [--only NAME,...]

Existing records are only improved (``geotrain_opt.analysis.library.update`` rules):
running it again with longer limits can close gaps, never lose a record.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import geotrain_opt as gt  # noqa: E402
from geotrain_opt.analysis import library as lib  # noqa: E402
from geotrain_opt.io.generate import generate, to_yaml  # noqa: E402
from geotrain_opt.problem.instance import parse_text, read_text_file  # noqa: E402

LIB = ROOT / "instances" / "lib"
ENERGY = {"objective": {"kind": "energy"}}
LLAMA13B = {"preset": "llama2-13b", "global_batch": 512, "micro_batch": 1, "attention": "flash"}
LLAMA70B = {"preset": "llama2-70b", "global_batch": 512, "micro_batch": 1, "attention": "flash"}
# (name, source, structure); a source is a bundled file or (family, gpus, seed), either
# with a mapping merged into its top-level sections (another objective, model, options)
SET = [
    ("demo-8gpu", "instances/demo-8gpu.yaml", "3 regions, 3 GPU generations"),
    ("demo-8gpu-levers", "instances/demo-8gpu-levers.yaml", "clocks, micro-batch, recompute, prices"),
    ("tiny-4gpu-2region", "instances/tiny-4gpu-2region.yaml", "2 regions"),
    ("realexec-4gpu-2region", "instances/realexec-4gpu-2region.yaml", "2 regions"),
    ("llama7b-3region-28", "instances/llama7b-3region-28.yaml", "3 regions, nodes, memory-tight"),
    ("llama70b-2region-tp", "instances/llama70b-2region-tp.yaml", "2 regions, tensor parallelism"),
    *[(p.stem, f"instances/real/{p.name}", "DT-FM scenario" if p.stem.startswith("dtfm") else "real cloud GPUs")
      for p in sorted((ROOT / "instances" / "real").glob("*.yaml"))],
    *[(p.stem, f"instances/small/{p.name}", "small, class-structured") for p in sorted((ROOT / "instances" / "small").glob("*.yaml"))],
    ("tiny-6-s4", "instances/tiny/tiny-6-s4.yaml", "tiny"),
    ("memory-tight-32-s0", ("memory-tight", 32, 0), "memory-tight"),
    ("mixed-power-64-s0", ("mixed-power", 64, 0), "mixed-power"),
    ("nodes-5-s0", ("nodes", 8, 0), "node-structured"),
    ("regions-6-s0", ("regions", 12, 0), "multi-region"),
    ("geo-64-s0", ("geo", 64, 0), "geo, 64 GPUs"),
    ("geo-256-s0", ("geo", 256, 0), "geo, 256 GPUs"),
    ("geo-1024-s0", ("geo", 1024, 0), "geo, 1,024 GPUs"),
    ("geo-4096-s0", ("geo", 4096, 0), "geo, 4,096 GPUs"),
    # v0.2: more sizes and structures, the energy objective, tensor parallelism, levers
    ("tiny-5-s13", "instances/small-suite/tiny-5-s13.yaml", "tiny"),
    ("small-8-s4", "instances/small-suite/small-8-s4.yaml", "small, class-structured"),
    ("mixed-power-16-s2", ("mixed-power", 16, 2), "mixed-power"),
    ("regions-12-s3", ("regions", 12, 3), "multi-region"),
    ("nodes-4-s2", ("nodes", 9, 2), "node-structured"),
    ("memory-tight-64-s1", ("memory-tight", 64, 1), "memory-tight"),
    ("small-16-s5", ("small", 16, 5), "small, class-structured"),
    ("geo-128-s1", ("geo", 128, 1), "geo, 128 GPUs"),
    ("geo-512-s0", ("geo", 512, 0), "geo, 512 GPUs"),
    ("geo-2048-s0", ("geo", 2048, 0), "geo, 2,048 GPUs"),
    ("geo-256-s1-energy", ("geo", 256, 1, ENERGY), "geo, 256 GPUs, energy"),
    ("dtfm-3-multi-datacenter-energy", ("instances/real/dtfm-3-multi-datacenter.yaml", ENERGY),
     "DT-FM scenario, energy"),
    ("mixed-gen-5region-40-energy", ("instances/real/mixed-gen-5region-40.yaml", ENERGY), "real cloud GPUs, energy"),
    ("llama7b-3region-28-energy", ("instances/llama7b-3region-28.yaml", ENERGY), "3 regions, nodes, energy"),
    ("geo-64-s0-llama13b-tp", ("geo", 64, 0, {"model": LLAMA13B, "options": {"tensor_parallel": "auto"}}),
     "geo, Llama-2-13B, tensor parallelism"),
    ("geo-256-s0-llama70b-tp", ("geo", 256, 0, {"model": LLAMA70B,
                                                "options": {"tensor_parallel": "auto", "zero_stage": 1}}),
     "geo, Llama-2-70B, tensor parallelism, ZeRO-1"),
    ("geo-64-s2-levers", ("geo", 64, 2, {"model": {"micro_batch_options": [1, 2, 4, 8],
                                                   "recompute_options": ["none", "full"]}}),
     "geo, micro-batch and recompute choices"),
]
SOLVERS = {"cpsat": {}, "memetic": {}}
VERSION = "0.2"


def place(name: str, source) -> Path:
    target = LIB / "instances" / f"{name}.yaml"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, str):
        shutil.copyfile(ROOT / source, target)
        return target
    *what, over = source if isinstance(source[-1], dict) else (*source, {})
    if len(what) == 1:
        d = parse_text(read_text_file(ROOT / what[0], 16 << 20), what[0])
    else:
        d = generate(*what)
    for section, value in over.items():
        d[section] = {**d.get(section, {}), **value} if isinstance(value, dict) else value
    d["name"] = name
    target.write_text(to_yaml(d))
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--only", help="comma-separated names")
    args = ap.parse_args()
    (LIB / "plans").mkdir(parents=True, exist_ok=True)
    idx = lib.load_index(LIB) if (LIB / "index.yaml").exists() else {"version": VERSION, "records": []}
    if idx.get("version") != VERSION:
        idx["version"] = VERSION
        (LIB / "index.yaml").write_text(lib.dump_index(idx))
    known = {r["name"] for r in idx["records"]}
    for name, source, structure in SET:
        if args.only and name not in args.only.split(","):
            continue
        path = place(name, source)
        inst = gt.load_instance(path)
        if name not in known:
            idx["records"].append({"name": name, "instance": f"instances/{name}.yaml", "gpus": inst.n,
                                   "structure": structure, "objective": inst.objective.kind, "status": "open",
                                   "gap": None, "best": None})
            (LIB / "index.yaml").write_text(lib.dump_index(idx))
            known.add(name)
        for solver, opts in SOLVERS.items():
            t = time.perf_counter()
            res = gt.solve(inst, solver, time_limit=args.time_limit, seed=0, **opts)
            cmd = f"geotrain-opt solve instances/lib/instances/{name}.yaml --solver {solver} --time-limit {args.time_limit:g}"
            by = {"solver": solver, "version": gt.__version__, "command": cmd}
            tmp = LIB / "plans" / f".{name}.{solver}.json"
            if res.plan is not None:
                tmp.write_text(json.dumps(res.plan.to_dict()))
            changed = lib.update(name, str(tmp) if res.plan is not None else None,
                                 res.best_bound if res.best_bound is not None else None, by, LIB)
            tmp.unlink(missing_ok=True)
            print(f"{name} {solver}: {res.status} {res.objective_value} bound {res.best_bound} "
                  f"({time.perf_counter() - t:.0f} s) {'; '.join(changed)}", flush=True)
        idx = lib.load_index(LIB)


if __name__ == "__main__":
    main()
