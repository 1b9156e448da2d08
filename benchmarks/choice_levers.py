"""Micro-batch size and recomputation as decisions (formulations/model.md §11) on the
bundled geo instances: what searching them gains, and how best to search them.

    python benchmarks/choice_levers.py --time-limit 10 --short 2 --seeds 3 \
        --out benchmarks/results/choice_levers.md

Each instance is run as bundled (its model's own micro-batch size b and recomputation
only) and with choices added: b/2, b, 2b and 4b where they divide the global batch,
each without and with full recomputation. Every number is a memetic run (seeds
0..S-1, median) on the cost model:

* gain: the time-optimal T and the energy-optimal E with and without the choices;
* gene vs per choice: the memetic with a choice gene in every genome (its default)
  against one run per choice on an equal share of the same time limit (what the
  other solvers do, solvers/choices.py), objective values at equal time, at the
  main limit and at a short one;
* exact: CP-SAT and the MILP proving the levers demo's optimum with the choices
  enumerated jointly with the shapes (one incumbent and one cutoff for every
  (choice, D, P), the default) and separately (one full solve per choice on a
  share of the time).
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

from geotrain_opt.problem.instance import instance_from_dict, load_instance, parse_text, read_text_file  # noqa: E402
from geotrain_opt.solvers import SolveOptions, get  # noqa: E402

INSTANCES = ["instances/demo-8gpu.yaml", "instances/real/vldb-t4-intercontinental.yaml",
             "instances/real/mixed-gen-3region-16.yaml", "instances/real/mixed-gen-5region-40.yaml",
             "instances/real/dtfm-4-regional-geo.yaml"]
EXACT = "instances/demo-8gpu-levers.yaml"


def with_choices(data: dict, b: int, B: int) -> dict:
    d = copy.deepcopy(data)
    opts = [x for x in (b // 2 if b % 2 == 0 else 0, b, 2 * b, 4 * b) if x >= 1 and B % x == 0]
    d["model"]["micro_batch_options"] = opts
    d["model"]["recompute_options"] = ["none", "full"]
    return d


def run(inst, kind: str, seed: int, limit: float, **extra):
    return get("memetic")(inst.with_options(kind=kind), SolveOptions(time_limit_s=limit, seed=seed, extra=extra))


def med(xs):
    return statistics.median(xs)


def choice_of(inst, res) -> str:
    p, m = res.plan, inst.model
    return f"b={p.micro_batch or m.micro_batch}, {p.recompute or m.recompute}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", nargs="*", default=INSTANCES)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--short", type=float, default=2.0, help="a second, short limit for gene vs per choice")
    ap.add_argument("--exact-limit", type=float, default=300.0)
    ap.add_argument("--out", default="benchmarks/results/choice_levers.md")
    args = ap.parse_args()
    S, t = range(args.seeds), args.time_limit
    gain, versus = [], []
    for path in args.instances:
        data = parse_text(read_text_file(ROOT / path), path)
        base = instance_from_dict(data)
        m = base.model
        inst = instance_from_dict(with_choices(data, m.micro_batch, m.global_batch))
        print(f"{path}: {base.n} GPUs, {len(inst.model.choices())} choices", file=sys.stderr, flush=True)
        row = [path, base.n, f"b={m.micro_batch}, {m.recompute}",
               ", ".join(str(b) for b in inst.model.micro_batch_options)]
        for kind, metric in (("time", "time_s"), ("energy", "energy_j")):
            r0 = [run(base, kind, s, t) for s in S]
            rg = [run(inst, kind, s, t) for s in S]
            v0 = [getattr(r.evaluation, metric) for r in r0]
            vg = [getattr(r.evaluation, metric) for r in rg]
            best = sorted(rg, key=lambda r: getattr(r.evaluation, metric))[len(rg) // 2]
            row += [med(v0), med(vg), choice_of(inst, best)]
            for limit in (t, args.short):
                vj = vg if limit == t else [getattr(run(inst, kind, s, limit).evaluation, metric) for s in S]
                ve = [getattr(run(inst, kind, s, limit, choice_search="separate").evaluation, metric) for s in S]
                wins = sum(g < e * (1 - 1e-9) for g, e in zip(vj, ve))
                losses = sum(e < g * (1 - 1e-9) for g, e in zip(vj, ve))
                versus.append((path, kind, limit, med(vj), med(ve), wins, len(vj) - wins - losses, losses))
        gain.append(row)
    # exact: joint vs separate enumeration of the choices
    exact = []
    inst = load_instance(ROOT / EXACT)
    for engine in ("cpsat", "milp"):
        for kind in ("time", "energy", "cost", "carbon"):
            for how in ("joint", "separate"):
                t0 = time.perf_counter()
                r = get(engine)(inst.with_options(kind=kind),
                                SolveOptions(time_limit_s=args.exact_limit, seed=0, extra={"choice_search": how}))
                exact.append((engine, kind, how, str(r.status), r.objective_value, time.perf_counter() - t0))
                print(f"exact {engine} {kind} {how}: {r.status} {r.objective_value} {exact[-1][-1]:.1f} s",
                      file=sys.stderr, flush=True)
    lines = ["# Micro-batch size and recomputation as decisions (`benchmarks/choice_levers.py`)", "",
             f"`python benchmarks/choice_levers.py --time-limit {t:g} --short {args.short:g} --seeds {args.seeds} "
             f"--exact-limit {args.exact_limit:g}`, {time.strftime('%Y-%m-%d')}; memetic, median over seeds "
             f"0..{args.seeds - 1}, {t:g} s per run. Choices added to each bundled instance: b/2, b, 2b, 4b where "
             "they divide the global batch, each without and with full recomputation.", "",
             "## What searching them gains", "",
             "| instance | GPUs | bundled | sizes offered | T bundled (s) | T with choices (s) | chosen | "
             "E bundled (J) | E with choices (J) | chosen |", "|---|---:|---|---|---:|---:|---|---:|---:|---|"]
    for p, n, own, offered, t0, tg, ct, e0, eg, ce in gain:
        lines.append(f"| {p} | {n} | {own} | {offered} | {t0:.4f} | {tg:.4f} ({tg / t0 - 1:+.1%}) | {ct} | "
                     f"{e0:,.0f} | {eg:,.0f} ({eg / e0 - 1:+.1%}) | {ce} |")
    lines += ["", "## A choice gene against one run per choice (memetic, equal time)", "",
              "`choice_search: joint` (the gene, default) against `separate` (one run per choice on an equal share "
              "of the limit); seeds compared pairwise.", "",
              "| instance | objective | limit (s) | gene (median) | per choice (median) | gene better | equal | "
              "gene worse |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {p} | {k} | {lim:g} | {g:.6g} | {e:.6g} | {w} | {eq} | {lo} |"
              for p, k, lim, g, e, w, eq, lo in versus]
    lines += ["", f"## Exact: the choices enumerated with the shapes, or one solve per choice ({EXACT}, "
              f"{args.exact_limit:g} s limit, 2 threads)", "",
              "| engine | objective | enumeration | status | optimum | wall (s) |", "|---|---|---|---|---:|---:|"]
    lines += [f"| {e} | {k} | {h} | {s} | {v:.6g} | {w:.1f} |" for e, k, h, s, v, w in exact]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
