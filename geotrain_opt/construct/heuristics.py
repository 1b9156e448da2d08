"""Constructive heuristics: fastest-first, region-packed and memory-aware plans.

They make generation 0 reasonable and serve the baselines as well. Each returns
``(grid, cuts, micro_batches)`` in device indices for a given shape (D, P).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from geotrain_opt.construct.pieces import (even_last_cuts, feasible_shapes, greedy_memory_cuts,
                                           split_micro_batches, stage_memory)
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.tolerances import IMPROVE_RTOL


def speed_cuts(inst: Instance, stage_speed: np.ndarray) -> np.ndarray:
    """Cuts whose stage work is proportional to each stage's (slowest) device speed."""
    a = inst.arrays
    P, L = len(stage_speed), a.L
    total = a.w_prefix[-1] + a.head_work
    share = np.cumsum(stage_speed) / stage_speed.sum()
    cuts = [0]
    for j in range(P - 1):
        c = int(np.searchsorted(a.w_prefix, share[j] * total))
        if c > 0 and abs(a.w_prefix[c - 1] - share[j] * total) < abs(a.w_prefix[min(c, L)] - share[j] * total):
            c -= 1
        c = min(max(c, cuts[-1] + 1), L - (P - 1 - j))
        cuts.append(c)
    cuts.append(L)
    return np.array(cuts, dtype=np.int64)


def _cuts_for(inst: Instance, grid: np.ndarray, mb: list[int]) -> np.ndarray:
    a = inst.arrays
    cuts = speed_cuts(inst, a.speed[grid].min(axis=0))
    caps = a.mem_cap[grid].min(axis=0)
    scales = [float(s) for s in a.act_scale[grid].max(axis=0)]      # §14: groups without SP
    P = grid.shape[1]
    D = grid.shape[0]
    fits = all(stage_memory(inst, P, j, int(cuts[j]), int(cuts[j + 1]), max(mb), D, scales[j]) <= caps[j]
               for j in range(P))
    if not fits:
        mem = greedy_memory_cuts(inst, [float(c) for c in caps], max(mb), D, scales)
        if mem is not None:
            return np.array(mem, dtype=np.int64)
    return cuts


def fastest_first(inst: Instance, D: int, P: int):
    order = np.argsort(-inst.arrays.speed, kind="stable")[: D * P]
    grid = order.reshape(D, P)
    mb = split_micro_batches(inst.model.num_micro_batches, D)
    return grid, _cuts_for(inst, grid, mb), mb


def _site_order(inst: Instance) -> list[int]:
    """Devices by site: fastest region first, then its fastest GPUs, fuller nodes
    first (NVLink neighbours next to each other)."""
    a = inst.arrays
    region_speed = {r: a.speed[a.region == r].sum() for r in np.unique(a.region)}
    nodes = {d.node: i for i, d in enumerate(inst.devices)}
    node_of = np.array([nodes[d.node] for d in inst.devices])
    node_size = np.bincount(node_of, minlength=inst.n)
    return sorted(range(inst.n), key=lambda g: (-region_speed[a.region[g]], a.region[g], -a.speed[g],
                                                -node_size[node_of[g]], node_of[g], g))


def _primary(inst: Instance, r) -> np.ndarray:
    """Each batched plan's primary objective, inf where it is not acceptable."""
    from geotrain_opt.cost import objective as objmod
    return np.where(r.acceptable, objmod.of(inst.objective, r)[0], np.inf)


def _finish(inst: Instance, grid: np.ndarray):
    mb = split_micro_batches(inst.model.num_micro_batches, grid.shape[0])
    return grid, _cuts_for(inst, grid, mb), mb


def region_packed(inst: Instance, D: int, P: int):
    """Pipelines inside a site: fill replicas region by region, node by node, so
    that consecutive stages share a node or at least a region."""
    return _finish(inst, np.array(_site_order(inst)[: D * P], dtype=np.int64).reshape(D, P))


