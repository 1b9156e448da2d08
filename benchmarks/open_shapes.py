"""Where an instance's certified gap lies: for each shape whose bound is below the
best plan known, the best plan the layouts by site build on that shape alone
against the shape's bound (formulations/campaigns.md §6, "Where the gap lies").

    python benchmarks/open_shapes.py instances/real/dtfm-5-worldwide-geo.yaml [--best 30.8735]

``--best``: the instance's best plan known (default: the best plan found here);
shapes whose bound reaches it are closed and not listed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geotrain_opt.bounds import shape_bounds  # noqa: E402
from geotrain_opt.problem.instance import load_instance  # noqa: E402
from geotrain_opt.construct.site_layouts import site_plans  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--best", type=float, help="the best plan known (default: the best found here)")
    args = ap.parse_args()
    inst = load_instance(args.instance)
    bounds = shape_bounds(inst)
    plans = {sh: min((v for v, _i, _b in site_plans([(inst, *sh)], keep=1)), default=float("inf"))
             for sh, b in bounds.items() if b.value < (args.best or float("inf"))}
    best = args.best or min(plans.values(), default=float("inf"))
    print(f"{inst.name}: best plan {best:.4f}; shapes whose bound is below it:")
    print("| shape | best plan of the layouts by site (s) | bound (s) | bound set by |")
    print("|---|---:|---:|---|")
    for sh, b in sorted(bounds.items(), key=lambda kv: kv[1].value):
        if b.value < best * (1 - 1e-9):
            v = plans.get(sh, float("inf"))
            print(f"| {sh[0]}x{sh[1]} | {v:.4f} | {b.value:.4f} | {b.by} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
