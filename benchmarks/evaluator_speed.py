"""Plans per second of the reference and the batched evaluator (not a test).

    python benchmarks/evaluator_speed.py [--repeats 5]

Instances: the bundled 8-GPU demo and generated geo instances of 64 and 1,024
GPUs. Plans are random valid grids of one (D, P) shape per instance. Reports
the median over repeats and the batched/reference ratio measured in the same run.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from geotrain_opt import Plan, evaluate, instance_from_dict, load_instance
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.io.generate import generate

ROOT = Path(__file__).resolve().parent.parent


def random_plans(inst, D, P, n, rng):
    L = inst.model.layers
    grids = np.stack([rng.permutation(inst.n)[: D * P].reshape(D, P) for _ in range(n)])
    cuts = np.stack([np.r_[0, np.sort(rng.choice(np.arange(1, L), P - 1, replace=False)), L] for _ in range(n)])
    M = inst.model.num_micro_batches
    mb = np.full((n, D), M // D)
    mb[:, : M % D] += 1
    return grids, cuts, mb


def bench(label, inst, D, P, repeats, batch=4096, single=300):
    rng = np.random.default_rng(0)
    grids, cuts, mb = random_plans(inst, D, P, batch, rng)
    plans = [Plan.from_indices(inst.ids, grids[i], cuts[i], mb[i]) for i in range(single)]
    ev = BatchEvaluator(inst)
    s_rates, b_rates = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        for p in plans:
            evaluate(inst, p)
        s_rates.append(single / (time.perf_counter() - t))
        t = time.perf_counter()
        ev(grids, cuts, mb)
        b_rates.append(batch / (time.perf_counter() - t))
    s, b = statistics.median(s_rates), statistics.median(b_rates)
    print(f"| {label} | {inst.n} | {D}x{P} | {s:,.0f} | {b:,.0f} | {b / s:,.0f}x |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print("| instance | GPUs | DxP | reference plans/s | batched plans/s | ratio |")
    print("|---|---|---|---|---|---|")
    bench("demo-8gpu", load_instance(ROOT / "instances" / "demo-8gpu.yaml"), 2, 4, args.repeats)
    g64 = instance_from_dict(generate("geo", 64, 1))
    bench("geo-64", g64, 4, 8, args.repeats)
    g1024 = instance_from_dict(generate("geo", 1024, 1))
    bench("geo-1024", g1024, 32, 16, args.repeats, batch=512, single=50)


if __name__ == "__main__":
    main()
