"""Layouts by site, for machines spread over cities: a ring per site (DT-FM's
layout, with the stages of two close sites paired) and a replica per site.

A ring per site keeps every all-reduce inside one site (or crossing once between
two close ones) while the replicas cross between sites; a replica per site keeps
every pipeline inside one while the rings cross, around the sites' minimum
spanning tree. The constructive heuristics build neither, and on world-wide
clusters they are the layouts that win. ``site_rings`` and ``site_replicas``
build the best plan of one shape, ``site_plans`` of many; the exact driver and
the memetic solver start from them (formulations/exact.md §4).
"""
from __future__ import annotations

import collections
import itertools
import math

import numpy as np

from geotrain_opt.construct.pieces import split_micro_batches
from geotrain_opt.construct.heuristics import _cuts_for, _finish, _primary, _site_order, polish_cuts
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.tolerances import IMPROVE_RTOL

FREE_SLOTS = 16          # unused slots a descent move may trade in
PAIRED_PATHS = 256       # the best paths (a ring per site) that site_rings tries with stages paired


def _matchings(P: int, most: int, limit: int) -> list[tuple[int, ...]]:
    """Sets of disjoint neighbouring stage pairs (j, j+1), named by their first
    stage j: every one with at most ``most`` pairs, fewest pairs first, at most
    ``limit`` of them."""
    out: list[tuple[int, ...]] = []
    for k in range(1, most + 1):
        for firsts in itertools.combinations(range(P - 1), k):
            if all(b - a >= 2 for a, b in zip(firsts, firsts[1:])):
                out.append(firsts)
                if len(out) >= limit:
                    return out
    return out


def _pair_up(units: tuple[tuple[int, ...], ...], firsts: tuple[int, ...]):
    """The single units j and j+1 (j in ``firsts``) as one pair."""
    out, j = [], 0
    while j < len(units):
        if j in firsts:
            out.append(units[j] + units[j + 1])
            j += 2
        else:
            out.append(units[j])
            j += 1
    return out


