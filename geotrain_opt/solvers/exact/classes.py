"""Devices that can trade places in any plan without changing its cost: the units of
the class model (formulations/exact.md §3.7) and the twins whose order is fixed."""
from __future__ import annotations

from typing import Callable

import numpy as np
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.tiers import Stopped



def device_classes(inst: Instance, stop: Callable[[], bool] | None = None) -> list[list[int]]:
    """Every device in exactly one class of devices that can trade places in any
    plan without changing its cost: same speed, memory, power (PUE included) and
    region, the same links to every device outside the class, and one link, both
    ways, between any two members. Classes in order of their first member.
    Computed once per instance (every shape's model asks); a fingerprint checks
    only the classes a device can join (formulations/exact.md §3.7). ``stop()``
    (polled every 256 devices: a second in all at 4,096 GPUs) true:
    :class:`~geotrain_opt.problem.tiers.Stopped`, nothing kept."""
    cached = inst._cache.get("device_classes")
    if cached is not None:
        return [list(c) for c in cached]
    classes = _device_classes(inst, stop)
    inst._cache["device_classes"] = tuple(tuple(c) for c in classes)
    return classes


def _device_classes(inst: Instance, stop: Callable[[], bool] | None = None) -> list[list[int]]:
    a = inst.arrays
    n = inst.n
    key = [(a.speed[g], a.mem_cap[g], a.act_scale[g], a.p_busy[g], a.p_wait[g], a.region[g], inst.devices[g].price_per_hour,
            inst.devices[g].clocks) for g in range(n)]
    # host stacks (mu > 0): nodes matter, and the exposed time is a function of inv_beta and them
    mats = (a.alpha, a.inv_beta, a.exposed.node_cross) if a.mu > 0 else (a.alpha, a.inv_beta)
    # A fingerprint that members of one class share, so that only classes whose
    # head matches are checked (the check is O(n), and thousands of devices have
    # hundreds of classes): with each link as an id < p folded from its bits, and
    # random weights r < p, s_g = sum_o id[g, o] r_o; two members g, h of a class
    # whose inner link has id x differ only in columns g and h, so
    # s_g + (x - id[g, g]) r_g = s_h + (x - id[h, h]) r_h. Exact integers (p < 2^20,
    # n <= 2^12 terms stay below 2^52); equal links have equal ids, so a mismatch
    # rules a class out, and a match is checked in full.
    p = 1 << 20
    r = np.random.default_rng(0).integers(1, p, size=n, dtype=np.int64)
    prints = [(m, col, *sigs) for m in mats for col, sigs in zip((False, True), _signatures(m, r))] \
        if n <= 2 ** 12 else []
    classes: list[list[int]] = []
    heads: dict[tuple, list[int]] = {}        # key -> index of each class with that key
    for g in range(n):
        if stop is not None and g % 256 == 255 and stop():
            raise Stopped
        mine = heads.setdefault(key[g], [])
        cand = np.array([classes[c][0] for c in mine], dtype=np.int64)
        ok = np.ones(len(mine), dtype=bool)
        for m, col, sig, diag in prints:
            if len(mine):
                x = _link_ids(m[cand, g] if col else m[g, cand])
                ok &= sig[g] + (x - diag[g]) * r[g] == sig[cand] + (x - diag[cand]) * r[cand]
        for c in (mine[i] for i in np.nonzero(ok)[0]):
            cls = classes[c]
            h = cls[0]
            # the same links to every device outside the class (g and its members): the
            # rows and columns of g and h differ nowhere else (NaN differs from itself,
            # as array_equal has it)
            inside = set(cls)
            inside.add(g)
            if not all(_differ_only_at(m[g], m[h], inside) and _differ_only_at(m[:, g], m[:, h], inside)
                       for m in mats):
                continue
            # within the class every pair has the same link both ways
            pair = cls[:2] if len(cls) > 1 else [g, h]
            intra = tuple(m[pair[0], pair[1]] for m in mats)
            if all(tuple(m[g, o] for m in mats) == intra == tuple(m[o, g] for m in mats) for o in cls):
                cls.append(g)
                break
        else:
            mine.append(len(classes))
            classes.append([g])
    return classes


def _link_ids(m: np.ndarray) -> np.ndarray:
    """Each link's id below 2^20: its float64 bits folded (equal links, equal ids;
    -0.0 taken as 0.0)."""
    bits = np.add(m, 0.0, dtype=np.float64).view(np.int64)      # + 0.0: -0.0 is 0.0
    folded = bits >> 40
    folded ^= bits >> 20
    folded ^= bits
    folded &= (1 << 20) - 1
    return folded


