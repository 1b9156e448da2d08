"""Analytic cost model vs discrete-event simulation (not a test).

    python benchmarks/model_fidelity.py [--time-limit 20]

For the best plans of several solvers on bundled instances, compare the analytic
T and E (formulations/model.md §3) with the simulator's, in three simulator settings: plain
(independent links), shared inter-region links, and rendezvous sends. Prints the
per-plan errors and a summary: median and worst relative error of T and E
(positive = the simulation is slower / costlier, i.e. the analytic model is optimistic).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from geotrain_opt import evaluate, load_instance
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.solvers import SolveOptions, get

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["demo-8gpu.yaml", "tiny-4gpu-2region.yaml", "real/mixed-gen-3region-16.yaml",
             "real/vldb-t4-intercontinental.yaml", "real/vldb-t4-a10-crosscloud.yaml", "small/small-6-s0.yaml"]
SOLVERS = ["cpsat", "memetic", "greedy", "megatron-uniform", "dtfm"]
SETTINGS = {"plain": {}, "shared links": {"shared_links": True}, "rendezvous": {"rendezvous": True}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=20.0)
    args = ap.parse_args()
    errs = {(s, sch): ([], []) for s in SETTINGS for sch in ("1f1b", "gpipe")}
    print("| instance | solver | schedule | analytic T (s) | " + " | ".join(f"{s}: T err, E err" for s in SETTINGS) + " |")
    print("|---|---|---|---|" + "---|" * len(SETTINGS))
    for name in INSTANCES:
        base = load_instance(ROOT / "instances" / name)
        for schedule in ("1f1b", "gpipe"):
            inst = base.with_options(schedule=schedule)
            for solver in SOLVERS:
                res = get(solver)(inst, SolveOptions(time_limit_s=args.time_limit, seed=0))
                if res.plan is None:
                    continue
                ev = evaluate(inst, res.plan)
                cells = []
                for s, kw in SETTINGS.items():
                    sim = simulate(inst, res.plan, **kw)
                    eT, eE = sim.time_s / ev.time_s - 1, sim.energy_j / ev.energy_j - 1
                    errs[(s, schedule)][0].append(eT)
                    errs[(s, schedule)][1].append(eE)
                    cells.append(f"{eT:+.1%}, {eE:+.1%}")
                print(f"| {inst.name} | {solver} | {schedule} | {ev.time_s:.4g} | " + " | ".join(cells) + " |", flush=True)
    print("\n| simulator setting | schedule | plans | median T error | worst T error | median E error | worst E error |")
    print("|---|---|---|---|---|---|---|")
    for (s, sch), (t, e) in errs.items():
        if not t:
            continue
        worst = lambda xs: max(xs, key=abs)  # noqa: E731
        print(f"| {s} | {sch} | {len(t)} | {statistics.median(t):+.1%} | {worst(t):+.1%} | "
              f"{statistics.median(e):+.1%} | {worst(e):+.1%} |")


if __name__ == "__main__":
    main()
