"""Anytime performance from bench rows' incumbent trajectories (issue 41's protocol,
as COCO/IOHprofiler and MIPLIB's primal integral measure it).

Every row of ``bench`` carries ``trajectory``: ``[seconds, value]`` at each
improvement of the run's incumbent, seconds from the run's start (loading included).
Against a reference value per instance (the best value any row reached, or the
library's best known value when that is lower):

* **time to target**: a target is the reference times ``1 + eps`` for each precision
  ``eps`` of ``TARGETS``; a run hits it at the first point at or below it (to
  ``HIT_RTOL``), or never;
* **ECDF of runtime to target**: for each solver, the share of (instance, target)
  pairs hit by time ``t``, each instance weighing one however many seeds its runs
  had (so a one-seed exact solver and a three-seed heuristic compare alike);
* **primal integral** (Berthold, Oper. Res. Letters 41, 2013): the primal gap
  ``|v - ref| / max(|v|, |ref|)`` (1 before the first plan) integrated over the run's
  budget, divided by the budget: 0 is the reference from the first instant, 1 no
  plan at all. Lower is better; it rewards finding good plans early.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any, Iterable

TARGETS = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.001, 0.0)
HIT_RTOL = 1e-9           # a value within this of a target hits it (evaluation rounding)
LEADING_EPS = 0.01        # the table's "time to 1 %" column


def _label(r: dict[str, Any]) -> str:
    return r.get("label") or r["solver"]


def trajectory(r: dict[str, Any]) -> list[tuple[float, float]] | None:
    """The row's trajectory as (seconds, value) pairs, or None when the row has none
    (an older row, or one written by hand): such rows are left out, and counted."""
    t = r.get("trajectory")
    if not isinstance(t, list):
        return None
    out = []
    for p in t:
        if (isinstance(p, list) and len(p) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                        and math.isfinite(x) for x in p) and p[0] >= 0):
            out.append((float(p[0]), float(p[1])))
    return sorted(out)


def references(rows: Iterable[dict[str, Any]], known: dict[str, float] | None = None) -> dict[str, float]:
    """Instance -> the reference value: the least value of any row (its trajectory's
    points included) or of ``known`` (e.g. the library's best known values)."""
    ref: dict[str, float] = dict(known or {})
    for r in rows:
        vals = [v for _t, v in trajectory(r) or []]
        if r.get("objective_value") is not None:
            vals.append(float(r["objective_value"]))
        for v in vals:
            i = r["instance_name"]
            if i not in ref or v < ref[i]:
                ref[i] = v
    return ref


def hit_time(traj: list[tuple[float, float]], target: float) -> float | None:
    for t, v in traj:
        if v <= target + HIT_RTOL * abs(target):
            return t
    return None


def primal_gap(v: float | None, ref: float) -> float:
    if v is None:
        return 1.0
    if v == ref:
        return 0.0
    if v * ref < 0:
        return 1.0
    return min(1.0, abs(v - ref) / max(abs(v), abs(ref)))


def primal_integral(traj: list[tuple[float, float]], ref: float, horizon: float) -> float:
    """The primal gap's integral over [0, horizon], divided by horizon (in [0, 1])."""
    if horizon <= 0:
        return float("nan")
    total, t_prev, v_prev = 0.0, 0.0, None
    for t, v in traj:
        t = min(t, horizon)
        total += primal_gap(v_prev, ref) * (t - t_prev)
        t_prev, v_prev = t, v
    total += primal_gap(v_prev, ref) * (horizon - t_prev)
    return total / horizon


def runs_by(rows: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], list[dict]], int]:
    """(label, instance) -> its rows with a trajectory; and how many rows had none."""
    by: dict[tuple[str, str], list[dict]] = defaultdict(list)
    missing = 0
    for r in rows:
        tr = trajectory(r)
        if tr is None:
            missing += 1
            continue
        by[(_label(r), r["instance_name"])].append({**r, "_traj": tr})
    return by, missing


def hits(rows: list[dict[str, Any]], ref: dict[str, float],
         targets: tuple[float, ...] = TARGETS) -> dict[str, list[tuple[float, float | None]]]:
    """Solver -> (weight, time to target or None) for every run and target; an
    instance's weights sum to the number of targets whatever its number of runs."""
    by, _ = runs_by(rows)
    out: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for (s, i), rs in sorted(by.items()):
        if i not in ref:
            continue
        w = 1.0 / len(rs)
        for r in rs:
            for eps in targets:
                target = ref[i] + eps * abs(ref[i])
                out[s].append((w, hit_time(r["_traj"], target)))
    return dict(out)


def ecdf_at(pairs: list[tuple[float, float | None]], t: float) -> float:
    """Share (by weight) of the solver's (run, target) pairs hit by time ``t``."""
    total = sum(w for w, _ in pairs)
    return sum(w for w, h in pairs if h is not None and h <= t) / total if total else 0.0


