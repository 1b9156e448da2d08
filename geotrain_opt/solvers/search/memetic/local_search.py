"""Local search applied to offspring: the 'memetic' part.

Neighbourhoods, each evaluated as one numpy batch per step:

* ``cuts``: best cut vector for the genome's grid and split; every cut vector
  when there are at most ``CUT_ENUM_LIMIT`` of them (exact), else steepest
  descent over moves of one cut by up to two layers;
* ``grid``: swap two selected devices or swap a selected and an unused one,
  first improving batch wins (a random sample of the pairs on large instances);
* ``split`` (free split): move one micro-batch between replicas;
* ``region``: pull a pipeline into its main region by replacing its off-region
  devices with the fastest unused devices of that region;
* ``order``: reorder whole stage groups (swap two columns of the grid, with or
  without their layer counts, or reverse a run of them: 2-opt on the pipeline)
  and whole replicas (reverse a run of rows: 2-opt on the data-parallel ring).
  Device swaps cannot reach these plans one step at a time, and the good plans of
  geo-distributed instances differ exactly there (which site holds which stage,
  in which ring order);
* ``clocks`` (§10): every other clock of every selected device, the best kept;
* ``choice`` (§11): every other micro-batch size and recomputation for the same
  devices and cuts, the best kept.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt import decisions
from geotrain_opt.solvers.search.memetic.encoding import Genome

CUT_ENUM_LIMIT = 2000   # C(23, 3) = 1771: every 4-stage cut of a 24-layer model
GRID_SAMPLE = 96


def _better(fit: Fitness, key: tuple[float, float], ref: tuple[float, float]) -> bool:
    return objmod.better(fit.obj, key, ref)


def _best_of(fit: Fitness, g: Genome, grids, cuts, mb):
    """The best of candidate plans of ``g``'s shape; each device keeps g's clock (§10).
    No candidate (one GPU: no pair to swap) is g itself, which no move improves on."""
    if len(grids) == 0:
        return -1, g.key, g.te, g.feasible
    p, s, T, E, ok = fit.keys_of(g.D, g.P, grids, cuts, mb, **g.arrays(grids))
    pmin = p.min()
    ties = np.flatnonzero(p <= pmin * (1 + objmod.TIE_RTOL))
    i = int(ties[np.argmin(s[ties])])
    return i, (float(p[i]), float(s[i])), (float(T[i]), float(E[i])), bool(ok[i])


def _accept(g: Genome, i, key, te, ok, grid=None, cuts=None, mb=None) -> None:
    if grid is not None:
        used = grid.reshape(-1)
        rest = np.array([d for d in g.order.tolist() if d not in set(used.tolist())], dtype=np.int64)
        g.order = np.concatenate([used, rest])
    if cuts is not None:
        g.cuts = np.asarray(cuts, dtype=np.int64).copy()
    g.key, g.te, g.feasible = key, te, ok


def all_cut_vectors(L: int, P: int) -> np.ndarray:
    return np.array([[0, *c, L] for c in itertools.combinations(range(1, L), P - 1)], dtype=np.int64)


def optimize_cuts(fit: Fitness, g: Genome, rng: np.random.Generator, stop=lambda: False) -> bool:
    L, P, D = fit.inst.model.layers, g.P, g.D
    if P == 1:
        return False
    fit([g])
    start = g.key
    if math.comb(L - 1, P - 1) <= CUT_ENUM_LIMIT:
        cand = all_cut_vectors(L, P)
        n = len(cand)
        i, key, te, ok = _best_of(fit, g, np.broadcast_to(g.grid, (n, D, P)), cand,
                                  np.broadcast_to(g.mb, (n, D)))
        if _better(fit, key, g.key):
            _accept(g, i, key, te, ok, cuts=cand[i])
        return g.key != start
    for _ in range(2 * P):
        if stop():
            break
        moves = []
        for j in range(1, P):
            for step in (-2, -1, 1, 2):
                c = g.cuts.copy()
                c[j] += step
                if c[j - 1] < c[j] < c[j + 1]:
                    moves.append(c)
            # block shifts: cuts j..k move together, which single moves cannot do
            # when each one alone makes some stage the new bottleneck
            for k in range(j + 1, P):
                for step in (-1, 1):
                    c = g.cuts.copy()
                    c[j:k + 1] += step
                    if c[j - 1] < c[j] and c[k] < c[k + 1]:
                        moves.append(c)
        cand = np.array(moves)
        n = len(cand)
        i, key, te, ok = _best_of(fit, g, np.broadcast_to(g.grid, (n, D, P)), cand,
                                  np.broadcast_to(g.mb, (n, D)))
        if not _better(fit, key, g.key):
            break
        _accept(g, i, key, te, ok, cuts=cand[i])
    return g.key != start


def grid_moves(fit: Fitness, g: Genome, rng: np.random.Generator, stop=lambda: False, rounds: int = 6) -> bool:
    n, D, P = fit.inst.n, g.D, g.P
    m = D * P
    fit([g])
    start = g.key
    total = m * (n - 1) - m * (m - 1) // 2     # pairs (i < j) with i selected
    for _ in range(rounds):
        if stop():
            break
        if total <= GRID_SAMPLE:
            pairs = [(i, j) for i in range(m) for j in range(i + 1, n)]
        else:   # sample without listing all pairs (1,024 GPUs: ~500k of them)
            i = rng.integers(0, m, GRID_SAMPLE)
            j = rng.integers(0, n - 1, GRID_SAMPLE)
            j = j + (j >= i)
            pairs = list(zip(i.tolist(), j.tolist()))
        orders = np.repeat(g.order[None, :], len(pairs), axis=0)
        for r, (i, j) in enumerate(pairs):
            orders[r, [i, j]] = orders[r, [j, i]]
        grids = orders[:, :m].reshape(-1, D, P)
        i, key, te, ok = _best_of(fit, g, grids, np.broadcast_to(g.cuts, (len(pairs), P + 1)),
                                  np.broadcast_to(g.mb, (len(pairs), D)))
        if not _better(fit, key, g.key):
            break
        g.order = orders[i].copy()
        g.key, g.te, g.feasible = key, te, ok
    return g.key != start


def region_moves(fit: Fitness, g: Genome, rng: np.random.Generator, stop=lambda: False) -> bool:
    a = fit.inst.arrays
    D, P = g.D, g.P
    fit([g])
    start = g.key
    grid = g.grid
    unused = [d for d in g.order[D * P:].tolist()]
    cands = []
    for k in range(D):
        regions, counts = np.unique(a.region[grid[k]], return_counts=True)
        if len(regions) == 1:
            continue
        main = regions[np.argmax(counts)]
        pool = sorted((d for d in unused if a.region[d] == main), key=lambda d: -a.speed[d])
        cand = grid.copy()
        for j in range(P):
            if a.region[cand[k, j]] != main and pool:
                cand[k, j] = pool.pop(0)
        if not np.array_equal(cand, grid):
            cands.append(cand)
    if not cands:
        return False
    grids = np.stack(cands)
    i, key, te, ok = _best_of(fit, g, grids, np.broadcast_to(g.cuts, (len(cands), P + 1)),
                              np.broadcast_to(g.mb, (len(cands), D)))
    if _better(fit, key, g.key):
        _accept(g, i, key, te, ok, grid=grids[i])
    return g.key != start


def order_moves(fit: Fitness, g: Genome, rng: np.random.Generator, stop=lambda: False) -> bool:
    D, P = g.D, g.P
    if D * P == 1:
        return False
    fit([g])
    start = g.key
    for _ in range(max(D, P)):
        if stop():
            break
        grid, cuts = g.grid, g.cuts
        sizes = np.diff(cuts)
        grids, cutv = [], []
        for i, j in itertools.combinations(range(P), 2):
            perm = list(range(P))
            perm[i], perm[j] = j, i
            rev = list(range(i)) + list(range(j, i - 1, -1)) + list(range(j + 1, P))
            for order in (perm, rev):
                grids += [grid[:, order], grid[:, order]]
                cutv += [cuts, np.concatenate([[0], np.cumsum(sizes[order])])]    # layers stay or move along
        for i, j in itertools.combinations(range(D), 2):
            rows = list(range(i)) + list(range(j, i - 1, -1)) + list(range(j + 1, D))
            grids.append(grid[rows])
            cutv.append(cuts)
        G, C = np.stack(grids), np.stack(cutv).astype(np.int64)
        k, key, te, ok = _best_of(fit, g, G, C, np.broadcast_to(g.mb, (len(G), D)))
        if not _better(fit, key, g.key):
            break
        _accept(g, k, key, te, ok, grid=G[k], cuts=C[k])
    return g.key != start


def split_moves(fit: Fitness, g: Genome, rng: np.random.Generator, stop=lambda: False) -> bool:
    """Free split: move one micro-batch between two replicas, steepest descent."""
    if fit.inst.options.batch_split != "free" or g.D == 1:
        return False
    fit([g])
    start = g.key
    D, P = g.D, g.P
    for _ in range(int(g.mb.sum())):      # M of the genome's micro-batch size
        if stop():
            break
        cand = []
        for x in range(D):
            for y in range(D):
                if x != y and g.mb[x] > 1:
                    m = g.mb.copy()
                    m[x] -= 1
                    m[y] += 1
                    cand.append(m)
        if not cand:
            break
        mbs = np.array(cand)
        i, key, te, ok = _best_of(fit, g, np.broadcast_to(g.grid, (len(mbs), D, P)),
                                  np.broadcast_to(g.cuts, (len(mbs), P + 1)), mbs)
        if not _better(fit, key, g.key):
            break
        g.mb = mbs[i].copy()
        g.key, g.te, g.feasible = key, te, ok
    return g.key != start


# the plan's own neighbourhoods, then every decision's (decisions.DECISIONS)
LOCAL_SEARCHES = {"cuts": optimize_cuts, "grid": grid_moves, "region": region_moves, "order": order_moves,
                  "split": split_moves, **decisions.moves()}


def local_search(fit: Fitness, g: Genome, rng: np.random.Generator,
                 moves=("region", "grid", "order", "cuts", "split", "clocks", "choice"),
                 stop=lambda: False) -> Genome:
    """Apply the neighbourhoods in turn until none improves (at most three passes);
    ``stop()`` (deadline, evaluation budget) is polled between steps."""
    for _ in range(3):
        improved = False
        for name in moves:
            if stop():
                return g
            improved |= LOCAL_SEARCHES[name](fit, g, rng, stop=stop)
        if not improved:
            break
    return g
