"""Differential campaign of the exact solvers (not a test; the same draws as
``tests/test_exact_differential.py -m slow``, recorded instead of asserted).

    python benchmarks/exact_differential.py [--seeds 10:310] [--time-limit 120]
        [--out benchmarks/results/exact_differential.md] [--jsonl runs.jsonl] [--parallel]

``--parallel``: the draws with every tensor-parallel degree their nodes allow and a
ZeRO stage (model.md §14, §15).

For every draw: CP-SAT and the MILP (2 threads each), brute force where it can
enumerate (<= 200,000 plans), memetic for 3 s; every plan is re-evaluated. A
*disagreement* is: different statuses among proofs, optimal values more than
1e-6 apart, a plan (any solver's) better than a proof, or a reported value that
its plan does not have. Prints and writes a Markdown summary.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geotrain_opt import evaluate  # noqa: E402
from geotrain_opt.cost.objective import primary  # noqa: E402
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.solvers.exact import formulation  # noqa: E402
from geotrain_opt.construct.pieces import plan_count  # noqa: E402
from tests.test_exact_differential import draw                     # noqa: E402

RTOL = 1e-6


def run_one(seed: int, limit: float, parallel: bool = False) -> dict | None:
    drawn = draw(seed, parallel=parallel)
    if drawn is None:
        return None
    inst, fam = drawn
    row = {"seed": seed, "family": fam, "gpus": inst.n, "objective": inst.objective.kind,
           "limits": [k for k in ("max_time_s", "max_energy_j") if getattr(inst.objective, k) is not None]
           + (["max_devices"] if inst.options.max_devices else []),
           "schedule": inst.options.schedule, "split": inst.options.batch_split,
           "kappa": inst.options.exposed_comm, "steps": inst.options.accumulation_steps,
           "stack": inst.options.stack_s_per_byte > 0, "tp": list(inst.options.tensor_parallel),
           "zero": inst.options.zero_stage, "problems": []}
    runs = {}
    names = ["cpsat", "milp"] + (["bruteforce"] if plan_count(inst) <= 200_000 else []) + ["memetic"]
    # where devices form classes the default is the class model (formulations/exact.md
    # §3.7); the per-device model runs too, and must prove the same
    if formulation.interchangeable_classes(inst):
        row["classes"] = len(formulation.device_classes(inst))
        names[2:2] = ["cpsat-devices", "milp-devices"]
    for name in names:
        opts = SolveOptions(time_limit_s=3 if name == "memetic" else limit, workers=1 if name == "memetic" else 2)
        if name.endswith("-devices"):
            opts.extra["exact_model"] = "devices"
        t = time.perf_counter()
        res = get(name.removesuffix("-devices"))(inst, opts)
        value = None
        if res.plan is not None:
            ev = evaluate(inst, res.plan)
            value = float(primary(inst.objective, ev.time_s, ev.energy_j))
            if not ev.acceptable:
                row["problems"].append(f"{name}: plan not acceptable")
            if res.objective_value is None or abs(res.objective_value - value) > 1e-9 * max(abs(value), 1e-300):
                row["problems"].append(f"{name}: reported {res.objective_value} but plan gives {value}")
        runs[name] = {"status": res.status, "value": value, "wall_s": round(time.perf_counter() - t, 2)}
    row["runs"] = runs
    proofs = {n: r for n, r in runs.items() if n != "memetic" and r["status"] in ("optimal", "infeasible")}
    if {r["status"] for r in proofs.values()} == {"optimal", "infeasible"}:
        row["problems"].append("proofs disagree on feasibility: " + str({n: r["status"] for n, r in proofs.items()}))
    opt = [r["value"] for r in proofs.values() if r["status"] == "optimal"]
    if opt and max(opt) > min(opt) * (1 + RTOL):
        row["problems"].append("optimal values differ: " + str({n: r["value"] for n, r in proofs.items()}))
    for n, r in runs.items():
        for m, p in proofs.items():
            if p["status"] == "optimal" and r["value"] is not None and r["value"] < p["value"] * (1 - RTOL):
                row["problems"].append(f"{n} ({r['value']}) beats {m}'s proof ({p['value']})")
    row["proved_both"] = all(runs[n]["status"] in ("optimal", "infeasible") for n in ("cpsat", "milp"))
    return row


def summary(rows: list[dict], seeds: range, limit: float) -> str:
    by_fam: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_fam[r["family"]].append(r)
    lines = [f"`python benchmarks/exact_differential.py --seeds {seeds.start}:{seeds.stop} --time-limit {limit:g}` "
             f"({len(seeds)} draws, {len(rows)} instances; the rest fit nowhere)", "",
             "| family | instances | GPUs | proved by both | infeasible | brute force ran | with classes "
             "(both models ran) | disagreements |",
             "|---|---|---|---|---|---|---|---|"]
    for fam, rs in sorted(by_fam.items()):
        gpus = f"{min(r['gpus'] for r in rs)}-{max(r['gpus'] for r in rs)}"
        lines.append(f"| {fam} | {len(rs)} | {gpus} | {sum(r['proved_both'] for r in rs)} | "
                     f"{sum(r['runs']['cpsat']['status'] == 'infeasible' for r in rs)} | "
                     f"{sum('bruteforce' in r['runs'] for r in rs)} | {sum('cpsat-devices' in r['runs'] for r in rs)} | "
                     f"{sum(bool(r['problems']) for r in rs)} |")
    objs = Counter(r["objective"] for r in rows)
    lim = Counter(k for r in rows for k in r["limits"])
    lines += ["", "objectives: " + ", ".join(f"{k} {v}" for k, v in sorted(objs.items()))
              + "; limits: " + (", ".join(f"{k} {v}" for k, v in sorted(lim.items())) or "none")
              + f"; gpipe {sum(r['schedule'] == 'gpipe' for r in rows)}, free split "
              f"{sum(r['split'] == 'free' for r in rows)}, kappa > 0 {sum(r['kappa'] > 0 for r in rows)}, "
              f"accumulation > 1 {sum(r['steps'] > 1 for r in rows)}, host stack {sum(r.get('stack', False) for r in rows)}"]
    slow = sorted(rows, key=lambda r: -max(r["runs"]["cpsat"]["wall_s"], r["runs"]["milp"]["wall_s"]))[:3]
    lines += ["", "slowest: " + "; ".join(f"seed {r['seed']} ({r['gpus']} GPUs) cpsat {r['runs']['cpsat']['wall_s']} s, "
                                         f"milp {r['runs']['milp']['wall_s']} s" for r in slow)]
    bad = [f"- seed {r['seed']} ({r['family']}, {r['gpus']} GPUs): {'; '.join(r['problems'])}" for r in rows if r["problems"]]
    lines += ["", f"{len(bad)} instances with a disagreement" + (":" if bad else ".")] + bad
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="10:310")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--out", default="benchmarks/results/exact_differential.md")
    ap.add_argument("--jsonl", help="append one JSON line per instance here (a record to --summarize later)")
    ap.add_argument("--parallel", action="store_true", help="tensor-parallel degrees and ZeRO in every draw")
    ap.add_argument("--summarize", help="only write the summary of this JSONL of an earlier (partial) run")
    args = ap.parse_args()
    a, b = map(int, args.seeds.split(":"))
    seeds = range(a, b)
    if args.summarize:
        rows = [json.loads(l) for l in Path(args.summarize).read_text().splitlines() if l.strip()]
        done = [r["seed"] for r in rows]
        text = summary(rows, range(min(done), max(done) + 1), args.time_limit)
        Path(args.out).write_text("# Differential campaign of the exact solvers\n\n" + text)
        print(text)
        return 1 if any(r["problems"] for r in rows) else 0
    rows = []
    for seed in seeds:
        row = run_one(seed, args.time_limit, args.parallel)
        if row is None:
            continue
        rows.append(row)
        print(f"seed {seed}: {row['family']} {row['gpus']} GPUs "
              + " ".join(f"{n}={r['status']}/{r['wall_s']}s" for n, r in row["runs"].items())
              + (f"  PROBLEM: {row['problems']}" if row["problems"] else ""), file=sys.stderr, flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(row) + "\n")
    text = summary(rows, seeds, args.time_limit)
    if args.parallel:
        text = text.replace(f"--time-limit {args.time_limit:g}`", f"--time-limit {args.time_limit:g} --parallel`", 1)
        text += (f"\ntensor-parallel degrees > 1 offered in {sum(max(r['tp']) > 1 for r in rows)} instances; "
                 f"ZeRO stages: {dict(Counter(r['zero'] for r in rows))}\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("# Differential campaign of the exact solvers\n\n" + text)
    print(text)
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
