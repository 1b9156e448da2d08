"""The analytic cost model against the discrete-event simulator (not a test).

    python benchmarks/model_vs_sim.py [--seeds 3] [--plans 12] [--out benchmarks/results/model_vs_sim.md]

On generated clusters (families geo, regions, nodes, small, mixed-power; 8-32 GPUs)
with their own models and with Llama-2-7B / 13B and many micro-batches (global batch
256-512, micro-batch 1), every schedule, kappa 0 and 0.5: random valid plans of random
shapes, each evaluated by the cost model (formulations/model.md) and simulated
operation by operation (formulations/simulator.md); then the same clusters with
their region pairs' capacity shared (model.md §3.2). Reports the median and worst
|simulated / analytic - 1| of the pipeline time per schedule (the all-reduce's
overlap with the drain is another matter, measured apart), and which plans are worst.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from geotrain_opt import Plan, evaluate, instance_from_dict
from geotrain_opt.construct.pieces import feasible_shapes
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.io.generate import generate
from geotrain_opt.problem.plan import split_micro_batches

FAMILIES = [("geo", 16), ("geo", 32), ("regions", 8), ("nodes", 8), ("small", 8), ("mixed-power", 12)]
PRESETS = [None, "llama2-7b", "llama2-13b"]


def cases(seeds: int, shared_wan: bool = False):
    """The instances; with ``shared_wan`` only those with links between regions, each
    region pair's capacity shared by the plan (model.md §3.2) at its own bandwidth."""
    for fam, n in FAMILIES:
        for seed in range(seeds):
            for preset in PRESETS:
                for kappa in (0.0, 0.5):
                    d = generate(fam, n, seed)
                    d["options"] = dict(d.get("options", {}), exposed_comm=kappa)
                    if preset is not None:
                        d["model"] = {"preset": preset, "global_batch": 256, "micro_batch": 1}
                    if shared_wan:
                        inter = d["network"].get("inter_region", [])
                        if not inter:
                            continue
                        for e in inter:
                            e["capacity_gbps"] = e["bandwidth_gbps"]
                    yield f"{fam}-{n}-s{seed}" + (f"-{preset}" if preset else ""), kappa, instance_from_dict(d)


def random_plan(inst, rng):
    shapes = feasible_shapes(inst)
    if not shapes:
        return None
    D, P = shapes[int(rng.integers(len(shapes)))]
    grid = rng.permutation(inst.n)[: D * P].reshape(D, P)
    L = inst.model.layers
    cuts = [0] + sorted(rng.choice(np.arange(1, L), P - 1, replace=False).tolist()) + [L]
    return Plan.from_indices(inst.ids, grid, cuts, split_micro_batches(inst.model.num_micro_batches, D))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--plans", type=int, default=6, help="random plans per instance and kappa")
    ap.add_argument("--out", help="write the Markdown table here")
    args = ap.parse_args()
    rows: dict[str, list[tuple[float, str]]] = {}
    # the second pass, shared WAN capacity, draws its plans from a stream of its own
    for shared, rng in ((False, np.random.default_rng(0)), (True, np.random.default_rng(1))):
        for name, kappa, inst in cases(args.seeds, shared):
            for _ in range(args.plans):
                plan = random_plan(inst, rng)
                if plan is None:
                    continue
                ev = evaluate(inst, plan)
                sim = simulate(inst, plan)
                err = sim.pipeline_s / ev.pipeline_s - 1.0
                what = f"{name} kappa {kappa} {plan.replicas}x{plan.stages} m {plan.micro_batches[0]}"
                key = inst.options.schedule + (", shared WAN" if shared else "")
                rows.setdefault(key, []).append((err, what))
                if "llama" in name:     # the realistic regime: many micro-batches per replica
                    rows.setdefault(key + ", Llama-2 7B/13B only", []).append((err, what))
    lines = ["| schedule | plans | median abs error | worst error | worst plan | most pessimistic (analytic above) | "
             "most optimistic (simulated above) | within 3 % |",
             "|---|---|---|---|---|---|---|---|"]
    for schedule, errs in sorted(rows.items()):
        mags = [abs(e) for e, _ in errs]
        worst = max(errs, key=lambda ew: abs(ew[0]))
        low, high = min(errs, key=lambda ew: ew[0]), max(errs, key=lambda ew: ew[0])
        lines.append(f"| {schedule} | {len(errs)} | {100 * statistics.median(mags):.2f}% | {100 * worst[0]:+.2f}% | "
                     f"{worst[1]} | {100 * low[0]:+.2f}% ({low[1]}) | {100 * high[0]:+.2f}% ({high[1]}) | "
                     f"{sum(m <= 0.03 for m in mags)} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text("# The cost model against the simulator (pipeline time)\n\n"
                                  "`python benchmarks/model_vs_sim.py` (error = simulated / analytic - 1)\n\n"
                                  + text + "\n")


if __name__ == "__main__":
    main()
