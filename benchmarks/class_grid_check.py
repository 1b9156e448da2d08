"""Differential check of the class-grid relaxation (formulations/proofs.md §9) beyond
brute force: CP-SAT with it (the default) against the MILP, which never runs it, on
generated clusters whose devices form classes (time objective, uniform split). Not
a test; prints a Markdown table and the disagreements (must be 0).

    python benchmarks/class_grid_check.py [--sizes 8,10,12] [--seeds 0:10] [--time-limit 60]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geotrain_opt import evaluate, instance_from_dict  # noqa: E402
from geotrain_opt.io.generate import generate  # noqa: E402
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.solvers.exact import class_grid, ring_orders  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,10,12")
    ap.add_argument("--seeds", default="0:10")
    ap.add_argument("--families", default="small,nodes,regions")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    a, b = map(int, args.seeds.split(":"))
    print("| instance | GPUs | classes | cpsat | milp | T (s) | shapes closed by the class grid | agree |")
    print("|---|---|---|---|---|---|---|---|")
    bad = runs = 0
    for fam in args.families.split(","):
        for n in map(int, args.sizes.split(",")):
            for seed in range(a, b):
                try:
                    d = generate(fam, n, seed)
                except Exception:          # noqa: BLE001 - a size the family does not make
                    continue
                d["options"]["batch_split"] = "uniform"
                d["objective"] = {"kind": "time"}
                try:
                    inst = instance_from_dict(d)
                except Exception:          # noqa: BLE001 - a draw that fits nowhere
                    continue
                if class_grid.not_applicable(inst, 2) is not None:
                    continue
                res = {s: get(s)(inst, SolveOptions(time_limit_s=args.time_limit, workers=2)) for s in ("cpsat", "milp")}
                vals = {s: evaluate(inst, r.plan).time_s if r.plan else None for s, r in res.items()}
                proved = all(r.status == "optimal" for r in res.values())
                agree = (not proved or abs(vals["cpsat"] - vals["milp"]) <= 1e-6 * vals["milp"]) and \
                    all(r.status != "optimal" or all(v is None or v >= vals[s] * (1 - 1e-6) for v in vals.values())
                        for s, r in res.items())
                grid = sum(1 for e in res["cpsat"].stats["shape_log"]
                           if e.get("by") == "class grid" and e["status"] == "closed")
                runs += 1
                bad += not agree
                T = f"{vals['cpsat']:.6g}" if vals["cpsat"] is not None else "-"
                print(f"| {fam}-{n}-{seed} | {inst.n} | {len(ring_orders._classes(inst).members)} | {res['cpsat'].status} | "
                      f"{res['milp'].status} | {T} | {grid} | {'yes' if agree else 'NO'} |", flush=True)
    print(f"\n{runs} clusters, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