def _unit_grid(slots: list[list[int]], units: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The grid of a sequence of units: a unit (u,) is one stage whose ring fills
    slot u; a pair (u, v) is two stages sharing slots u and v: the first half of
    the replicas runs both in u, the other half in v. Each such ring then crosses
    between the two sites, but the replicas' link between the two stages stays
    inside one."""
    cols = []
    for unit in units:
        if len(unit) == 1:
            cols.append(slots[unit[0]])
        else:
            a, b = slots[unit[0]], slots[unit[1]]
            h = len(a) // 2
            cols += [a[:h] + b[:h], a[h:] + b[h:]]
    return np.array(cols, dtype=np.int64).T.copy()


def _unit_moves(units: tuple[tuple[int, ...], ...], n_slots: int, pairs: bool) -> list[tuple[tuple[int, ...], ...]]:
    """Every sequence one move away: two units swapped, one unit moved elsewhere,
    one slot traded for one of the first FREE_SLOTS unused ones, and (``pairs``)
    two neighbouring single units paired or a pair split, either way round, or a
    pair's halves swapped. Each keeps the number of stages."""
    U = len(units)
    used = {u for unit in units for u in unit}
    # the first unused slots only (slots come in site order, fastest sites first): at
    # thousands of devices every one would make a round take seconds
    free = [u for u in range(n_slots) if u not in used][:FREE_SLOTS]
    out: set[tuple[tuple[int, ...], ...]] = set()
    for i in range(U):
        for k in range(U):
            if k > i:
                s = list(units)
                s[i], s[k] = s[k], s[i]
                out.add(tuple(s))
            if k != i:
                s = list(units)
                s.insert(k, s.pop(i))
                out.add(tuple(s))
        for pos in range(len(units[i])):
            for f in free:
                unit = list(units[i])
                unit[pos] = f
                out.add(units[:i] + (tuple(unit),) + units[i + 1:])
        if pairs and len(units[i]) == 2:
            a, b = units[i]
            out.add(units[:i] + ((a,), (b,)) + units[i + 1:])
            out.add(units[:i] + ((b,), (a,)) + units[i + 1:])
            out.add(units[:i] + ((b, a),) + units[i + 1:])     # which half of the replicas goes where
        if pairs and i + 1 < U and len(units[i]) == len(units[i + 1]) == 1:
            a, b = units[i][0], units[i + 1][0]
            out.add(units[:i] + ((a, b),) + units[i + 2:])
            out.add(units[:i] + ((b, a),) + units[i + 2:])
    out.discard(units)
    return sorted(out)


def site_rings(inst: Instance, D: int, P: int, starts: int = 8, orders: int = 50000, polish: int = 4,
               pairs: int = 3, paired: int = 4096, rounds: int = 12, descents: int = 1, stop=None):
    """Every ring inside one site (DT-FM's layout for machines spread over cities):
    stage j's D devices from one site, a component of the lowest link tier whose
    components hold a ring (a site of 2D devices gives two stages), the sites in
    a path that goes on by the quickest hop (alpha + A/beta), from each of the
    first ``starts`` sites, or, where the sites allow at most ``orders`` paths,
    every path; the evaluator picks the path (the ``polish`` best at the
    constructive cuts, with their cuts hill-climbed). None if
    the sites cannot hold P rings. The replicas then cross between sites P-1
    times but every all-reduce stays inside one.

    With ``pairs`` > 0 (and D even) the PAIRED_PATHS best paths are also tried
    with up to that many pairs of neighbouring stages sharing their two sites
    (``_unit_grid``; at most ``paired`` such plans): between two close cities a
    ring that crosses once can cost less than every replica crossing. Then up to
    ``rounds`` steps of a descent over the sequence of units (``_unit_moves``)
    from the best plan of each kind: DT-FM Case 5's best known plan (8x6,
    Virginia with Ohio and Frankfurt with London paired) is on no path that the
    screening ranks first. ``stop()`` true ends the search with the best plan so far."""
    sites = _sites(inst, D) if D * P <= inst.n else None
    if sites is None:
        return None
    slots = [members[k * D:(k + 1) * D] for members in sites for k in range(len(members) // D)]
    if len(slots) < P:
        return None
    paths = _site_paths(inst, slots, P, starts, orders)
    pairs = pairs if D % 2 == 0 and P > 1 else 0
    singles = [tuple((u,) for u in path) for path in paths]
    if len(singles) == 1 and not pairs:
        return _finish(inst, _unit_grid(slots, singles[0]))
    search = _SiteSearch(inst, slots, D, polish)
    stop = stop or (lambda: False)
    kinds = [search.screen(singles)]
    singles_value = search.screened[0]
    if pairs and not stop():
        # the paths that are best with a ring per site, with some stages paired
        top = [singles[int(i)] for i in np.argsort(singles_value, kind="stable")[:PAIRED_PATHS]]
        firsts = _matchings(P, pairs, max(P - 1, paired // len(top)))
        kinds.append(search.screen([tuple(_pair_up(s, f)) for s in top for f in firsts]))
    best = min((k[0] for k in kinds), key=lambda x: x[0])
    for v, cuts, seq in (x for k in kinds for x in k[:descents]):    # pairs never cost a plan without
        v, cuts, seq = search.descend(v, cuts, seq, rounds, bool(pairs), stop)
        if v < best[0]:
            best = (v, cuts, seq)
    grid = _unit_grid(slots, best[2])
    return grid, np.asarray(best[1], dtype=np.int64), search.mb


def _site_paths(inst: Instance, slots: list, P: int, starts: int, orders: int) -> list[list[int]]:
    """Paths of P slots: every one where at most ``orders`` exist (the sum of hops
    misjudges the period, which the occupancies set), else from each of the first
    ``starts`` slots on by the quickest hop (alpha + A/beta)."""
    a = inst.arrays
    if math.perm(len(slots), P) <= orders:
        return [list(p) for p in itertools.permutations(range(len(slots)), P)]
    head = np.array([sl[0] for sl in slots])
    hop = a.alpha[np.ix_(head, head)] + a.A * a.inv_beta[np.ix_(head, head)]
    paths = []
    for first in range(min(starts, len(slots))):
        path = [first]
        free = np.ones(len(slots), dtype=bool)
        free[first] = False
        while len(path) < P:
            nxt = int(np.argmin(np.where(free, hop[path[-1]], np.inf)))
            path.append(nxt)
            free[nxt] = False
        paths.append(path)
    return paths


class _SiteSearch:
    """Unit sequences over the sites' slots judged by the batched evaluator, at
    their constructive cuts or given ones, with cuts hill-climbed for the best."""

    def __init__(self, inst: Instance, slots: list, D: int, polish: int) -> None:
        from geotrain_opt.cost.evaluator import BatchEvaluator
        self.inst, self.slots, self.polish = inst, slots, polish
        self.ev = BatchEvaluator(inst)
        self.mb = split_micro_batches(inst.model.num_micro_batches, D)
        self.mbs = np.array(self.mb, dtype=np.int64)
        self.known: dict[bytes, np.ndarray] = {}
        self.slot_arr = np.array(slots, dtype=np.int64)
        self.screened: list[np.ndarray] = []

    def constructive(self, g: np.ndarray) -> np.ndarray:
        """_cuts_for, which depends only on the stages' slowest speed, least memory and
        largest activation scale (§14)."""
        a = self.inst.arrays
        key = np.concatenate([a.speed[g].min(axis=0), a.mem_cap[g].min(axis=0), a.act_scale[g].max(axis=0)]).tobytes()
        if key not in self.known:
            self.known[key] = _cuts_for(self.inst, g, self.mb)
        return self.known[key]

    def values(self, seqs: list, cuts: np.ndarray | None) -> np.ndarray:
        """Each unit sequence's value at ``cuts`` (None: its constructive cuts)."""
        a = self.inst.arrays
        if all(len(u) == 1 for u in seqs[0]) and all(len(s) == len(seqs[0]) for s in seqs):
            gs = self.slot_arr[np.array(seqs, dtype=np.int64)[:, :, 0]].transpose(0, 2, 1)   # every path at once
        else:
            gs = np.array([_unit_grid(self.slots, s) for s in seqs], dtype=np.int64)
        if cuts is None:
            keys = np.concatenate([a.speed[gs].min(axis=1), a.mem_cap[gs].min(axis=1), a.act_scale[gs].max(axis=1)], axis=1)
            uniq, inv = np.unique(keys, axis=0, return_inverse=True)
            first = np.zeros(len(uniq), dtype=np.int64)
            first[inv.reshape(-1)[::-1]] = np.arange(len(gs))[::-1]
            cs = np.array([self.constructive(gs[i]) for i in first], dtype=np.int64)[inv.reshape(-1)]
        else:
            cs = np.repeat(cuts[None], len(gs), 0)
        return _primary(self.inst, self.ev(gs, cs, np.repeat(self.mbs[None], len(gs), 0)))

    def polished(self, seq, start: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """``seq``'s cuts hill-climbed from its constructive cuts and from ``start``."""
        g = _unit_grid(self.slots, seq)
        starts = [self.constructive(g)]
        if start is not None and not np.array_equal(start, starts[0]):
            starts.append(start)
        return min((polish_cuts(self.inst, self.ev, g, c, self.mb) for c in starts),
                   key=lambda cv: cv[1])

    def screen(self, seqs: list) -> list:
        """The ``polish`` best sequences, judged at their constructive cuts and at
        the best one's hill-climbed cuts (the constructive cuts misjudge the
        paths: the rows beside the slow links and the heaviest ring move the best
        cut), each with its own cuts hill-climbed: (value, cuts, sequence)."""
        value = self.values(seqs, None)
        cuts0, _v = self.polished(seqs[int(np.argmin(value))])
        value = np.minimum(value, self.values(seqs, cuts0))
        self.screened.append(value)
        out = []
        for i in np.argsort(value, kind="stable")[:self.polish]:
            cuts, v = self.polished(seqs[int(i)], cuts0)
            out.append((v, cuts, seqs[int(i)]))
        return sorted(out, key=lambda x: x[0])

    def descend(self, v: float, cuts, seq, rounds: int, pairs: bool, stop) -> tuple:
        """Up to ``rounds`` steps of a descent over the sequence of units (_unit_moves)."""
        for _ in range(rounds):
            if stop():
                break
            moves = _unit_moves(seq, len(self.slots), pairs)
            if not moves:
                break
            mv = np.minimum(self.values(moves, cuts), self.values(moves, None))
            # a move can pay only at its own cuts (a pair moves the heaviest ring): the
            # few best moves with their cuts hill-climbed when none pays at these
            tries = [(float(mv[i]), cuts, moves[int(i)]) for i in np.argsort(mv, kind="stable")[:1]]
            if not tries[0][0] < v * (1 - IMPROVE_RTOL):
                tries = [(*self.polished(moves[int(i)], cuts)[::-1], moves[int(i)])
                         for i in np.argsort(mv, kind="stable")[:self.polish]]
            v_new, _c, s_new = min(tries, key=lambda x: x[0])
            if not v_new < v * (1 - IMPROVE_RTOL):
                break
            seq = s_new
            cuts, v = self.polished(seq, cuts)
        return v, cuts, seq


def _sites(inst: Instance, size: int) -> list[list[int]] | None:
    """The components of the lowest link tier whose components hold ``size``
    devices, each as its devices in site order, in site order (fastest first);
    None if no tier's components hold that many."""
    from geotrain_opt.problem.tiers import link_tiers
    tiers = link_tiers(inst)
    y = tiers.first_fit(size)
    if y >= len(tiers.levels):
        return None
    lab = tiers.labels[y]
    sites: dict[int, list[int]] = {}
    for g in _site_order(inst):
        sites.setdefault(int(lab[g]), []).append(g)
    return list(sites.values())


def _tree_tour(sites: list[int], ib: np.ndarray) -> list[int]:
    """A ring over ``sites`` whose slowest link is the least possible: the walk
    around a minimum spanning tree (Prim, on 1/beta), each site listed once per
    tree edge at it, so a site with several replicas can be left and entered
    again (its replicas split between its visits)."""
    children: dict[int, list[int]] = {i: [] for i in sites}
    idx = np.array(sites)
    w = ib[np.ix_(idx, idx)]
    out = np.ones(len(sites), dtype=bool)
    out[0] = False
    near, via = w[0].copy(), np.zeros(len(sites), dtype=np.int64)
    for _ in range(len(sites) - 1):
        v = int(np.argmin(np.where(out, near, np.inf)))
        children[sites[int(via[v])]].append(sites[v])
        out[v] = False
        closer = out & (w[v] < near)
        near[closer], via[closer] = w[v][closer], v
    tour: list[int] = []

    def walk(u: int) -> None:
        tour.append(u)
        for v in children[u]:
            walk(v)
            tour.append(u)
    walk(sites[0])
    return tour[:-1] if len(tour) > 1 else tour


def _nearest_ring(sites: list[int], first: int, ib: np.ndarray) -> list[int]:
    """``sites`` from ``sites[first]`` on, each time to the unvisited one of the
    fastest link."""
    idx = np.array(sites)
    w = ib[np.ix_(idx, idx)]
    free = np.ones(len(sites), dtype=bool)
    ring = [first]
    free[first] = False
    for _ in range(len(sites) - 1):
        ring.append(int(np.argmin(np.where(free, w[ring[-1]], np.inf))))
        free[ring[-1]] = False
    return [sites[i] for i in ring]


def site_replicas(inst: Instance, D: int, P: int, subsets: int = 1024, starts: int = 8, polish: int = 4):
    """Every replica inside one site, the all-reduce rings across the sites (the
    layout the other way round from ``site_rings``): a site (a component of the
    lowest tier that holds a replica) holds len // P replicas, its P-device
    slots in site order. The sites are a set that holds D replicas and needs
    each of its sites, every such set where there are at most ``subsets``, else
    the sets grown from each of the first ``starts`` sites by the site whose
    slowest link to the set is fastest; one of its (last ``starts``) sites gives
    fewer than all its replicas. The replicas follow the walk around the set's
    minimum spanning tree (``_tree_tour``; every ring's slowest link is then the
    least any ring over those sites can have, where each site has a replica per
    visit) or a nearest-neighbour ring from each of its first ``starts`` sites.
    The evaluator picks (the ``polish`` best with their cuts hill-climbed). None if the sites cannot hold D replicas. On
    DT-FM Case 5-2 (cities of 4-13 machines) it avoids Tokyo and Seoul, whose
    links to the others are the slowest, for 16x3 at 31.2459 s."""
    sites = _sites(inst, P) if D * P <= inst.n else None
    if sites is None:
        return None
    a = inst.arrays
    cap = np.array([len(m) // P for m in sites])
    if cap.sum() < D or D < 2:
        return None
    head = [m[0] for m in sites]
    ib = a.inv_beta[np.ix_(head, head)]
    S = len(sites)
    held = [i for i in range(S) if cap[i] > 0]
    if 2 ** len(held) <= subsets:
        sets = [c for k in range(1, len(held) + 1) for c in itertools.combinations(held, k)
                if cap[list(c)].sum() >= D and all(cap[list(c)].sum() - cap[i] < D for i in c)]
    else:
        sets = []
        for first in held[:starts]:
            chosen, worst = [first], ib[first].copy()
            worst[[i for i in range(S) if cap[i] == 0] + [first]] = np.inf
            while cap[chosen].sum() < D:
                nxt = int(np.argmin(worst))
                chosen.append(nxt)
                worst = np.maximum(worst, ib[nxt])
                worst[nxt] = np.inf
            sets.append(tuple(chosen))
    grids = set()
    for c in sets:
        for partial in c[-starts:]:     # the site that gives fewer than all its replicas
            n = {i: int(cap[i]) for i in c}
            n[partial] -= int(cap[list(c)].sum()) - D
            if n[partial] <= 0:
                continue
            # the tree walk where each site has a replica per visit, and nearest-
            # neighbour rings (each site visited once) from every site
            tours = [_tree_tour(list(c), ib)] + [_nearest_ring(list(c), k, ib) for k in range(min(starts, len(c)))]
            for tour in tours:
                visits = collections.Counter(tour)
                if any(n[i] < visits[i] for i in c):
                    continue
                taken = {i: 0 for i in c}
                rows = []
                for i in tour:
                    k = n[i] - visits[i] + 1 if taken[i] == 0 else 1
                    rows += [sites[i][(taken[i] + q) * P:(taken[i] + q + 1) * P] for q in range(k)]
                    taken[i] += k
                grids.add(tuple(map(tuple, rows)))
    if not grids:
        return None
    from geotrain_opt.cost.evaluator import BatchEvaluator
    ev = BatchEvaluator(inst)
    mb = split_micro_batches(inst.model.num_micro_batches, D)
    gs = [np.array(g, dtype=np.int64) for g in sorted(grids)]
    cuts = [_cuts_for(inst, g, mb) for g in gs]
    value = _primary(inst, ev(np.array(gs), np.array(cuts), np.repeat(np.array(mb)[None], len(gs), 0)))
    best, best_value = None, np.inf
    for i in np.argsort(value, kind="stable")[:polish]:
        c, v = polish_cuts(inst, ev, gs[int(i)], cuts[int(i)], mb)
        if v < best_value or best is None:
            best, best_value = (gs[int(i)], c, mb), v
    return best


def site_plans(shapes: list[tuple[Instance, int, int]], keep: int = 2,
               stop=lambda: False) -> list[tuple[float, int, tuple]]:
    """The two site layouts over many shapes (instance, D, P), at a fraction of
    ``site_rings``' full cost: its quick form (greedy paths, one plan polished,
    no descent) and ``site_replicas`` at every shape with D > 1, then the full
    form of ``site_rings`` at the ``keep`` shapes whose quick plan is best.
    Returns (value, index into ``shapes``, plan) of the ``keep`` best of each
    layout and of the full ones, best first; ``stop()`` ends it early (and cuts
    a running site_rings short: it returns its best plan so far)."""
    from geotrain_opt.cost.evaluator import BatchEvaluator

    def scored(i: int, built) -> tuple[float, int, tuple]:
        inst = shapes[i][0]
        r = BatchEvaluator(inst)(*(np.asarray(x, dtype=np.int64)[None] for x in built))
        return float(_primary(inst, r)[0]), i, built
    rings, replicas = [], []
    for i, (inst, D, P) in enumerate(shapes):
        if stop():
            break
        if D > 1:
            for found, built in ((rings, site_rings(inst, D, P, orders=120, polish=1, rounds=0, paired=128, stop=stop)),
                                 (replicas, site_replicas(inst, D, P))):
                if built is not None:
                    found.append(scored(i, built))
    rings.sort(key=lambda x: (x[0], x[1]))
    replicas.sort(key=lambda x: (x[0], x[1]))
    out = rings[:keep] + replicas[:keep]
    for _v, i, _b in rings[:keep]:
        if stop():
            break
        inst, D, P = shapes[i]
        out.append(scored(i, site_rings(inst, D, P, stop=stop)))
    return sorted(out, key=lambda x: (x[0], x[1]))