def site_groups(inst: Instance, D: int, P: int):
    """Data-parallel groups inside a site, pipelines across sites (Megatron's
    placement): stage j's D devices are consecutive in site order."""
    return _finish(inst, np.array(_site_order(inst)[: D * P], dtype=np.int64).reshape(P, D).T.copy())


def region_columns(inst: Instance, D: int, P: int, strict: bool = True) -> np.ndarray | None:
    """A D x P grid whose every column (a stage's replicas) lies in one region, the
    fastest free devices first: each stage stays in the region of the stage before
    while it has D free (its messages stay inside), else takes the region whose next D
    free are fastest. Where no region has D free: None (``strict``), else the fastest
    free devices wherever they are."""
    a = inst.arrays
    free: dict = {}
    for g in np.argsort(-a.speed, kind="stable"):
        free.setdefault(a.region[g], []).append(int(g))
    grid = np.empty((D, P), dtype=np.int64)
    here = None
    for j in range(P):
        room = [r for r, units in free.items() if len(units) >= D]
        if not room and strict:
            return None
        if not room:
            rest = sorted((g for units in free.values() for g in units), key=lambda g: (-a.speed[g], g))[:D]
            grid[:, j], taken = rest, set(rest)
            free = {r: [g for g in units if g not in taken] for r, units in free.items()}
            continue
        r = here if here in room else max(room, key=lambda r: (a.speed[free[r][:D]].sum(), -len(free[r])))
        grid[:, j], free[r] = free[r][:D], free[r][D:]
        here = r
    return grid


def stage_regions(inst: Instance, D: int, P: int):
    """Every stage's replicas inside one region (no gradient ring over the WAN, as
    Sailor plans), the pipeline crossing regions between stages."""
    return _finish(inst, region_columns(inst, D, P, strict=False))


def stage_regions_even(inst: Instance, D: int, P: int):
    """As ``stage_regions`` with Sailor's even layers (the rest on the last stages)."""
    grid = region_columns(inst, D, P, strict=False)
    return grid, even_last_cuts(inst.model.layers, P), split_micro_batches(inst.model.num_micro_batches, D)


def region_pure(inst: Instance, D: int, P: int):
    """As many replicas as fit entirely inside one region (fastest GPUs of each
    region, regions by speed), the rest filled from what is left in site order."""
    a = inst.arrays
    order = _site_order(inst)
    rows: list[list[int]] = []
    used: set[int] = set()
    for r in dict.fromkeys(a.region[g] for g in order):
        mine = [g for g in order if a.region[g] == r]
        while len(mine) >= P and len(rows) < D:
            rows.append(mine[:P])
            used.update(mine[:P])
            mine = mine[P:]
    rest = [g for g in order if g not in used]
    while len(rows) < D:
        rows.append(rest[:P])
        rest = rest[P:]
    return _finish(inst, np.array(rows, dtype=np.int64))


