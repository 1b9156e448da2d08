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

LIB = ROOT / "instances" / "lib"
# (name, source: a bundled file or (family, gpus, seed), structure)
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
]
SOLVERS = {"cpsat": {}, "memetic": {}}


def place(name: str, source) -> Path:
    target = LIB / "instances" / f"{name}.yaml"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, tuple):
            d = generate(*source)
            d["name"] = name
            target.write_text(to_yaml(d))
        else:
            shutil.copyfile(ROOT / source, target)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--only", help="comma-separated names")
    args = ap.parse_args()
    (LIB / "plans").mkdir(parents=True, exist_ok=True)
    idx = lib.load_index(LIB) if (LIB / "index.yaml").exists() else {"version": "0.1", "records": []}
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
