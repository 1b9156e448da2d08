"""Figures (matplotlib, PNG and SVG): Pareto fronts, scaling, a pipeline Gantt
chart of one plan, and a map-like view of the selected GPUs per region."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

# the backend is chosen there (files only, or a notebook's inline one)
from geotrain_opt.io.figure_files import _save, out_stem, plt  # noqa: F401  (out_stem: the CLI's)

__all__ = ["out_stem", "pareto", "scaling", "gantt", "region_map"]
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan


def pareto(inst: Instance, fronts: dict[str, list[tuple[float, float]]], out: str | Path,
           proven: set[str] | frozenset[str] = frozenset(), labels: dict[str, list[str]] | None = None,
           marks: dict[str, list[bool]] | None = None) -> list[str]:
    """Each front as a step line with its own marker; fronts in ``proven`` (every
    point optimal for its ε) filled, the others hollow and larger, so points that
    coincide stay visible. ``labels`` (e.g. D x P) are written beside the points,
    ``marks`` say point by point which are proven (filled) and which not (hollow)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, ((name, pts), mark) in enumerate(zip(sorted(fronts.items()), "os^dv<>")):
        lab = (labels or {}).get(name, [""] * len(pts))
        ok = (marks or {}).get(name, [name in proven] * len(pts))
        rows = sorted(zip(pts, lab, ok))
        xs, ys = [r[0][0] for r in rows], [r[0][1] for r in rows]
        line = ax.step(xs, ys, where="post", alpha=0.5)[0]
        c = line.get_color()
        n_ok = sum(r[2] for r in rows)
        ax.scatter(xs, ys, marker=mark, s=[30 if r[2] else 70 + 30 * k for r in rows],
                   facecolors=[c if r[2] else "none" for r in rows], edgecolors=c, zorder=3,
                   label=f"{name} ({len(rows)} points, {n_ok} proven)")
        for (x, y), text, _ in rows:
            if text:
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6, color=c)
    ax.set_xlabel("iteration time T (s)")
    ax.set_ylabel("energy per iteration E (J)")
    ax.set_title(f"time-energy Pareto fronts: {inst.name} (hollow: not proven)", fontsize=9)
    ax.legend(fontsize=7)
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
    """The simulated iteration's Gantt chart (:mod:`geotrain_opt.io.gantt`)."""
    from geotrain_opt.io.gantt import gantt as draw
    return draw(inst, plan, out, max_rows)


def region_map(inst: Instance, plan: Plan | None, out: str | Path,
               coords: dict[str, tuple[float, float]] | None = None) -> list[str]:
    """Selected GPUs per region at the regions' real places (cloud region names, city
    names or ``coords``: region -> (latitude, longitude)); a name that says nowhere
    is refused, never placed at an invented position."""
    from geotrain_opt.errors import InstanceError
    from geotrain_opt.problem.regions import region_position
    regions = inst.regions
    pos = {}
    for r in regions:
        p = region_position(r, coords)
        if p is None:
            raise InstanceError(f"region {r!r:.40}", "no known coordinates for the map: name a cloud region "
                                                     "(us-east-1, europe-west4, eastus, ...) or give --coords "
                                                     "(a YAML mapping region: [latitude, longitude])")
        pos[r] = (p[1], p[0])
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
