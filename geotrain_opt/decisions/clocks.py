"""A device's clock (formulations/model.md §10): a plan may run a selected device at
one of the lower clocks its GPU type lists, computing at ``fraction * speed`` and
drawing that clock's busy power. The gene is one clock level per device (0: full
clock), so a clock travels with its device through swaps and crossovers.

Cost term: ``cost/evaluator.py`` (``_Terms`` reads ``plan.clocks``; the batched path
takes ``clk``, each slot's level). Exact model: a class of devices at each of its
clocks is one unit (:func:`model_units`, formulations/exact.md §3.8). Bounds: the
most frugal clock's energy per FLOP (:func:`least_j_per_flop`)."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.decisions.base import Decision

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance, InstanceArrays
    from geotrain_opt.problem.plan import Plan


def mut_clock(inst: "Instance", g: Any, rng: np.random.Generator) -> Any:
    """Another clock for one selected device that lists several; clocks belong to
    devices, so they travel with them through swaps and crossovers."""
    levels = inst.arrays.n_levels
    used = [int(d) for d in g.grid.reshape(-1) if levels[d] > 1]
    if not used:
        return g
    dev = used[int(rng.integers(len(used)))]
    child = g.copy()
    if child.genes["clk"] is None:
        child.genes["clk"] = np.zeros(inst.n, dtype=np.int64)
    clk = child.genes["clk"]
    clk[dev] = (clk[dev] + 1 + int(rng.integers(levels[dev] - 1))) % levels[dev]
    return child


def clock_moves(fit: Any, g: Any, rng: np.random.Generator, stop=lambda: False, rounds: int = 8) -> bool:
    """Each round tries every other clock of every selected device (one change each)
    and takes the best: stages off the critical path slow down for less energy,
    and a slowed stage that became critical speeds up again. Nothing to do (and no
    evaluation) where no device lists lower clocks."""
    a = fit.inst.arrays
    if not a.has_clocks:
        return False
    D, P = g.D, g.P
    fit([g])
    start = g.key
    slots = g.grid.reshape(-1)
    for _ in range(rounds):
        if stop():
            break
        base = g.genes["clk"] if g.genes["clk"] is not None else np.zeros(fit.inst.n, dtype=np.int64)
        cands = [(dev, lv) for dev in slots.tolist() for lv in range(int(a.n_levels[dev])) if lv != base[dev]]
        if not cands:
            break
        clks = np.repeat(base[None, :], len(cands), axis=0)
        for r, (dev, lv) in enumerate(cands):
            clks[r, dev] = lv
        grids = np.broadcast_to(g.grid, (len(cands), D, P))
        levels = np.take_along_axis(clks, grids.reshape(len(cands), -1), axis=1).reshape(len(cands), D, P)
        p, s, T, E, ok = fit.keys_of(D, P, grids, np.broadcast_to(g.cuts, (len(cands), P + 1)),
                                     np.broadcast_to(g.mb, (len(cands), D)),
                                     **{**g.arrays(grids), "clk": levels})
        pmin = p.min()
        ties = np.flatnonzero(p <= pmin * (1 + objmod.TIE_RTOL))
        i = int(ties[np.argmin(s[ties])])
        key = (float(p[i]), float(s[i]))
        if not objmod.better(fit.obj, key, g.key):
            break
        g.genes["clk"] = clks[i].copy()
        g.key, g.te, g.feasible = key, (float(T[i]), float(E[i])), bool(ok[i])
    return g.key != start


def model_units(a: "InstanceArrays", classes: list[list[int]]) -> list[tuple[list[int], int]]:
    """The exact model's units (formulations/exact.md §3.8): a device class that lists
    lower clocks is one unit per clock; without clocks every class is one unit at
    level 0."""
    return [(c, lv) for c in classes for lv in range(int(a.n_levels[c[0]]))]


def least_j_per_flop(a: "InstanceArrays") -> float:
    """Busy energy per FLOP above waiting power at the most frugal clock of any device
    (a lower clock can spend less per FLOP): what every FLOP costs at least."""
    return float(((a.clock_busy - a.p_wait[:, None]) / (a.clock_frac * a.speed[:, None])).min())


class Clocks(Decision):
    name = "clock"
    gene = "clk"
    default = None          # every device at its full clock
    mutations = {"clock": mut_clock}
    moves = {"clocks": clock_moves}

    def active(self, inst: "Instance") -> bool:
        return bool(inst.arrays.has_clocks)

    def copy(self, value: Any) -> Any:
        return None if value is None else value.copy()

    def signature(self, g: Any) -> tuple:
        clk = g.genes["clk"]
        return (clk[g.grid].tobytes(),) if clk is not None and clk[g.grid].any() else ()

    def from_plan(self, inst: "Instance", plan: "Plan") -> Any:
        if not plan.clocks:
            return None
        clk = np.zeros(inst.n, dtype=np.int64)
        for dev, f in plan.clocks:
            g = inst.index[dev]
            clk[g] = [lv[0] for lv in inst.devices[g].levels].index(f)
        return clk

    def to_plan(self, inst: "Instance", g: Any, plan: "Plan") -> "Plan":
        clk = g.genes["clk"]
        if clk is None:
            return plan
        clocks = {inst.ids[d]: inst.devices[d].levels[int(clk[d])][0] for d in g.grid.reshape(-1).tolist() if clk[d]}
        return replace(plan, clocks=tuple(sorted((str(d), float(f)) for d, f in clocks.items() if float(f) != 1.0)))

    def arrays(self, genomes: list, grids: np.ndarray) -> dict[str, Any]:
        clks = [g.genes["clk"] for g in genomes]
        if all(c is None for c in clks):
            return {"clk": None}
        if len(genomes) == 1:
            return {"clk": clks[0][grids]}
        return {"clk": np.stack([c[gr] if c is not None else np.zeros(gr.shape, dtype=np.int64)
                                 for c, gr in zip(clks, grids)])}
