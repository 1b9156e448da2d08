"""Stress check of the shape bounds (geotrain_opt/bounds/): for every feasible shape
of the given instances, the constructive plans, plans inside fast components and
random perturbations of them (device swaps, random cuts, random splits) are
evaluated; no plan may beat its shape's bound. Prints the count of plans checked,
the violations (must be 0) and the tightest ratio bound / best plan per instance.

    python benchmarks/bound_validity.py [--perturb 64] [--geo 64,256]

With ``--nodes N`` it checks instead every shape's bound against the brute-force
optimum of that shape on the generated ``nodes`` instances of seeds 0..N-1 (nodes
of 1-3 GPUs behind a slow network, where the joint cut and the split sites decide);
with ``--regions N`` on the ``regions`` instances (3-4 regions of 2 single-GPU
machines, where the site-order and whole-site bounds decide).
"""
from __future__ import annotations

import argparse
import glob

import numpy as np

from geotrain_opt import instance_from_dict
from geotrain_opt.cost import objective as objmod
from geotrain_opt.bounds import shape_bounds
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.io.generate import generate
from geotrain_opt.construct.heuristics import CONSTRUCTORS, component_plans
from geotrain_opt.problem.instance import load_instance
from geotrain_opt.solvers.exact.bruteforce import shape_optimum


def check(name: str, inst, perturb: int, rng: np.random.Generator) -> tuple[int, int, float]:
    a = inst.arrays
    ev = BatchEvaluator(inst)
    sb = shape_bounds(inst)
    by_shape: dict[tuple[int, int], list] = {}
    for D, P in sb:
        for build in CONSTRUCTORS.values():
            by_shape.setdefault((D, P), []).append(build(inst, D, P))
    for grid, cuts, mb in component_plans(inst):
        by_shape.setdefault(grid.shape, []).append((grid, cuts, mb))
    checked = bad = 0
    tight = 0.0
    for (D, P), plans in by_shape.items():
        if (D, P) not in sb:
            continue
        grids, cutss, mbs = [], [], []
        for grid, cuts, mb in plans:
            grids.append(np.asarray(grid))
            cutss.append(np.asarray(cuts))
            mbs.append(np.asarray(mb))
            for _ in range(perturb // max(1, len(plans))):
                g = np.asarray(grid).copy().reshape(-1)
                free = np.setdiff1d(np.arange(inst.n), g)
                for _s in range(int(rng.integers(1, 4))):
                    i = int(rng.integers(len(g)))
                    if len(free) and rng.random() < 0.5:
                        k = int(rng.integers(len(free)))
                        g[i], free[k] = free[k], g[i]
                    else:
                        j = int(rng.integers(len(g)))
                        g[i], g[j] = g[j], g[i]
                grids.append(g.reshape(D, P))
                c = np.asarray(cuts).copy()
                if P > 1 and rng.random() < 0.5:
                    c = np.array([0] + sorted(rng.choice(np.arange(1, a.L), P - 1, replace=False).tolist()) + [a.L])
                cutss.append(c)
                m = np.asarray(mb).copy()
                if not a.uniform and D > 1 and rng.random() < 0.5:
                    m = np.diff([0] + sorted(rng.choice(np.arange(1, a.M), D - 1, replace=False).tolist()) + [a.M])
                mbs.append(m)
        r = ev(np.stack(grids), np.stack(cutss), np.stack(mbs))
        v = np.where(r.acceptable, objmod.primary(inst.objective, r.time_s, r.energy_j), np.inf)
        checked += len(v)
        b = sb[D, P].value
        if b > v.min() * (1 + 1e-9):
            bad += 1
            print(f"  VIOLATION {name} shape {D}x{P}: bound {b:.6g} > plan {v.min():.6g} ({sb[D, P].by})")
        if np.isfinite(v.min()) and v.min() > 0:
            tight = max(tight, b / v.min())
    return checked, bad, tight


def brute_force_check(seeds: int, family: str = "nodes", n: int = 6) -> int:
    """Every shape of every ``family`` instance: bound <= the shape's brute-force optimum."""
    shapes = raised = bad = 0
    for seed in range(seeds):
        inst = instance_from_dict(generate(family, n, seed))
        ev = BatchEvaluator(inst)
        for (D, P), b in shape_bounds(inst).items():
            best = shape_optimum(inst, D, P, ev)
            shapes += 1
            raised += b.by == "merge tier" and D > 1 and P > 1
            if b.value > best * (1 + 1e-9):
                bad += 1
                print(f"  VIOLATION {family}-{seed} shape {D}x{P}: bound {b.value:.6g} > optimum {best:.6g} ({b.by})")
    print(f"{family} seeds 0-{seeds - 1}: {shapes} shapes, {raised} decided by the merge tier (D, P > 1), "
          f"{bad} bounds above their brute-force optimum")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perturb", type=int, default=64, help="random perturbations per shape")
    ap.add_argument("--geo", default="64,256", help="generated geo sizes to add")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=0, help="brute-force check on this many nodes instances instead")
    ap.add_argument("--regions", type=int, default=0,
                    help="brute-force check on this many regions instances (8 GPUs) instead")
    args = ap.parse_args()
    if args.nodes or args.regions:
        bad = (brute_force_check(args.nodes) if args.nodes else 0) + \
              (brute_force_check(args.regions, "regions", 8) if args.regions else 0)
        raise SystemExit(1 if bad else 0)
    rng = np.random.default_rng(args.seed)
    items = [(f.rsplit("/", 1)[-1].removesuffix(".yaml"), load_instance(f)) for f in sorted(glob.glob("instances/real/*.yaml"))]
    items += [(f"geo-{n}", instance_from_dict(generate("geo", int(n), 0))) for n in args.geo.split(",") if n]
    print("| instance | plans checked | shapes violated | best bound / plan |")
    print("|---|---|---|---|")
    total_bad = 0
    for name, inst in items:
        checked, bad, tight = check(name, inst, args.perturb, rng)
        total_bad += bad
        print(f"| {name} | {checked} | {bad} | {tight:.3f} |", flush=True)
    raise SystemExit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
