"""Does the memetic solver win for every seed? (post-processes a bench JSONL; not a test)

    geotrain-opt bench benchmarks/suites/headline.yaml --results benchmarks/results/headline.jsonl
    python benchmarks/memetic_scale.py benchmarks/results/headline.jsonl [--out benchmarks/results/memetic_scale.md]

Per instance: the best plan any run found (the reference), the best baseline,
and the memetic solver's T for every seed: its worst seed's gap to the
reference, its spread over seeds, and whether every seed beats (or ties) every
baseline. Exits 1 if some seed loses to a baseline.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

TIE = 1e-9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench JSONL files (their rows are pooled)")
    ap.add_argument("--solver", default="memetic")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = [json.loads(l) for f in args.results for l in Path(f).read_text().splitlines() if l.strip()]
    by = defaultdict(list)
    from geotrain_opt.solvers import names
    for r in rows:
        r["baseline"] = r["solver"] in names("baseline")
        r["solver"] = r.get("label") or r["solver"]     # variants (suite labels) count apart
        if r.get("objective_value") is not None:
            by[r["instance_name"]].append(r)
    lines = [f"`python benchmarks/memetic_scale.py {' '.join(args.results)} --solver {args.solver}` (objective value = T here; "
             "reference = the best plan of any run on the instance)", "",
             "| instance | GPUs | reference | best baseline | memetic seeds | worst seed vs reference | spread | every seed >= every baseline |",
             "|---|---|---|---|---|---|---|---|"]
    losses = 0
    for name in sorted(by):
        rs = by[name]
        ours = sorted((r["seed"], r["objective_value"]) for r in rs if r["solver"] == args.solver)
        base = [r for r in rs if r["baseline"]]
        if not ours:
            continue
        ref = min(r["objective_value"] for r in rs)
        vals = [v for _, v in ours]
        if base:
            b = min(base, key=lambda r: r["objective_value"])
            bcell = f"{b['objective_value']:.4f} ({b['solver']})"
            ok = max(vals) <= b["objective_value"] * (1 + TIE)
        else:
            bcell, ok = "-", True
        losses += not ok
        lines.append(f"| {name} | {rs[0]['n_gpus']} | {ref:.4f} | {bcell} | "
                     + ", ".join(f"{v:.4f}" for v in vals)
                     + f" | {max(vals) / ref - 1:+.2%} | {max(vals) / min(vals) - 1:.2%} | {'yes' if ok else 'NO'} |")
    lines += ["", f"{losses} instance(s) where some seed loses to a baseline."]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text("# Memetic solver: every seed against every baseline\n\n" + text)
    print(text)
    return 1 if losses else 0


if __name__ == "__main__":
    sys.exit(main())
