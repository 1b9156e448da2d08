"""Figures (matplotlib, PNG and SVG): Pareto fronts, scaling, a pipeline Gantt
chart of one plan, and a map-like view of the selected GPUs per region."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")   # files only, no screen
import matplotlib.pyplot as plt  # noqa: E402

from . import stagecost as sc
from .errors import GeoTrainError  # noqa: E402
from .evaluator import evaluate  # noqa: E402
from .generate import CITIES  # noqa: E402
from .instance import Instance  # noqa: E402
from .plan import Plan  # noqa: E402


def out_stem(out: str | Path) -> str:
    """``--out fig`` and ``--out fig.png`` both mean fig.png + fig.svg."""
    s = str(out)
    return s[: -4] if s.lower().endswith((".png", ".svg")) else s


def _save(fig, out: str | Path) -> list[str]:
    from .outputs import OutputError
    paths = []
    try:
        for ext in ("png", "svg"):
            p = f"{out_stem(out)}.{ext}"
            fig.savefig(p, dpi=120, bbox_inches="tight")
            paths.append(p)
    except OSError as e:
        raise OutputError(f"--out: cannot write {p}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return paths


def pareto(inst: Instance, fronts: dict[str, list[tuple[float, float]]], out: str | Path) -> list[str]:
    fig, ax = plt.subplots(figsize=(6, 4))
    for (name, pts), mark in zip(sorted(fronts.items()), "os^dv<>"):
        pts = sorted(pts)
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", alpha=0.5)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mark, label=f"{name} ({len(pts)})")
    ax.set_xlabel("iteration time T (s)")
    ax.set_ylabel("energy per iteration E (J)")
    ax.set_title(f"time-energy Pareto fronts: {inst.name}")
    ax.legend()
    return _save(fig, out)


def scaling(rows: list[dict], out: str | Path) -> list[str]:
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("time_s") is not None:
            by[r["solver"]][r["n_gpus"]].append((r["time_s"], r["wall_s"]))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for s, pts in sorted(by.items()):
        ns = sorted(pts)
        a1.plot(ns, [min(t for t, _ in pts[n]) for n in ns], marker="o", label=s)
        a2.plot(ns, [max(w for _, w in pts[n]) for n in ns], marker="o", label=s)
    for a, lab in ((a1, "best T (s)"), (a2, "run time (s)")):
        a.set_xscale("log", base=2)
        a.set_xlabel("GPUs")
        a.set_ylabel(lab)
    a1.legend(fontsize=7)
    return _save(fig, out)


def schedule(inst: Instance, plan: Plan, k: int = 0) -> tuple[list, float]:
    """A 1F1B/GPipe-like timeline of replica k (schematic: forward = 1/3, backward =
    2/3 of a stage's time, each hop alpha + A/beta) for the Gantt chart."""
    a = inst.arrays
    ev = evaluate(inst, plan)
    g = plan.grid_indices(inst.index)[k]
    P, m = plan.stages, plan.micro_batches[k]
    t = [float(sc.stage_work(a, plan.cuts[j], plan.cuts[j + 1], j == P - 1)) / a.speed[g[j]] for j in range(P)]
    hop = [float(sc.hop(a, g[j], g[j + 1])) for j in range(P - 1)]
    free = [0.0] * P
    fend = [[0.0] * P for _ in range(m)]
    bars = []
    for i in range(m):                       # forwards
        for j in range(P):
            ready = fend[i][j - 1] + hop[j - 1] if j else 0.0
            s = max(ready, free[j])
            fend[i][j] = s + t[j] / 3
            free[j] = fend[i][j]
            bars.append((j, s, t[j] / 3, "forward"))
            if j < P - 1:
                bars.append((j, fend[i][j], hop[j], "send"))
    bend = [[0.0] * P for _ in range(m)]
    for i in range(m):                       # backwards, last stage first
        for j in reversed(range(P)):
            ready = bend[i][j + 1] + hop[j] if j < P - 1 else fend[i][j]
            s = max(ready, free[j])
            bend[i][j] = s + 2 * t[j] / 3
            free[j] = bend[i][j]
            bars.append((j, s, 2 * t[j] / 3, "backward"))
    end = max(free)
    for j, r in enumerate(ev.stage_allreduce_s):
        if r > 0:
            bars.append((j, end, r, "all-reduce"))
    return bars, end + max(ev.stage_allreduce_s, default=0.0)


def gantt(inst: Instance, plan: Plan, out: str | Path) -> list[str]:
    bars, total = schedule(inst, plan)
    colors = {"forward": "tab:blue", "backward": "tab:orange", "send": "tab:gray", "all-reduce": "tab:green"}
    fig, ax = plt.subplots(figsize=(10, 0.6 * plan.stages + 1.5))
    for j, s, d, kind in bars:
        ax.broken_barh([(s, d)], (j - 0.35, 0.7), color=colors[kind])
    ax.set_yticks(range(plan.stages), [f"stage {j}: {plan.grid[0][j]}" for j in range(plan.stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (s); white = bubble")
    ax.set_title(f"replica 0 of {inst.name} (schematic schedule; analytic T = {evaluate(inst, plan).time_s:.4g} s)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()], labels=list(colors),
              loc="upper right", fontsize=7)
    ax.set_xlim(0, total * 1.02)
    return _save(fig, out)


def region_map(inst: Instance, plan: Plan | None, out: str | Path) -> list[str]:
    known = {c: (lon, lat) for c, lat, lon in CITIES}
    regions = inst.regions
    pos = {}
    for i, r in enumerate(regions):
        pos[r] = known.get(r, (180 * math.cos(2 * math.pi * i / len(regions)), 60 * math.sin(2 * math.pi * i / len(regions))))
    used = set(plan.devices) if plan else set()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    if plan:
        g = plan.grid
        for row in g:
            for u, v in zip(row, row[1:]):
                ru, rv = inst.devices[inst.index[u]].region, inst.devices[inst.index[v]].region
                if ru != rv:
                    ax.plot(*zip(pos[ru], pos[rv]), color="tab:red", alpha=0.4)
    for r in regions:
        devs = [d for d in inst.devices if d.region == r]
        sel = sum(d.id in used for d in devs)
        x, y = pos[r]
        ax.scatter([x], [y], s=30 + 12 * len(devs), facecolor="none", edgecolor="black")
        if sel:
            ax.scatter([x], [y], s=30 + 12 * sel, color="tab:blue", alpha=0.7)
        ax.annotate(f"{r}\n{sel}/{len(devs)} used", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.set_title(f"{inst.name}: selected GPUs per region (red: pipeline hops between regions)")
    return _save(fig, out)


def plot_instance(inst: Instance, kind: str, out: str, results: str | None = None, plan: str | None = None,
                  solvers: list[str] | None = None, time_limit: float = 30.0) -> list[str]:
    if kind == "pareto":
        from .pareto import pareto_front
        from .solvers import SolveOptions
        fronts = {}
        for s in solvers or ["cpsat", "memetic"]:
            res = pareto_front(inst, s, SolveOptions(time_limit_s=time_limit), points=50)
            fronts[s] = [(r.evaluation.time_s, r.evaluation.energy_j) for r in res.pareto]
        return pareto(inst, fronts, out)
    if kind == "scaling":
        from .report import load_rows
        if not results:
            raise GeoTrainError("plot --kind scaling: needs --results (a bench JSONL)")
        return scaling(load_rows(results), out)
    p = Plan.load(plan) if plan else None
    if p is not None:
        p.grid_indices(inst.index)       # a plan of another instance: a clear PlanError
    if kind == "gantt":
        if p is None:
            from .solvers import SolveOptions, get
            p = get("memetic")(inst, SolveOptions(time_limit_s=time_limit)).plan
        return gantt(inst, p, out)
    return region_map(inst, p, out)
