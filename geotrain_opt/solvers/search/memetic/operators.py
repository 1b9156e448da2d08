"""Variation operators on genomes, registered by name in the memetic toolbox.

Every operator returns a genome that decodes to a structurally valid plan
(distinct devices, valid cuts, a split that sums to M and obeys ``uniform``).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from geotrain_opt.problem.instance import Instance
from geotrain_opt import decisions
from geotrain_opt.construct.pieces import shape_ok
from geotrain_opt.solvers.search.memetic.encoding import Genome, default_split
from geotrain_opt.construct.heuristics import speed_cuts


def fresh_cuts(inst: Instance, g: Genome) -> np.ndarray:
    vi = g.instance(inst)
    return speed_cuts(vi, vi.arrays.speed[g.grid].min(axis=0))


def repair(inst: Instance, D: int, P: int, grid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Order with ``grid`` on top, duplicates replaced by unused devices of the same
    region when there is one (keeps pipelines region-coherent), else the fastest."""
    a = inst.arrays
    flat = grid.reshape(-1).copy()
    seen: set[int] = set()
    dup_pos = []
    for i, g in enumerate(flat.tolist()):
        if g in seen:
            dup_pos.append(i)
        seen.add(g)
    free = np.argsort(-a.speed, kind="stable")          # unused devices, fastest first
    unused = np.ones(len(free), dtype=bool)
    unused[list(seen)] = False
    free = free[unused[free]]
    # per region, the positions in ``free`` of its devices (fastest first); a pick is the
    # region's first position not taken, else the first not taken at all (O(n) in all:
    # a scan of the free list per duplicate took seconds at 4,096 GPUs)
    taken = np.zeros(len(free), dtype=bool)
    by_region: dict[int, deque] = {}
    for pos, r in enumerate(a.region[free].tolist()):
        by_region.setdefault(r, deque()).append(pos)
    head = 0
    for i in dup_pos:
        q = by_region.get(int(a.region[flat[i]]))
        while q and taken[q[0]]:
            q.popleft()
        if q:
            pos = q.popleft()
        else:
            while taken[head]:
                head += 1
            pos = head
        taken[pos] = True
        flat[i] = free[pos]
    rest = free[~taken].astype(np.int64)
    rng.shuffle(rest)
    return np.concatenate([flat, rest]).astype(np.int64)


# ------------------------------------------------------------------ crossover
def cx_replicas(inst: Instance, p1: Genome, p2: Genome, rng: np.random.Generator) -> Genome:
    """Child keeps p1's shape; each replica (a whole pipeline, often region-coherent)
    comes from p1 or, when the stage counts match, from a random replica of p2."""
    D, P = p1.D, p1.P
    rows = p1.grid.copy()
    if p2.P == P:
        for k in range(D):
            if rng.random() < 0.5:
                rows[k] = p2.grid[rng.integers(p2.D)]
    cuts = (p2.cuts if p2.P == P and rng.random() < 0.5 else p1.cuts).copy()
    # a split sums to its own instance's M (a micro-batch choice, §11): p2's only where
    # the two are costed on the same instance
    mb = (p2.mb if p2.D == D and rng.random() < 0.5 and p2.batch_key() == p1.batch_key() else p1.mb).copy()
    return Genome(D, P, repair(inst, D, P, rows, rng), cuts, mb, genes=p1.inherit())


def cx_stages(inst: Instance, p1: Genome, p2: Genome, rng: np.random.Generator) -> Genome:
    """Same shape only: each stage column (its all-reduce ring) from either parent."""
    if (p1.D, p1.P) != (p2.D, p2.P):
        return cx_replicas(inst, p1, p2, rng)
    cols = p1.grid.copy()
    for j in range(p1.P):
        if rng.random() < 0.5:
            cols[:, j] = p2.grid[:, j]
    return Genome(p1.D, p1.P, repair(inst, p1.D, p1.P, cols, rng), p1.cuts.copy(), p1.mb.copy(),
                  genes=p1.inherit())


