"""The planning levers of formulations/model.md §9–§10 on the bundled geo instances:
the time-energy front with and without GPU clocks, the energy the clocks save at the
fastest plan's time, and cost- and carbon-optimal plans against the time-optimal one.

    python benchmarks/energy_levers.py --time-limit 20 --seeds 3 \
        --out benchmarks/results/energy_levers.md --plot benchmarks/results/energy_levers.png

The instances carry no clocks, prices or intensities of their own; this script adds
ILLUSTRATIVE ones, stated here and in the report, not measurements:
* clocks 0.9, 0.8, 0.7, 0.6 of every GPU type, busy power at clock f
  P_wait + (P_busy - P_wait) * f^3 (dynamic power ~ f V^2 with V ~ f; the wait power
  stands for the static part). Real curves are workload-dependent (FACTS: Afzal et al.
  find a transition frequency); replace them by a profile of your own GPUs.
* prices per GPU-hour of the order of cloud on-demand list prices, egress 0.02 USD/GB
  between regions, and carbon intensities per region of the order of published grid
  averages; both only to show the trade-off.
Every number is a memetic run (seeds 0..S-1, median) on the cost model; the demo's
clock front is also proven by CP-SAT's ε-constraint walk where it finishes in time.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from geotrain_opt.analysis.fronts import front_points, pareto_front  # noqa: E402
from geotrain_opt.analysis.indicators import hypervolume, reference_point  # noqa: E402
from geotrain_opt.problem.instance import instance_from_dict, parse_text, read_text_file  # noqa: E402
from geotrain_opt.solvers import SolveOptions, get  # noqa: E402

INSTANCES = ["instances/demo-8gpu.yaml", "instances/real/vldb-t4-intercontinental.yaml",
             "instances/real/mixed-gen-3region-16.yaml", "instances/real/mixed-gen-5region-40.yaml",
             "instances/real/dtfm-4-regional-geo.yaml"]
FRACTIONS = (0.9, 0.8, 0.7, 0.6)
PRICE = {"A100-SXM4-40GB": 4.1, "A100-SXM4-80GB": 5.1, "V100-SXM2-32GB": 3.1, "V100-SXM2-16GB": 3.1,
         "T4": 0.53, "A10": 1.0, "RTX-3090": 0.8, "RTX-4090": 0.9}
CARBON = {"virginia": 380, "ohio": 560, "oregon": 250, "california": 220, "us-east": 380, "london": 230,
          "frankfurt": 380, "ireland": 330, "tokyo": 460, "seoul": 440, "us": 380, "eu": 280, "asia": 500,
          "australia": 650}
EGRESS = 0.02


def with_levers(data: dict, inst) -> dict:
    d = copy.deepcopy(data)
    types = d.setdefault("gpu_types", {})
    for dev in inst.devices:
        t = types.setdefault(dev.type, {})
        if "clocks" not in t:
            t["clocks"] = [{"fraction": f, "busy_w": round(dev.wait_w + (dev.busy_w - dev.wait_w) * f ** 3, 3)}
                           for f in FRACTIONS]
            t["price_per_hour"] = PRICE.get(dev.type, 2.0)
    for e in d["network"].get("inter_region", []):
        e["egress_usd_per_gb"] = EGRESS
    d.setdefault("energy", {})["carbon_g_per_kwh"] = {r: CARBON.get(r, 400) for r in inst.regions}
    return d


def without_clocks(data: dict) -> dict:
    d = copy.deepcopy(data)
    for t in d.get("gpu_types", {}).values():
        t.pop("clocks", None)
    return d


def front(inst, seed: int, limit: float) -> list[tuple[float, float]]:
    res = pareto_front(inst, "memetic", SolveOptions(time_limit_s=limit, seed=seed), points=0)
    return front_points(res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", nargs="*", default=INSTANCES)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/energy_levers.md")
    ap.add_argument("--plot", help="PNG of the fronts with and without clocks")
    args = ap.parse_args()
    rows_front, rows_tie, rows_obj, plots = [], [], [], []
    for path in args.instances:
        base = parse_text(read_text_file(ROOT / path), path)
        plain = instance_from_dict(base)
        lev = with_levers(base, plain)
        inst_c = instance_from_dict(lev)
        inst_0 = instance_from_dict(without_clocks(lev))
        print(f"{path}: {inst_c.n} GPUs", file=sys.stderr)
        hv_gain, saved, fronts = [], [], None
        for s in range(args.seeds):
            f0, fc = front(inst_0, s, args.time_limit), front(inst_c, s, args.time_limit)
            ref = reference_point(f0, fc)
            hv0, hvc = hypervolume(f0, ref), hypervolume(fc, ref)
            hv_gain.append(hvc / hv0 - 1.0)
            fronts = fronts or (f0, fc)
            t0 = get("memetic")(inst_0, SolveOptions(time_limit_s=args.time_limit, seed=s))
            tc = get("memetic")(inst_c, SolveOptions(time_limit_s=args.time_limit, seed=s))
            saved.append((t0.evaluation.time_s, tc.evaluation.time_s, t0.evaluation.energy_j, tc.evaluation.energy_j,
                          len(tc.plan.clocks), len(tc.plan.devices)))
        rows_front.append((path, inst_c.n, statistics.median(hv_gain), min(hv_gain), max(hv_gain)))
        med = sorted(saved, key=lambda r: r[3] / r[2] - 1)[len(saved) // 2]
        rows_tie.append((path, *med))
        plots.append((path, fronts))
        vals = {}
        for kind in ("time", "cost", "carbon", "energy"):
            rs = [get("memetic")(inst_c.with_options(kind=kind), SolveOptions(time_limit_s=args.time_limit, seed=s))
                  for s in range(args.seeds)]
            r = sorted(rs, key=lambda r: r.objective_value)[len(rs) // 2]
            ev = r.evaluation
            vals[kind] = (ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g, len(r.plan.devices))
        rows_obj.append((path, vals))
    lines = ["# Planning levers: clocks, cost, carbon (`benchmarks/energy_levers.py`)", "",
             f"`python benchmarks/energy_levers.py --time-limit {args.time_limit:g} --seeds {args.seeds}`, "
             f"{time.strftime('%Y-%m-%d')}; memetic (NSGA-II for fronts), median over seeds 0..{args.seeds - 1}. "
             "Clocks, prices and intensities are the ILLUSTRATIVE ones in the script's docstring, not measurements.", "",
             "## Time-energy front with and without clocks", "",
             "| instance | GPUs | hypervolume gain (median) | min | max |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {p} | {n} | {m:+.1%} | {lo:+.1%} | {hi:+.1%} |" for p, n, m, lo, hi in rows_front]
    lines += ["", "Hypervolume under a common reference point (1.1 × the joint nadir of the two fronts of a seed).", "",
              "## The fastest plan: energy at (almost) the same time", "",
              "| instance | T without clocks (s) | T with clocks (s) | E without (J) | E with (J) | E saved | GPUs slowed |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {p} | {t0:.4f} | {tc:.4f} | {e0:,.0f} | {ec:,.0f} | {1 - ec / e0:.1%} | {k} of {g} |"
              for p, t0, tc, e0, ec, k, g in rows_tie]
    lines += ["", "The time objective breaks ties by E: clocks lowered off the critical path keep T.", "",
              "## Cost- and carbon-optimal plans against the time-optimal one (with clocks)", "",
              "| instance | objective | T (s) | E (J) | cost (USD) | carbon (g) | GPUs |", "|---|---|---:|---:|---:|---:|---:|"]
    for p, vals in rows_obj:
        for kind, (T, E, C, Q, g) in vals.items():
            lines.append(f"| {p} | {kind} | {T:.4f} | {E:,.0f} | {C:.4g} | {Q:.4g} | {g} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(plots), figsize=(4 * len(plots), 3.2))
        for ax, (p, (f0, fc)) in zip(np.atleast_1d(axes), plots):
            for pts, lab, mk in ((f0, "full clock", "o"), (fc, "with clocks", "s")):
                pts = sorted(pts)
                ax.step([x for x, _ in pts], [y for _, y in pts], where="post", marker=mk, ms=3, label=lab)
            ax.set_title(Path(p).stem, fontsize=8)
            ax.set_xlabel("T (s)")
            ax.set_ylabel("E (J)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