def node_mixed(inst: Instance, D: int, P: int):
    """Node-mates as neighbouring stages, spread evenly over the replicas. T is set
    by the slowest replica, so rather than some pipelines inside a node and others
    across slow links, every pipeline gets the same share of fast intra-node hops:
    each node's devices are cut into chunks of about (devices on shared nodes) / D,
    and the chunks are dealt to the replicas, largest first, into the emptiest."""
    order = _site_order(inst)[: D * P]
    node = [inst.devices[g].node for g in order]
    groups: list[list[int]] = []
    for g, nd in zip(order, node):       # site order keeps node-mates together
        if groups and inst.devices[groups[-1][0]].node == nd:
            groups[-1].append(g)
        else:
            groups.append([g])
    shared = sum(len(gr) for gr in groups if len(gr) > 1)
    c = max(1, -(-shared // D))
    chunks: list[list[int]] = []
    for gr in groups:
        k = -(-len(gr) // c)
        chunks += [list(part) for part in np.array_split(np.array(gr, dtype=np.int64), k)]
    pos = {g: i for i, g in enumerate(order)}
    rows: list[list[list[int]]] = [[] for _ in range(D)]
    room = [P] * D
    for ch in sorted(chunks, key=lambda ch: (-len(ch), pos[ch[0]])):
        ch = [int(g) for g in ch]
        while ch:
            k = max(range(D), key=lambda r: (room[r] >= len(ch), room[r], -len(rows[r]), -r))
            take = ch[: room[k]]
            rows[k].append(take)
            room[k] -= len(take)
            ch = ch[len(take):]
    region = inst.arrays.region
    grid = []
    for r in rows:
        seq: list[int] = []
        by_region: dict[int, list[list[int]]] = {}
        for part in sorted(r, key=lambda part: pos[part[0]]):
            by_region.setdefault(int(region[part[0]]), []).append(part)
        for parts in by_region.values():     # regions stay contiguous, in site order
            seq += [g for part in _interleave(parts) for g in part]
        grid.append(seq)
    return _finish(inst, np.array(grid, dtype=np.int64))


def _interleave(parts: list[list[int]]) -> list[list[int]]:
    """Single devices at the ends and between the node chunks: a stage between two
    slow links waits on both (the exposed communication of both its neighbours),
    so no stage should have two while another has none."""
    singles = [p for p in parts if len(p) == 1]
    multis = [p for p in parts if len(p) > 1]
    slots: list[list[list[int]]] = [[] for _ in range(len(multis) + 1)]
    order = [0, len(slots) - 1] + list(range(1, len(slots) - 1))   # ends first
    for i, single in enumerate(singles):
        slots[order[i % len(slots)]].append(single)
    out: list[list[int]] = []
    for i, slot in enumerate(slots):
        out += slot
        if i < len(multis):
            out.append(multis[i])
    return out


def memory_aware(inst: Instance, D: int, P: int):
    """Largest memory first, stage j on the j-th group of D devices."""
    a = inst.arrays
    order = np.argsort(-a.mem_cap, kind="stable")[: D * P]
    grid = order.reshape(P, D).T.copy()
    mb = split_micro_batches(inst.model.num_micro_batches, D)
    caps = [float(c) for c in a.mem_cap[grid].min(axis=0)]
    cuts = greedy_memory_cuts(inst, caps, max(mb), D, [float(s) for s in a.act_scale[grid].max(axis=0)])
    return grid, (np.array(cuts, dtype=np.int64) if cuts else _cuts_for(inst, grid, mb)), mb


def component_plans(inst: Instance, per_tier: int = 3, fractions: tuple[float, ...] = (1.0, 0.75, 0.5),
                    stop: Callable[[], bool] | None = None):
    """Plans that stay inside one fast component of the network: for each tier of
    link speed (bounds.link_tiers), its ``per_tier`` components of most compute,
    and in each every feasible P with D = fraction * (size // P) replicas, devices
    in site order. On a large pool the best plan often uses one region (or one
    node group) and no WAN link at all; the shape grid of ``seed_shapes`` over the
    whole pool rarely lands on such a shape, and its site order fills a shape
    past the best region into the next one. ``stop()`` true: the plans built so far
    (at hundreds of GPUs there are hundreds, a second of work)."""
    from geotrain_opt.problem.tiers import link_tiers
    a = inst.arrays
    order = np.array(_site_order(inst), dtype=np.int64)
    most_D: dict[int, int] = {}
    for D, P in feasible_shapes(inst):
        most_D[P] = max(D, most_D.get(P, 0))
    seen: set[bytes] = set()
    out = []
    for lab in link_tiers(inst).labels:
        if len(np.unique(lab)) == 1:
            break                      # the whole pool: the shape grid covers it
        power = np.bincount(lab, weights=a.speed)
        for c in np.argsort(-power, kind="stable")[:per_tier]:
            members = order[lab[order] == c]
            key = np.sort(members).tobytes()
            if len(members) < 2 or key in seen:
                continue
            seen.add(key)
            for P, D_max in sorted(most_D.items()):
                top = min(len(members) // P, D_max)
                if stop is not None and out and stop():
                    return out
                for D in sorted({max(1, int(f * top)) for f in fractions} if top else set()):
                    out.append(_finish(inst, members[: D * P].reshape(D, P)))
    return out


def polish_cuts(inst: Instance, ev, grid: np.ndarray, cuts: np.ndarray, mb, rounds: int = 60):
    """Hill-climb the cuts of one plan: every move of one cut by 1 or 2 layers,
    evaluated in one batch, the best taken while it improves the primary objective.
    Constructive cuts follow speeds only; the slow links a grid has (their exposed
    communication in the rows beside them, the rings' heaviest stage) move the best
    cut, often by several layers. Returns (cuts, value); value inf if unacceptable."""
    P = len(cuts) - 1
    grid, mb = np.asarray(grid, dtype=np.int64), np.asarray(mb, dtype=np.int64)

    def values(cs: np.ndarray) -> np.ndarray:
        r = ev(np.repeat(grid[None], len(cs), 0), cs, np.repeat(mb[None], len(cs), 0))
        return _primary(inst, r)
    cur = np.asarray(cuts, dtype=np.int64)
    best = float(values(cur[None])[0])
    def moves(pairs: bool) -> np.ndarray:
        """Every cut moved by 1 or 2 layers; with ``pairs``, every two cuts by 1 each
        (a layer handed across a stage: single moves stall where the rows beside a
        slow link and the heaviest ring pull one cut each way)."""
        out = []
        steps = [((j, d),) for j in range(1, P) for d in (-2, -1, 1, 2)]
        if pairs:
            steps = [((i, di), (j, dj)) for i in range(1, P) for j in range(i + 1, P) for di in (-1, 1) for dj in (-1, 1)]
        for step in steps:
            c = cur.copy()
            for j, d in step:
                c[j] += d
            if np.all(np.diff(c) > 0):
                out.append(c)
        return np.array(out, dtype=np.int64).reshape(-1, P + 1)
    pairs = False
    for _ in range(rounds if P > 1 else 0):
        cs = moves(pairs)
        v = values(cs) if len(cs) else np.array([np.inf])
        i = int(np.argmin(v))
        if not v[i] < best * (1 - IMPROVE_RTOL):
            if pairs or P > 16:
                break
            pairs = True
            continue
        cur, best, pairs = cs[i], float(v[i]), False
    return cur, best


CONSTRUCTORS = {"fastest-first": fastest_first, "region-packed": region_packed, "site-groups": site_groups,
                "region-pure": region_pure, "node-mixed": node_mixed, "memory-aware": memory_aware,
                "stage-regions": stage_regions, "stage-regions-even": stage_regions_even}


def seed_shapes(inst: Instance, limit: int = 40) -> list[tuple[int, int]]:
    """A spread of (D, P) shapes: all of them on small instances, a grid of them on large ones."""
    shapes = feasible_shapes(inst)
    if len(shapes) <= limit:
        return shapes
    Ps = sorted({P for _, P in shapes})
    pick_P = sorted({Ps[int(round(i * (len(Ps) - 1) / 7))] for i in range(8)})
    out = []
    for P in pick_P:
        Ds = sorted(D for D, p in shapes if p == P)
        idx = sorted({int(round(i * (len(Ds) - 1) / 4)) for i in range(5)})
        out += [(Ds[i], P) for i in idx]
    return out[:limit] if len(out) > limit else out


def full_shapes(inst: Instance) -> list[tuple[int, int]]:
    """For every pipeline depth P, the shape with the most replicas: the shapes that use
    (nearly) every unit, which a spread of shapes samples only at a few depths."""
    most: dict[int, int] = {}
    for D, P in feasible_shapes(inst):
        most[P] = max(most.get(P, 0), D)
    return [(D, P) for P, D in sorted(most.items())]
