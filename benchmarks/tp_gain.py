"""What tensor parallelism and ZeRO buy (formulations/model.md §14, §15) on generated
geo clusters of 8-GPU nodes (``geotrain-opt generate geo``: 3-12 regions, a GPU type
per region from H100 to T4), with the 7B-70B presets at micro-batch 1.

    python benchmarks/tp_gain.py --sizes 64,256 --presets gpt3-xl,llama2-7b,llama2-13b,llama2-70b \
        --time-limit 20 --out benchmarks/results/tp_gain.md

Each instance is solved by the memetic solver (seed 0, one process, the limit is the
whole run's) three ways: one GPU per stage (``tensor_parallel: [1]``), every degree a
node allows (``auto``), and ``auto`` with ZeRO-1. Reported: T (time objective) and the
degree the plan uses, the gain of each over one GPU per stage, and each run's wall
time. "none" where a run finds no plan (the model fits nowhere at that setting).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from report_file import write_report  # noqa: E402
from geotrain_opt.io.generate import generate  # noqa: E402
from geotrain_opt.problem.instance import instance_from_dict  # noqa: E402
from geotrain_opt.solvers import SolveOptions, get  # noqa: E402

SETTINGS = {"TP 1": {"tensor_parallel": [1]}, "TP auto": {"tensor_parallel": "auto"},
            "TP auto + ZeRO-1": {"tensor_parallel": "auto", "zero_stage": 1}}


def instance(n: int, preset: str, seed: int, options: dict):
    d = generate("geo", n, seed)
    d["name"] = f"geo-{n}-s{seed}-{preset}"
    d["model"] = {"preset": preset, "global_batch": 512, "micro_batch": 1, "attention": "flash"}
    d["options"] = {**d.get("options", {}), **options}
    try:
        return instance_from_dict(d)
    except Exception as e:      # noqa: BLE001  (a setting at which the model fits nowhere)
        return str(e)


def solve(inst, limit: float) -> tuple[float | None, int | None, float]:
    t = time.perf_counter()
    res = get("memetic")(inst, SolveOptions(time_limit_s=limit, seed=0, workers=1))
    wall = time.perf_counter() - t
    if res.plan is None or not res.evaluation.acceptable:
        return None, None, wall
    return res.evaluation.time_s, res.plan.tp, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--presets", default="gpt3-xl,llama2-7b,llama2-13b,llama2-70b")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--out", default="benchmarks/results/tp_gain.md")
    args = ap.parse_args()
    rows = []
    for n in map(int, args.sizes.split(",")):
        for preset in args.presets.split(","):
            row = [f"{n}", preset]
            base = None
            for name, opts in SETTINGS.items():
                inst = instance(n, preset, args.seed, opts)
                T, tp, wall = (None, None, 0.0) if isinstance(inst, str) else solve(inst, args.time_limit)
                base = T if name == "TP 1" else base
                gain = f"{(1 - T / base) * 100:+.1f} %" if T and base else "-"
                row += [f"{T:.4g} s (TP {tp}, {wall:.0f} s)" if T else "none", gain if name != "TP 1" else ""]
                print(n, preset, name, T, tp, f"{wall:.1f} s", file=sys.stderr, flush=True)
            rows.append(row)
    head = ["GPUs", "model"] + [c for name in SETTINGS for c in (name, "gain")]
    lines = ["# What tensor parallelism and ZeRO buy\n",
             f"`python benchmarks/tp_gain.py --sizes {args.sizes} --presets {args.presets} --seed {args.seed} "
             f"--time-limit {args.time_limit:g}` (memetic, seed 0, one process; T per iteration, the degree "
             f"its plan uses and the run's wall time; gain over one GPU per stage)\n",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
