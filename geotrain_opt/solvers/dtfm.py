"""Baseline after the scheduler of "Decentralized Training of Foundation Models in
Heterogeneous Environments" (Yuan et al., NeurIPS 2022), re-implemented here.

DT-FM uses every GPU and a uniform layer partition, and chooses which GPUs form
each stage's data-parallel group and in which order the groups form the
pipeline, by its own communication cost model:

* data-parallel cost of a group: ring all-reduce of the stage's gradients over
  the group's slowest link (all pairs considered, as DT-FM does);
* pipeline cost between two groups: devices matched one-to-one (assignment on
  latency + activation transfer time), the matched pairs' worst link;
* pipeline order: an open-loop travelling-salesman path over the groups.

The partition into groups is searched by an evolutionary algorithm with local
search (swap two devices between groups). D x P is given (``extra["shape"]``) or
enumerated over the shapes that use every GPU. The resulting plan (matched
devices form the replicas, uniform cuts, even split) is then evaluated on this
project's cost model like every other solver's.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..construct import split_micro_batches, uniform_cuts
from ..instance import Instance
from ..plan import Plan
from ..result import SolverResult
from .base import Deadline, Incumbent, SolveOptions, finish
from .baselines import all_gpu_shapes


class CommModel:
    def __init__(self, inst: Instance, D: int, P: int) -> None:
        a = inst.arrays
        self.a, self.D, self.P = a, D, P
        n_stage = (a.par_prefix[-1] + a.emb_params + a.head_params) / P
        self.grad = 2.0 * (D - 1) / D * a.grad_bytes * n_stage if D > 1 else 0.0
        self.link = a.alpha + a.A * a.inv_beta          # one pipeline hop

    def dp_cost(self, group: np.ndarray) -> float:
        if self.D == 1:
            return 0.0
        sub = np.ix_(group, group)
        off = ~np.eye(len(group), dtype=bool)
        return float(self.grad * self.a.inv_beta[sub][off].max() + 2 * (self.D - 1) * self.a.alpha[sub][off].max())

    def match(self, g1: np.ndarray, g2: np.ndarray) -> tuple[float, np.ndarray]:
        c = self.link[np.ix_(g1, g2)]
        r, col = linear_sum_assignment(c)
        return float(c[r, col].max()), col

    def pipeline(self, groups: list[np.ndarray]) -> tuple[float, list[int]]:
        P = len(groups)
        if P == 1:
            return 0.0, [0]
        W = np.zeros((P, P))
        for i in range(P):
            for j in range(P):
                if i != j:
                    W[i, j] = self.match(groups[i], groups[j])[0]
        return tsp_path(W)

    def cost(self, groups: list[np.ndarray]) -> float:
        pp, _ = self.pipeline(groups)
        return max(self.dp_cost(g) for g in groups) + pp


def tsp_path(W: np.ndarray) -> tuple[float, list[int]]:
    """Cheapest open path visiting every node: Held-Karp up to 12 nodes, else
    nearest neighbour from every start followed by 2-opt."""
    P = len(W)
    if P <= 12:
        best: dict[tuple[int, int], tuple[float, list[int]]] = {}
        for j in range(P):
            best[(1 << j, j)] = (0.0, [j])
        for size in range(2, P + 1):
            for subset in itertools.combinations(range(P), size):
                mask = sum(1 << s for s in subset)
                for j in subset:
                    prev = mask ^ (1 << j)
                    best[(mask, j)] = min(((best[(prev, k)][0] + W[k, j], best[(prev, k)][1] + [j])
                                           for k in subset if k != j and (prev, k) in best), key=lambda t: t[0])
        full = (1 << P) - 1
        return min((best[(full, j)] for j in range(P)), key=lambda t: t[0])
    out = None
    for s in range(P):
        path, left = [s], set(range(P)) - {s}
        while left:
            nxt = min(left, key=lambda j: W[path[-1], j])
            path.append(nxt)
            left.remove(nxt)
        improved = True
        while improved:
            improved = False
            for i in range(1, P - 1):
                for k in range(i + 1, P):
                    cand = path[:i] + path[i:k + 1][::-1] + path[k + 1:]
                    if _len(W, cand) < _len(W, path) - 1e-15:
                        path, improved = cand, True
        cost = _len(W, path)
        if out is None or cost < out[0]:
            out = (cost, path)
    return out


def _len(W: np.ndarray, path: list[int]) -> float:
    return float(sum(W[a, b] for a, b in zip(path, path[1:])))


def _decode(model: CommModel, groups: list[np.ndarray]) -> np.ndarray:
    """Grid (D, P): groups in pipeline order, replicas along the matchings."""
    _, order = model.pipeline(groups)
    cols = [groups[order[0]].copy()]
    for j in order[1:]:
        _, col = model.match(cols[-1], groups[j])
        cols.append(groups[j][col])
    return np.stack(cols, axis=1)


def search(inst: Instance, D: int, P: int, rng: np.random.Generator, deadline: Deadline, seconds: float,
           pop_size: int = 12) -> list[np.ndarray]:
    model = CommModel(inst, D, P)
    n = D * P
    a = inst.arrays
    region_sorted = np.argsort(a.region * 10**6 - a.speed / a.speed.max(), kind="stable")[:n]
    pop = [list(np.array_split(region_sorted, P))]
    while len(pop) < pop_size:
        pop.append(list(np.array_split(rng.permutation(inst.n)[:n], P)))
    scored = [(model.cost(g), g) for g in pop]
    stop_at = deadline.elapsed + seconds
    while deadline.elapsed < stop_at and not deadline.expired:
        scored.sort(key=lambda t: t[0])
        parent = scored[int(rng.integers(min(4, len(scored))))][1]
        child = [g.copy() for g in parent]
        for _ in range(int(rng.integers(1, 3))):             # mutation: swap across groups
            if P > 1:
                i, j = rng.choice(P, 2, replace=False)
                x, y = rng.integers(D), rng.integers(D)
                child[i][x], child[j][y] = child[j][y], child[i][x]
        c = model.cost(child)
        for _ in range(8):                                   # local search: first improving swap
            if P < 2 or deadline.elapsed >= stop_at:
                break
            i, j = rng.choice(P, 2, replace=False)
            x, y = rng.integers(D), rng.integers(D)
            trial = [g.copy() for g in child]
            trial[i][x], trial[j][y] = trial[j][y], trial[i][x]
            tc = model.cost(trial)
            if tc < c:
                child, c = trial, tc
        scored[-1] = (c, child)
    scored.sort(key=lambda t: t[0])
    return scored[0][1]


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    deadline = Deadline(opts.time_limit_s)
    rng = np.random.default_rng(opts.seed)
    shapes = [tuple(opts.extra["shape"])] if "shape" in opts.extra else all_gpu_shapes(inst)
    M, L = inst.model.num_micro_batches, inst.model.layers
    inc = Incumbent(inst)
    from ..evaluator import evaluate
    for i, (D, P) in enumerate(shapes):
        if deadline.expired:
            break
        groups = search(inst, D, P, rng, deadline, deadline.remaining / (len(shapes) - i))
        grid = _decode(CommModel(inst, D, P), groups)
        plan = Plan.from_indices(inst.ids, grid, uniform_cuts(L, P), split_micro_batches(M, D))
        ev = evaluate(inst, plan)
        if ev.acceptable:
            inc.offer(plan, ev.time_s, ev.energy_j)
    status = "heuristic" if inc.plan is not None else "unknown"
    return finish("dtfm", inst, opts, inc.plan, status, deadline, stats={"shapes": len(shapes)})