def table(rows: list[dict[str, Any]], ref: dict[str, float],
          targets: tuple[float, ...] = TARGETS) -> list[dict[str, Any]]:
    """One record per solver: its runs, the share of targets hit by the end, the
    median time to reach the reference within LEADING_EPS (over the runs that did,
    with how many did), and its mean primal integral."""
    by, _ = runs_by(rows)
    pairs = hits(rows, ref, targets)
    out = []
    for s in sorted({k[0] for k in by}):
        runs = [r for (l, i), rs in by.items() if l == s and i in ref for r in rs]
        near = [hit_time(r["_traj"], ref[r["instance_name"]] * (1 + LEADING_EPS)) for r in runs]
        reached = [h for h in near if h is not None]
        pis = [primal_integral(r["_traj"], ref[r["instance_name"]], float(r.get("time_limit_s") or r["wall_s"]))
               for r in runs]
        pis = [p for p in pis if math.isfinite(p)]
        out.append({"solver": s, "runs": len(runs), "instances": len({r["instance_name"] for r in runs}),
                    "targets_hit": ecdf_at(pairs.get(s, []), math.inf),
                    "reached_1pct": len(reached),
                    "median_s_to_1pct": statistics.median(reached) if reached else None,
                    "primal_integral": statistics.mean(pis) if pis else None})
    return out


def markdown(recs: list[dict[str, Any]], missing: int = 0, targets: tuple[float, ...] = TARGETS) -> str:
    lines = [f"Anytime performance (targets: reference x (1 + eps), eps in "
             f"{', '.join(f'{e:g}' for e in targets)}; primal integral over each run's budget, 0 = best):", "",
             "| solver | runs | instances | targets hit | runs within 1 % | median s to 1 % | primal integral |",
             "|---|---|---|---|---|---|---|"]
    for r in recs:
        med = "-" if r["median_s_to_1pct"] is None else f"{r['median_s_to_1pct']:.2f}"
        pi = "-" if r["primal_integral"] is None else f"{r['primal_integral']:.4f}"
        lines.append(f"| {r['solver']} | {r['runs']} | {r['instances']} | {r['targets_hit']:.1%} | "
                     f"{r['reached_1pct']}/{r['runs']} | {med} | {pi} |")
    if missing:
        lines += ["", f"{missing} rows without a trajectory (older bench rows) left out."]
    return "\n".join(lines) + "\n"


def _grid(rows: list[dict[str, Any]]) -> list[float]:
    top = max([float(r.get("time_limit_s") or r.get("wall_s") or 1.0) for r in rows] + [1e-2])
    lo = 1e-2
    n = 200
    return [lo * (top * 1.05 / lo) ** (k / (n - 1)) for k in range(n)]


def plot_ecdf(rows: list[dict[str, Any]], ref: dict[str, float], out: str) -> list[str]:
    """The runtime-to-target ECDF of every solver, time on a log axis."""
    from geotrain_opt.io.figure_files import _save, plt
    pairs = hits(rows, ref)
    xs = _grid(rows)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for s, p in sorted(pairs.items()):
        ax.step(xs, [ecdf_at(p, x) for x in xs], where="post", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("seconds from the run's start")
    ax.set_ylabel("share of (instance, target) pairs hit")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    n = len({r["instance_name"] for r in rows if r["instance_name"] in ref})
    ax.set_title(f"runtime to target over {n} instances, {len(TARGETS)} targets each", fontsize=9)
    return _save(fig, out)


def check_names(rows: list[dict[str, Any]], ref: dict[str, float], names: list[str]) -> None:
    """A one-line error for instance names that no run with a trajectory has."""
    have = {i for _s, i in runs_by(rows)[0] if i in ref}
    unknown = [n for n in names if n not in have]
    if unknown:
        from geotrain_opt.errors import GeoTrainError
        raise GeoTrainError(f"--anytime-instances: no runs with a trajectory on {', '.join(unknown)[:200]}")


def plot_anytime(rows: list[dict[str, Any]], ref: dict[str, float], out: str, max_panels: int = 12,
                 names: list[str] | None = None) -> list[str]:
    """Best value over time, as the gap to the reference, one panel per instance
    (``names``, or the first ``max_panels`` by name), one line per run, a colour per
    solver."""
    from geotrain_opt.io.figure_files import _save, plt
    by, _ = runs_by(rows)
    check_names(rows, ref, names or [])
    names = list(names)[:max_panels] if names else sorted({i for _s, i in by if i in ref})[:max_panels]
    solvers = sorted({s for s, _i in by})
    cols = min(3, max(1, len(names)))
    nrow = max(1, math.ceil(len(names) / cols))
    fig, axes = plt.subplots(nrow, cols, figsize=(4 * cols, 2.6 * nrow), squeeze=False)
    colour = {s: f"C{k % 10}" for k, s in enumerate(solvers)}
    floor = 1e-5
    for ax, name in zip(axes.flat, names):
        for s in solvers:
            for k, r in enumerate(by.get((s, name), [])):
                ts = [t for t, _v in r["_traj"]]
                gs = [max(floor, (v - ref[name]) / abs(ref[name])) if ref[name] else max(floor, v) for _t, v in r["_traj"]]
                end = float(r.get("time_limit_s") or r["wall_s"])
                if ts:
                    ax.step(ts + [max(end, ts[-1])], gs + [gs[-1]], where="post", color=colour[s],
                            alpha=0.8, label=s if k == 0 else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes[0][0].set_ylabel("gap to reference (1e-5: reached)", fontsize=8)
    axes[-1][0].set_xlabel("seconds", fontsize=8)
    handles = [plt.Line2D([], [], color=colour[s], label=s) for s in solvers]
    fig.tight_layout(rect=(0, 0, 0.85, 1))       # the legend beside the panels, titles clear of the ticks
    fig.legend(handles=handles, fontsize=7, loc="center right")
    return _save(fig, out)
