"""Plans in and out of a built model: canonical grids, hints (warm starts) and
reading a solution back into a plan."""
from __future__ import annotations

from typing import Any
import numpy as np
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.exact.classes import class_twins, interchangeable_classes, unit_order
from geotrain_opt.solvers.exact.spec import Shape



def canonical_grid(inst: Instance, grid: np.ndarray, levels: np.ndarray | None = None):
    """The equivalent grid that satisfies the symmetry rules of ``build`` (the
    construction of formulations/exact.md §3.6), e.g. to turn any plan into a
    valid solution hint; with ``levels`` (each slot's clock, §3.8) also those
    levels moved with their slots: (grid, levels)."""
    classes = interchangeable_classes(inst)
    cls_of = {g: i for i, c in enumerate(classes) for g in c}
    key = lambda g: min(classes[cls_of[g]]) if g in cls_of else g  # noqa: E731
    D, P = grid.shape
    k0 = min(range(D), key=lambda k: (key(int(grid[k, 0])), k))
    g = np.roll(grid, -k0, axis=0).copy()
    if levels is None:
        return _label_in_rank_order(g, classes)
    return _label_in_rank_order(g, classes), np.roll(levels, -k0, axis=0)


def _label_in_rank_order(grid: np.ndarray, classes: list[list[int]]) -> np.ndarray:
    """Each class's devices, in order, on the slots its members hold, in slot order."""
    D, P = grid.shape
    g = grid.copy()
    for c in classes:
        slots = [(k, j) for k in range(D) for j in range(P) if int(grid[k, j]) in c]
        for (k, j), dev in zip(slots, c):    # slots come in rank order
            g[k, j] = dev
    return g


def hint_values(inst: Instance, shape: Shape, grid: np.ndarray,
                levels: np.ndarray | None = None) -> list[tuple[Any, int]]:
    """(x variable, 0/1) of a device grid of the shape's size, in the shape's model;
    ``levels``: each slot's clock level (None: all at full clock)."""
    if levels is None:
        levels = np.zeros_like(grid)
    level_of = shape.levels or [0] * len(shape.units)
    if all(len(c) == 1 for c in shape.units):
        grid, levels = canonical_grid(inst, grid, levels)
        unit = {(c[0], lv): u for u, (c, lv) in enumerate(zip(shape.units, level_of))}
        ugrid = np.array([[unit[int(g), int(lv)] for g, lv in zip(gr, lr)] for gr, lr in zip(grid, levels)])
    else:
        cls = {g: min(c) for c in shape.units for g in c}
        unit = {(min(c), lv): u for u, (c, lv) in enumerate(zip(shape.units, level_of))}
        ugrid = np.array([[unit[cls[int(g)], int(lv)] for g, lv in zip(gr, lr)] for gr, lr in zip(grid, levels)])
        twins = class_twins(inst) if shape.twins else []
        order = unit_order(len(shape.units), twins)
        k0 = min(range(shape.D), key=lambda k: (order[int(ugrid[k, 0])], k))
        ugrid = _twins_by_first_use(np.roll(ugrid, -k0, axis=0), twins)
    return [(var, int(ugrid[k][j] == u)) for (u, k, j), var in shape.x.items()]


def _twins_by_first_use(ugrid: np.ndarray, twins: list[list[int]]) -> np.ndarray:
    """Relabel each twin group so that its members are used in order of their first
    slot (the rule of ``symmetry``); the classes are interchangeable, the cost is the same."""
    out = ugrid.copy()
    flat = [int(u) for u in ugrid.reshape(-1)]
    for g in twins:
        used = list(dict.fromkeys(u for u in flat if u in g))
        rename = dict(zip(used + [u for u in g if u not in used], g))
        for u_old, u_new in rename.items():
            out[ugrid == u_old] = u_new
    return out


def read_plan(inst: Instance, shape: Shape, value) -> tuple[np.ndarray, list[int], list[int]]:
    """(grid, cuts, micro_batches) of the solution, given ``value(var) -> number``."""
    a = inst.arrays
    D, P = shape.D, shape.P
    ugrid = np.zeros((D, P), dtype=np.int64)
    for (u, k, j), var in shape.x.items():
        if value(var) > 0.5:
            ugrid[k, j] = u
    # a class's slots get its devices in slot order (at whatever clock each slot has)
    grid = np.array([[shape.units[u][0] for u in row] for row in ugrid], dtype=np.int64)
    classes = {tuple(c): c for c in shape.units if len(c) > 1}
    grid = _label_in_rank_order(grid, list(classes.values()))
    if shape.n_layers is not None:
        counts = [int(round(value(v))) for v in shape.n_layers]
    else:
        counts = [sum(1 for l in range(a.L) if value(shape.y[l, j]) > 0.5) for j in range(P)]
    cuts = [0] + list(np.cumsum(counts).astype(int))
    if shape.mb is None:
        mb = [a.M // D] * D
    else:
        mb = [1 + int(np.argmax([value(b) for b in row])) for row in shape.mb]
    return grid, cuts, mb


def read_solution(inst: Instance, shape: Shape, value) -> Any:
    """The solution as a plan, with the clock of every slot (§3.8)."""
    from geotrain_opt.problem.plan import Plan
    grid, cuts, mb = read_plan(inst, shape, value)
    clocks = None
    if shape.levels and any(shape.levels):
        clocks = {}
        for (u, k, j), var in shape.x.items():
            if value(var) > 0.5 and shape.levels[u]:
                g = int(grid[k, j])
                clocks[inst.ids[g]] = inst.devices[g].levels[shape.levels[u]][0]
    return Plan.from_indices(inst.ids, grid, cuts, mb, clocks)
