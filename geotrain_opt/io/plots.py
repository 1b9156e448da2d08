"""Figures (matplotlib, PNG and SVG): Pareto fronts, scaling, a pipeline Gantt
chart of one plan, and a map-like view of the selected GPUs per region."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

import sys  # noqa: E402

if "ipykernel" not in sys.modules:   # files only, no screen; in a notebook keep its inline backend
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from geotrain_opt.cost.evaluator import evaluate  # noqa: E402
from geotrain_opt.problem.regions import CITIES  # noqa: E402
from geotrain_opt.problem.instance import Instance  # noqa: E402
from geotrain_opt.problem.plan import slot_id, slot_label  # noqa: E402
from geotrain_opt.problem.plan import Plan  # noqa: E402


def out_stem(out: str | Path) -> str:
    """``--out fig`` and ``--out fig.png`` both mean fig.png + fig.svg."""
    s = str(out)
    return s[: -4] if s.lower().endswith((".png", ".svg")) else s


def _save(fig, out: str | Path) -> list[str]:
    from geotrain_opt.common.outputs import OutputError
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


def pareto(inst: Instance, fronts: dict[str, list[tuple[float, float]]], out: str | Path,
           proven: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Each front as a step line with its own marker; fronts in ``proven`` (every
    point optimal for its ε) filled, the others hollow and larger, so points that
    coincide stay visible."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, ((name, pts), mark) in enumerate(zip(sorted(fronts.items()), "os^dv<>")):
        pts = sorted(pts)
        line = ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", alpha=0.5)[0]
        is_proven = name in proven
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mark, s=30 if is_proven else 70 + 30 * k,
                   facecolors=line.get_color() if is_proven else "none", edgecolors=line.get_color(),
                   label=f"{name} ({len(pts)}{', proven' if is_proven else ''})", zorder=3 + (not is_proven))
    ax.set_xlabel("iteration time T (s)")
    ax.set_ylabel("energy per iteration E (J)")
    ax.set_title(f"time-energy Pareto fronts: {inst.name}")
    ax.legend()
    return _save(fig, out)


def scaling(rows: list[dict], out: str | Path) -> list[str]:
    """Best T and run time against GPUs: one point per (solver, instance); a line only
    joins the medians of one solver across sizes, never different instances' values."""
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("time_s") is not None and r.get("n_gpus"):
            by[r["solver"]][(r["n_gpus"], r.get("instance_name"))].append((r["time_s"], r["wall_s"]))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for s, groups in sorted(by.items()):
        pts = sorted((n, min(t for t, _ in v), max(w for _, w in v)) for (n, _name), v in groups.items())
        sc1 = a1.scatter([p[0] for p in pts], [p[1] for p in pts], label=s, s=18)
        a2.scatter([p[0] for p in pts], [p[2] for p in pts], label=s, s=18, color=sc1.get_facecolor()[0])
    for a, lab in ((a1, "best T per instance (s)"), (a2, "run time per instance (s)")):
        a.set_xscale("log", base=2)
        a.set_xlabel("GPUs")
        a.set_ylabel(lab)
    a1.legend(fontsize=7)
    return _save(fig, out)


def gantt(inst: Instance, plan: Plan, out: str | Path, max_rows: int = 32) -> list[str]:
    """The simulator's trace of one iteration (formulations/simulator.md): every
    forward, backward and all-reduce of every slot, in the instance's schedule
    (1F1B or GPipe) and its accumulation flushes; one row per slot, replica by replica."""
    from geotrain_opt.cost.simulate import simulate
    sim = simulate(inst, plan, record=True)
    ev = evaluate(inst, plan)
    slots = [(k, j) for k in range(plan.replicas) for j in range(plan.stages)]
    shown = slots[:max_rows]
    row = {slot_id(plan.grid[k][j]): r for r, (k, j) in enumerate(shown)}
    colors = {"F": "tab:blue", "B": "tab:orange", "AR": "tab:green"}
    names = {"F": "forward", "B": "backward", "AR": "all-reduce"}
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(shown) + 1.5))
    for dev, kind, _i, start, end in sim.ops:
        if dev in row:
            ax.broken_barh([(start, end - start)], (row[dev] - 0.38, 0.76), color=colors[kind],
                           edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(shown)), [f"r{k} s{j}: {slot_label(plan.grid[k][j])}" for k, j in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s); white = waiting")
    more = f"; first {len(shown)} of {len(slots)} slots" if len(shown) < len(slots) else ""
    ax.set_title(f"{inst.name}: simulated {inst.options.schedule} iteration, T = {sim.time_s:.4g} s "
                 f"(analytic {ev.time_s:.4g} s){more}", fontsize=9)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()], labels=list(names.values()),
              loc="upper right", fontsize=7)
    ax.set_xlim(0, sim.time_s * 1.02)
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
                ru, rv = (inst.devices[inst.index[x if isinstance(x, str) else x[0]]].region for x in (u, v))
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
