"""The Gantt chart of one simulated iteration, readable at any length.

A 1F1B iteration of 256 micro-batches is ~12k operations: drawn one bar at a time it
took half an hour and showed a moiré. Here every (slot, kind) row is one artist, and a
long schedule is drawn as its fill and its drain in full, with the steady state between
them (the same cycle again and again) cut out and said so on the figure.
"""
from __future__ import annotations

from pathlib import Path

from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan, slot_id, slot_label

COLORS = {"F": "tab:blue", "B": "tab:orange", "AR": "tab:green"}
NAMES = {"F": "forward", "B": "backward", "AR": "all-reduce"}


def windows(ops: list[tuple], plan: Plan, end: float) -> list[tuple[float, float]]:
    """The time spans to draw: the whole iteration, or, when every replica runs more
    than 2 (P + 2) micro-batches, the fill (until the last stage's forward of
    micro-batch P + 1) and the drain (from the first stage's backward of micro-batch
    m - P - 2 on)."""
    w = plan.stages + 2
    if min(plan.micro_batches) <= 2 * w:
        return [(0.0, end)]
    first = {slot_id(row[0]): m for row, m in zip(plan.grid, plan.micro_batches)}
    last = {slot_id(row[-1]) for row in plan.grid}
    fill = [e for dev, kind, i, _s, e in ops if kind == "F" and i == w - 1 and slot_id(dev) in last]
    drain = [s for dev, kind, i, s, _e in ops
             if kind == "B" and slot_id(dev) in first and i == first[slot_id(dev)] - w]
    if not fill or not drain or min(drain) <= max(fill):
        return [(0.0, end)]
    return [(0.0, max(fill)), (min(drain), end)]


def gantt(inst: Instance, plan: Plan, out: str | Path, max_rows: int = 32) -> list[str]:
    """The simulator's trace of one iteration (formulations/simulator.md): every
    forward, backward and all-reduce of every slot, in the instance's schedule (1F1B
    or GPipe) and its accumulation flushes; one row per slot, replica by replica."""
    from geotrain_opt.cost.evaluator import evaluate
    from geotrain_opt.cost.simulate import simulate
    from geotrain_opt.io.figure_files import _save, plt
    sim = simulate(inst, plan, record=True)
    ev = evaluate(inst, plan)
    slots = [(k, j) for k in range(plan.replicas) for j in range(plan.stages)]
    shown = slots[:max_rows]
    row = {slot_id(plan.grid[k][j]): r for r, (k, j) in enumerate(shown)}
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for dev, kind, _i, start, end in sim.ops:
        r = row.get(slot_id(dev))
        if r is not None:
            spans.setdefault((r, kind), []).append((start, end - start))
    wins = windows(sim.ops, plan, sim.time_s)
    widths = [b - a for a, b in wins]
    fig, axes = plt.subplots(1, len(wins), sharey=True, squeeze=False, figsize=(10, 0.35 * len(shown) + 1.5),
                             gridspec_kw={"width_ratios": widths, "wspace": 0.04})
    for ax, (a, b) in zip(axes[0], wins):
        for (r, kind), bars in spans.items():      # one artist per row and kind
            ax.broken_barh(bars, (r - 0.38, 0.76), color=COLORS[kind], edgecolor="white", linewidth=0.3)
        ax.set_xlim(a, b + (b - a) * 0.01)
    ax0 = axes[0][0]
    ax0.set_yticks(range(len(shown)), [f"r{k} s{j}: {slot_label(plan.grid[k][j])}" for k, j in shown], fontsize=7)
    ax0.invert_yaxis()
    more = f"; first {len(shown)} of {len(slots)} slots" if len(shown) < len(slots) else ""
    cut = (f"\nsteady state {wins[0][1]:.4g}-{wins[1][0]:.4g} s not drawn (the same cycle repeats)"
           if len(wins) > 1 else "")
    fig.suptitle(f"{inst.name}: simulated {inst.options.schedule} iteration, T = {sim.time_s:.4g} s "
                 f"(analytic {ev.time_s:.4g} s){more}{cut}", fontsize=9)
    fig.supxlabel("time (s); white = waiting", fontsize=8)
    axes[0][-1].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()],
                       labels=list(NAMES.values()), loc="upper right", fontsize=7)
    return _save(fig, out)
