"""Performance profiles (Dolan and Moré, Math. Programming 91, 2002) over a benchmark
set, from bench rows: for each instance, each solver's median objective value over its
seeds, its ratio to the best solver's on that instance (infinite without a plan), and
for each solver the share of instances whose ratio is at most tau. rho(1) is the share
it wins; rho at large tau, the share it solves at all. Lower objective is better (every
objective here is minimised)."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

TAUS = (1.0, 1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0)


def ratios(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Solver -> its performance ratio on every instance (same order for all solvers)."""
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    solvers, instances = set(), set()
    for r in rows:
        s, i = r.get("label") or r["solver"], r["instance_name"]
        solvers.add(s)
        instances.add(i)
        v = r.get("objective_value")
        if v is not None and v > 0:
            by[(i, s)].append(float(v))
    med = {k: statistics.median(v) for k, v in by.items()}
    out: dict[str, list[float]] = {s: [] for s in sorted(solvers)}
    for i in sorted(instances):
        vals = [med[(i, s)] for s in out if (i, s) in med]
        if not vals:
            continue                       # no solver has a plan: the instance says nothing
        best = min(vals)
        for s in out:
            out[s].append(med[(i, s)] / best if (i, s) in med else math.inf)
    return out


def profile(rows: list[dict[str, Any]], taus: tuple[float, ...] = TAUS) -> dict[str, list[float]]:
    """Solver -> rho(tau) for each tau."""
    return {s: [sum(x <= t * (1 + 1e-12) for x in rs) / len(rs) if rs else 0.0 for t in taus]
            for s, rs in ratios(rows).items()}


def markdown(prof: dict[str, list[float]], taus: tuple[float, ...] = TAUS, n: int | None = None) -> str:
    head = "| solver | " + " | ".join(f"τ = {t:g}" for t in taus) + " |"
    lines = [f"Performance profile over {n} instances (share with value within τ of the best):" if n else "",
             "", head, "|---|" + "---|" * len(taus)]
    for s, rho in prof.items():
        lines.append(f"| {s} | " + " | ".join(f"{x:.2f}" for x in rho) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], out: str) -> list[str]:
    """rho(tau) as step lines, tau on a log axis up to the largest finite ratio."""
    from geotrain_opt.io.figure_files import _save, plt
    rs = ratios(rows)
    finite = [x for v in rs.values() for x in v if math.isfinite(x)]
    top = max(finite + [1.01]) * 1.05
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for s, v in rs.items():
        xs = sorted(x for x in v if math.isfinite(x))
        ys = [(k + 1) / len(v) for k in range(len(xs))]
        ax.step([1.0] + xs + [top], [0.0] + ys + [ys[-1] if ys else 0.0], where="post", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("τ (ratio to the best solver on the instance)")
    ax.set_ylabel("share of instances within τ")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    n = len(next(iter(rs.values()), []))
    ax.set_title(f"performance profile over {n} instances", fontsize=9)
    return _save(fig, out)
