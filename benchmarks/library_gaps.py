"""Which side of an open library record is weak, the plan or the bound? (issue 41)

    python benchmarks/library_gaps.py [--min-gpus 256] [--long 120] [--only NAME,...] \
        [--out benchmarks/results/library_gaps.md]

For each open record of ``instances/lib`` with at least MIN_GPUS GPUs:

* the record: best known value, its plan's shape D x P (and TP degree), the bound;
* the shapes (instances without TP or micro-batch choices, where the bound is a
  least over shapes): how many shapes' bounds lie below the best known value (each
  would have to be closed, by a plan or a proof, to certify it), the bound at the
  best plan's own shape (the gap left there), and the shape that sets the instance
  bound with its value;
* the site layouts (``construct/site_layouts.py``: a ring per site, a replica per
  site; the layouts that win on world-wide clusters) at the three shapes with the
  lowest bounds: if even these are far above the bound there, either the bound is
  loose at those shapes or some other layout is far better — the exact solver's
  per-shape results then tell which;
* longer runs: each of ``--solvers`` (default memetic and cpsat, seed 0) with the
  ``--long`` limit (the whole run); a better plan or bound is recorded in the
  library (``library.update``: verified, never a worse one).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import geotrain_opt as gt  # noqa: E402
from geotrain_opt.analysis import library as lib  # noqa: E402
from geotrain_opt.bounds import shape_bounds  # noqa: E402
from geotrain_opt.construct.site_layouts import site_replicas, site_rings  # noqa: E402
from geotrain_opt.cost.evaluator import evaluate  # noqa: E402
from geotrain_opt.problem.plan import Plan  # noqa: E402

LIB = ROOT / "instances" / "lib"


def shapes_part(inst, plan: Plan, best: float) -> list[str]:
    if inst.has_choices or inst.options.tensor_parallel != (1,):
        return ["shapes: not analysed (the bound is a least over TP degrees or choices as well)"]
    sb = shape_bounds(inst)
    finite = sorted((b for b in sb.values() if b.value < float("inf")), key=lambda b: b.value)
    below = [b for b in finite if b.value < best * (1 - 1e-6)]
    own = sb.get((plan.replicas, plan.stages))
    lines = [f"shapes: {len(finite)} feasible, {len(below)} with a bound below the best known value "
             f"(each must be closed by a plan or a proof)",
             f"bound at the shape of the best plan known before these runs, {plan.replicas} x {plan.stages}: "
             + ("-" if own is None else f"{own.value:.6g} ({(best - own.value) / best:.1%} below the plan, {own.by})"),
             f"the instance bound is set at {finite[0].D} x {finite[0].P}: {finite[0].value:.6g} ({finite[0].by})"]
    for b in finite[:3]:
        vals = []
        for name, build in (("a ring per site", site_rings), ("a replica per site", site_replicas)):
            built = build(inst, b.D, b.P)
            if built is not None:
                plan_b = Plan.from_indices(inst.ids, *built)
                ev = evaluate(inst, plan_b)
                tag = "site-rings" if build is site_rings else "site-replicas"
                changed = record(inst.name, plan_b, None, tag,
                                 f"python benchmarks/library_gaps.py --only {inst.name} "
                                 f"(construct.site_layouts.{build.__name__} at {b.D} x {b.P})") if ev.acceptable else []
                vals.append(f"{name} {ev.time_s:.6g}" + ("" if ev.acceptable else " (infeasible)")
                            + (" (recorded: " + "; ".join(changed) + ")" if changed else ""))
        lines.append(f"  {b.D} x {b.P}: bound {b.value:.6g}; site layouts: {', '.join(vals) or 'none'}")
    return lines


def record(name: str, plan: Plan | None, bound: float | None, solver: str, command: str) -> list[str]:
    """A plan and/or bound to the library (verified there; only a better one is kept)."""
    tmp = LIB / "plans" / f".{name}.candidate.json"
    if plan is not None:
        tmp.write_text(json.dumps(plan.to_dict()))
    try:
        return lib.update(name, str(tmp) if plan is not None else None, bound,
                          {"solver": solver, "version": gt.__version__, "command": command}, LIB)
    finally:
        tmp.unlink(missing_ok=True)


def long_runs(name: str, inst, solvers: list[str], limit: float) -> list[str]:
    out = []
    for s in solvers:
        t = time.perf_counter()
        res = gt.solve(inst, s, time_limit=limit, seed=0)
        wall = time.perf_counter() - t
        changed = record(name, res.plan, res.best_bound, s,
                         f"geotrain-opt solve instances/lib/instances/{name}.yaml --solver {s} --time-limit {limit:g}")
        out.append(f"{s} at {limit:g} s: {res.objective_value if res.objective_value is None else f'{res.objective_value:.6g}'}"
                   f", bound {res.best_bound if res.best_bound is None else f'{res.best_bound:.6g}'} "
                   f"({wall:.0f} s){'; recorded: ' + '; '.join(changed) if changed else ''}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-gpus", type=int, default=256)
    ap.add_argument("--long", type=float, default=0.0, help="seconds per longer run (0: none)")
    ap.add_argument("--solvers", default="memetic,cpsat")
    ap.add_argument("--only")
    ap.add_argument("--out")
    args = ap.parse_args()
    blocks = []
    for rec in lib.load_index(LIB)["records"]:
        if rec["gpus"] < args.min_gpus or rec["status"] != "open" or (args.only and rec["name"] not in args.only.split(",")):
            continue
        name = rec["name"]
        inst = gt.load_instance(LIB / rec["instance"])
        lines = shapes_part(inst, Plan.load(LIB / rec["best"]["plan"]), float(rec["best"]["value"]))
        if args.long > 0:
            lines += long_runs(name, inst, args.solvers.split(","), args.long)
        rec = lib.record(lib.load_index(LIB), name)
        plan = Plan.load(LIB / rec["best"]["plan"])
        best, bound = float(rec["best"]["value"]), rec.get("bound", {}).get("value")
        head = (f"### {name} ({rec['gpus']} GPUs, {rec['objective']})\n\nnow: best known {best:.6g} "
                f"({rec['best']['solver']}, shape {plan.replicas} x {plan.stages}, TP {plan.tp}, "
                f"{len(plan.devices)} GPUs used); bound {bound:.6g}; gap {rec['gap']:.1%}")
        blocks.append(head + "\n\n" + "\n".join(f"- {x}" for x in lines) + "\n")
        print(blocks[-1], flush=True)
    text = (f"# The open library records of {args.min_gpus}+ GPUs: which side is weak\n\n"
            f"`python benchmarks/library_gaps.py --min-gpus {args.min_gpus} --long {args.long:g}"
            f"{' --only ' + args.only if args.only else ''}` (2 cores)\n\n" + "\n".join(blocks))
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
