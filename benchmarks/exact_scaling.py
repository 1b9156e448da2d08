"""Time CP-SAT and the MILP need to prove optimality as the cluster grows (not a test).

    python benchmarks/exact_scaling.py [--sizes 4,6,8,10,12,16] [--time-limit 120] [--seed 0]

One generated instance per size (family ``small``: 2-4 regions, catalog GPUs,
GPT-2 medium/large or GPT-3 XL, 8 micro-batches), 2 solver threads. Prints a
Markdown table: wall time, status, the gap at the limit, and the plan's T.
"""
from __future__ import annotations

import argparse
import time

from geotrain_opt import instance_from_dict
from geotrain_opt.generate import small
from geotrain_opt.solvers import SolveOptions, get


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,6,8,10,12,16")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solvers", default="cpsat,milp")
    args = ap.parse_args()
    print("| GPUs | layers | solver | status | wall s | gap | T (s) | plan DxP |")
    print("|---|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        inst = instance_from_dict(small(n, args.seed))
        for name in args.solvers.split(","):
            t = time.perf_counter()
            res = get(name)(inst, SolveOptions(time_limit_s=args.time_limit, workers=2, seed=args.seed))
            wall = time.perf_counter() - t
            gap = "-" if res.gap is None else f"{res.gap:.2%}"
            T = f"{res.evaluation.time_s:.4f}" if res.evaluation else "-"
            shape = f"{res.plan.replicas}x{res.plan.stages}" if res.plan else "-"
            print(f"| {n} | {inst.model.layers} | {name} | {res.status} | {wall:.1f} | {gap} | {T} | {shape} |", flush=True)


if __name__ == "__main__":
    main()