# ------------------------------------------------------------------ mutations
def mut_swap(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """Two selected devices trade places (pipeline neighbours or ring members change)."""
    m = g.D * g.P
    if m >= 2:
        i, j = rng.choice(m, 2, replace=False)
        g.order[[i, j]] = g.order[[j, i]]
    return g


def mut_replace(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """A selected device is released and an unused one takes its slot."""
    m = g.D * g.P
    if m < inst.n:
        i, j = rng.integers(m), rng.integers(m, inst.n)
        g.order[[i, j]] = g.order[[j, i]]
    return g


def mut_cut(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """Move one interior cut by one or two layers."""
    if g.P > 1:
        i = int(rng.integers(1, g.P))
        step = int(rng.choice([-2, -1, 1, 2]))
        c = g.cuts[i] + step
        if g.cuts[i - 1] < c < g.cuts[i + 1]:
            g.cuts[i] = c
    return g


def mut_split(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """Free split: one micro-batch moves from one replica to another."""
    if inst.options.batch_split == "free" and g.D > 1:
        a, b = rng.choice(g.D, 2, replace=False)
        if g.mb[a] > 1:
            g.mb[a] -= 1
            g.mb[b] += 1
    return g


def mut_shape(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """Grow or shrink D or P by one, keeping the other replicas/stages in place."""
    moves = [("P", 1), ("P", -1), ("D", 1), ("D", -1)]
    rng.shuffle(moves)
    vi = g.instance(inst)
    grid = g.grid
    unused = list(g.order[g.D * g.P:])
    for what, step in moves:
        D, P = (g.D + step, g.P) if what == "D" else (g.D, g.P + step)
        if not shape_ok(vi, D, P):
            continue
        if what == "P" and step > 0:
            if len(unused) < D:
                continue
            j = int(rng.integers(P))
            new = np.array(unused[:D])
            grid2 = np.insert(grid, j, new, axis=1)
        elif what == "P":
            j = int(rng.integers(g.P))
            grid2 = np.delete(grid, j, axis=1)
        elif step > 0:
            if len(unused) < P:
                continue
            grid2 = np.vstack([grid, np.array(unused[:P])[None, :]])
        else:
            grid2 = np.delete(grid, int(rng.integers(g.D)), axis=0)
        child = Genome(D, P, repair(inst, D, P, grid2, rng), g.cuts, default_split(vi, D), genes=g.inherit())
        child.cuts = fresh_cuts(inst, child) if P != g.P else g.cuts.copy()
        return child
    return g


def mut_reshape(inst: Instance, g: Genome, rng: np.random.Generator) -> Genome:
    """Same devices in a different (D, P): e.g. one 4-stage pipeline becomes two
    2-stage replicas. Reaches shapes that single grow/shrink steps cannot."""
    m = g.D * g.P
    vi = g.instance(inst)
    options = [(D, P) for D in range(1, m + 1) for P in range(1, m + 1)
               if (D, P) != (g.D, g.P) and m - max(2, m // 4) <= D * P <= m and shape_ok(vi, D, P)]
    if not options:
        return g
    D, P = options[int(rng.integers(len(options)))]
    child = Genome(D, P, g.order.copy(), np.zeros(P + 1, dtype=np.int64), default_split(vi, D),
                   genes=g.inherit())
    child.cuts = fresh_cuts(inst, child)
    return child


def mutation_names(inst: Instance) -> list[str]:
    """The mutations that can change a plan of this instance (none of a decision the
    instance does not offer: no clock moves without clocks, no choice moves where
    the model offers one micro-batch size and mode)."""
    idle = decisions.idle_operators(inst)
    return [name for name in MUTATIONS if name not in idle]


# the plan's own mutations, then every decision's (decisions.DECISIONS)
MUTATIONS = {"swap": mut_swap, "replace": mut_replace, "cut": mut_cut, "split": mut_split, "shape": mut_shape,
             "reshape": mut_reshape, **decisions.mutations()}
CROSSOVERS = {"replicas": cx_replicas, "stages": cx_stages}
