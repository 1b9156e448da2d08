"""Time CP-SAT and the MILP need to prove optimality as the cluster grows, and the
certified gap of the memetic plan beyond (not a test).

    python benchmarks/exact_scaling.py [--sizes 4,6,8,10,12,16] [--time-limit 120] [--seed 0]
                                       [--models devices,classes] [--solvers cpsat,milp]
    python benchmarks/exact_scaling.py --files instances/real/dtfm-1-datacenter-ondemand.yaml,...
    python benchmarks/exact_scaling.py --gap 16,64,256,1024 --time-limit 60

Sizes: one generated instance per size (family ``small``: 2-4 regions, catalog
GPUs, GPT-2 medium/large or GPT-3 XL, 8 micro-batches); ``--files``: instance
files (e.g. DT-FM's 64-GPU scenarios); 2 solver threads. Prints a Markdown table:
model (per device or per class), units, wall time, status, the gap at the limit,
the plan's T, how many shapes the bounds closed without a model, and how many the
class-grid relaxation closed (CP-SAT; formulations/proofs.md §9).
``--gap``: generated ``geo`` instances, the memetic plan after the time limit,
the instance's lower bound (geotrain_opt/bounds/) and the certified gap.
"""
from __future__ import annotations

import argparse
import time

from geotrain_opt import instance_from_dict
from geotrain_opt.bounds import attach_bound
from geotrain_opt.io.generate import generate, small
from geotrain_opt.problem.instance import load_instance
from geotrain_opt.solvers import SolveOptions, get


def exact_rows(items, solvers: list[str], models: list[str], limit: float, seed: int) -> None:
    print("| instance | GPUs | model | units | solver | status | wall s | gap | T (s) | plan DxP | closed by bound | by class grid |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, inst in items:
        for name in solvers:
            for model in models:
                t = time.perf_counter()
                res = get(name)(inst, SolveOptions(time_limit_s=limit, workers=2, seed=seed,
                                                   extra={"exact_model": model}))
                wall = time.perf_counter() - t
                gap = "-" if res.gap is None else f"{res.gap:.2%}"
                T = f"{res.evaluation.time_s:.4f}" if res.evaluation else "-"
                shape = f"{res.plan.replicas}x{res.plan.stages}" if res.plan else "-"
                log = res.stats.get("shape_log", [])
                grid = sum(1 for s in log if s["status"] == "closed" and s.get("by") == "class grid")
                closed = sum(1 for s in log if s["status"] == "closed") - grid
                print(f"| {label} | {inst.n} | {res.stats.get('model')} | {res.stats.get('units')} | {name} | "
                      f"{res.status} | {wall:.1f} | {gap} | {T} | {shape} | {closed}/{res.stats.get('shapes', 0)} | "
                      f"{grid} |", flush=True)


def gap_rows(sizes: list[int], limit: float, seed: int) -> None:
    print("| GPUs | memetic T (s) | plan DxP | lower bound (s) | certified gap | bound s |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        inst = instance_from_dict(generate("geo", n, seed))
        res = get("memetic")(inst, SolveOptions(time_limit_s=limit, workers=2, seed=seed))
        attach_bound(inst, res)
        lb = res.stats["lower_bound"]
        shape = f"{res.plan.replicas}x{res.plan.stages}" if res.plan else "-"
        print(f"| {n} | {res.objective_value:.4f} | {shape} | {lb['value']:.4f} | ≤ {res.gap:.1%} | {lb['seconds']:.2f} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,6,8,10,12,16")
    ap.add_argument("--files", help="comma-separated instance files instead of generated sizes")
    ap.add_argument("--gap", help="comma-separated geo sizes: memetic plan and certified gap")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solvers", default="cpsat,milp")
    ap.add_argument("--models", default="auto", help="exact_model values: auto, devices, classes")
    args = ap.parse_args()
    if args.gap:
        gap_rows([int(s) for s in args.gap.split(",")], args.time_limit, args.seed)
        return
    if args.files:
        items = [(f.rsplit("/", 1)[-1].removesuffix(".yaml"), load_instance(f)) for f in args.files.split(",")]
    else:
        items = [(f"small-{n}", instance_from_dict(small(n, args.seed))) for n in map(int, args.sizes.split(","))]
    exact_rows(items, args.solvers.split(","), args.models.split(","), args.time_limit, args.seed)


if __name__ == "__main__":
    main()
