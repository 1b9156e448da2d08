"""Ablation of the memetic solver at equal evaluation budgets (not a test).

    python benchmarks/memetic_ablation.py [--sizes 16,64,256] [--seeds 5] [--budget 20000]
    python benchmarks/memetic_ablation.py --equal-time 5 --seeds 3     # equal wall time instead

Arms, all on the batched evaluator, all stopped by the same number of plan
evaluations (local-search evaluations count):
  full       memetic: constructive seeds, specialised operators, local search
  no-ls      the same without local search
  plain-ga   DEAP GA: random initial population, swap/replace/cut/shape mutations,
             replica crossover, no seeding, no local search
  random     random search (uniform genomes)
Instances: generated ``geo`` family (seed 0), time objective. Prints mean and
standard deviation of T over the seeds, and the mean wall time.
"""
from __future__ import annotations

import argparse
import statistics
import time

from geotrain_opt import instance_from_dict
from geotrain_opt.io.generate import generate
from geotrain_opt.solvers import SolveOptions, get

ARMS = {
    "full": ("memetic", {}),
    "no-ls": ("memetic", {"ls_rate": 0.0}),
    "plain-ga": ("memetic", {"ls_rate": 0.0, "seeding": False, "mutations": ["swap", "replace", "cut", "shape"]}),
    "random": ("random-search", {}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64,256")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=20000)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--equal-time", type=float, default=None,
                    help="compare at this many seconds per run instead of an evaluation budget")
    args = ap.parse_args()
    if args.equal_time:
        print(f"budget: {args.equal_time:g} s per run (no evaluation limit), {args.seeds} seeds\n")
    else:
        print(f"budget: {args.budget} evaluations per run, {args.seeds} seeds\n")
    print("| GPUs | arm | mean T (s) | std T | best T | mean evals | mean wall s |")
    print("|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        inst = instance_from_dict(generate("geo", n, 0))
        for arm, (solver, extra) in ARMS.items():
            Ts, walls, evals = [], [], []
            for seed in range(args.seeds):
                budget = {} if args.equal_time else {"max_evaluations": args.budget}
                # no restarts on a stall: only the memetic solver has them (random search
                # refuses options it does not know)
                never = {"stall": 10**9} if solver == "memetic" else {}
                opts = SolveOptions(time_limit_s=args.equal_time or args.time_limit, seed=seed,
                                    extra=dict(extra, **never, **budget))
                t = time.perf_counter()
                res = get(solver)(inst, opts)
                walls.append(time.perf_counter() - t)
                Ts.append(res.evaluation.time_s if res.evaluation else float("inf"))
                evals.append(res.stats.get("evaluations", 0))
            sd = statistics.stdev(Ts) if len(Ts) > 1 else 0.0
            print(f"| {n} | {arm} | {statistics.mean(Ts):.4f} | {sd:.4f} | {min(Ts):.4f} | "
                  f"{statistics.mean(evals):,.0f} | {statistics.mean(walls):.1f} |", flush=True)


if __name__ == "__main__":
    main()