def _signatures(m: np.ndarray, r: np.ndarray, block: int = 256) -> tuple[tuple, tuple]:
    """((row sums, diagonal), (column sums, diagonal)) of the link ids of ``m`` weighted
    by ``r``, a block of rows at a time: a whole n x n array of ids costs 0.3 s a copy
    at 4,096 GPUs, a block is reused. The sums are float64 matrix products (BLAS):
    every term and partial sum is an integer below 2^52, so they are exact."""
    n, rf = len(m), r.astype(np.float64)
    rows, cols = np.empty(n), np.zeros(n)
    for s in range(0, n, block):
        ids = _link_ids(m[s:s + block]).astype(np.float64)
        rows[s:s + block] = ids @ rf
        cols += rf[s:s + block] @ ids
    diag = _link_ids(np.diagonal(m))
    return (rows.astype(np.int64), diag), (cols.astype(np.int64), diag)


def _differ_only_at(u: np.ndarray, v: np.ndarray, allowed: set[int]) -> bool:
    """Whether u and v are equal except at indices in ``allowed`` (one vector pass)."""
    return all(int(i) in allowed for i in np.flatnonzero(u != v))


def class_twins(inst: Instance) -> list[list[int]]:
    """Groups (of two or more, in index order) of classes of :func:`device_classes`
    that trade places as wholes without changing any cost: equal size, figures,
    region and price, the same link inside each, the same link both ways between
    them and the same links to every other class (DT-FM's 8 identical nodes).
    Empty for instances with clocks, whose units are (class, clock) pairs."""
    cached = inst._cache.get("class_twins")
    if cached is not None:
        return [list(g) for g in cached]
    a = inst.arrays
    classes = device_classes(inst)
    groups: list[list[int]] = []
    if not a.has_clocks:
        key = [(len(c), a.speed[c[0]], a.mem_cap[c[0]], a.act_scale[c[0]], a.p_busy[c[0]], a.p_wait[c[0]], a.region[c[0]],
                inst.devices[c[0]].price_per_hour) for c in classes]
        mats = [_unit_links(m, classes) for m in (a.alpha, a.inv_beta, a.cross, a.exposed)]

        def twins(u: int, v: int) -> bool:
            if key[u] != key[v]:
                return False
            rest = [o for o in range(len(classes)) if o not in (u, v)]
            return all(m[u, u] == m[v, v] and m[u, v] == m[v, u] and np.array_equal(m[u, rest], m[v, rest])
                       and np.array_equal(m[rest, u], m[rest, v]) for m in mats)
        for u in range(len(classes)):
            for g in groups:
                if twins(g[0], u):
                    g.append(u)
                    break
            else:
                groups.append([u])
        groups = [g for g in groups if len(g) > 1]
    inst._cache["class_twins"] = tuple(tuple(g) for g in groups)
    return groups


def unit_order(n_units: int, twins: list[list[int]]) -> list[int]:
    """The position of each unit in the order the rotation rule compares: unit
    index, but each twin group contiguous (at its least member), which the
    validity of first-use ordering of twins needs (formulations/exact.md §3.7)."""
    lead = list(range(n_units))
    for g in twins:
        for u in g:
            lead[u] = g[0]
    ranked = sorted(range(n_units), key=lambda u: (lead[u], u))
    order = [0] * n_units
    for pos, u in enumerate(ranked):
        order[u] = pos
    return order


def interchangeable_classes(inst: Instance) -> list[list[int]]:
    """The classes of :func:`device_classes` with more than one device."""
    return [c for c in device_classes(inst) if len(c) > 1]


def _unit_links(m: np.ndarray, units: list[list[int]], unit_class: list[int] | None = None) -> np.ndarray:
    """(units, units) view of a device-pair matrix: the entry of the first members,
    and on the diagonal the entry between a class's first two members (0 for one device);
    two units of one class at different clocks (§3.8) are two members too."""
    first = [c[0] for c in units]
    out = m[np.ix_(first, first)].copy()
    for u, c in enumerate(units):
        out[u, u] = m[c[0], c[1]] if len(c) > 1 else 0.0
    if unit_class is not None and len(set(unit_class)) < len(units):
        cls = np.array(unit_class)
        same = cls[:, None] == cls[None, :]
        out[same] = np.diag(out)[np.nonzero(same)[0]]
    return out
