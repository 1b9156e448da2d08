"""DT-FM's scheduler (Yuan et al., "Decentralized Training of Foundation Models in
Heterogeneous Environments", NeurIPS 2022; DS3Lab/DT-FM
``scheduler/heuristic_evolutionary_solver/scheduler.py``), re-implemented here:
its own cost model and its own search, then judged on this project's cost model
like every other solver (formulations/baselines.md).

**Its cost** of a balanced partition of the devices into P data-parallel groups
of D (group = the devices holding one stage):

* per-link costs ``c_pp(u,v) = alpha + S_a / beta`` (one tasklet's activations)
  and ``c_dp(u,v) = alpha + S_g / (D beta)`` (a shard of one stage's gradients);
* ``DP = max_group max_u sum_{v in group, v != u} 2 c_dp(u,v)`` (sharded
  parameter server, transfers to peers serial);
* ``w(A, B)`` = the bottleneck perfect matching between groups A and B under
  ``c_pp``; ``PP`` = the cheapest open path through all groups under ``w``
  (exact Held-Karp, from every start);
* cost = DP + 2 PP.

**Its search** (GCMA): population 100 random balanced partitions, 4,900
offspring (5,000 evaluated candidates); parents drawn uniformly from the
population; five-point crossover on the group-label string with greedy balance
repair; one pass of cyclic-partitioning local search (up to 8 cycles of
balance-preserving move chains, best prefix by cumulative gain; gain of moving v
from A to B = mean c_pp(v, B) - min c_pp(v, A - v), each group nominating its
unlocked device with the least own-group score); the offspring replaces the
worse parent unless it is worse than both (DT-FM's code compares with a boolean
there, a bug this version does not copy); the answer is the best candidate ever
evaluated.

The plan: groups in path order are the stages, replicas follow the bottleneck
matchings, layers are cut uniformly, micro-batches split evenly, every GPU is
used. D x P is the option ``shape`` or, by default, each shape that uses every GPU
(the best of them on this project's cost model is returned). DT-FM's message
sizes are the options ``dtfm_activation_gb`` and ``dtfm_gradient_gb`` (DtfmOptions)
(GB = 1e9 bytes, the unit of its formula); by default they are derived from the
instance as DT-FM derives its constants: activations of ``B/D`` sequences
(``s h p B / D`` bytes) and fp32 gradients of one stage (``4 N / P`` bytes).
"""
from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Callable

import numpy as np
from scipy.optimize import linear_sum_assignment

from geotrain_opt.errors import SolverError
from geotrain_opt.construct.pieces import split_micro_batches, uniform_cuts
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import Incumbent, SolveOptions, finish
from geotrain_opt.solvers.baselines.rules import all_gpu_shapes
from geotrain_opt.solvers.options import DtfmOptions
from geotrain_opt.solvers.termination import Termination
from geotrain_opt.solvers.result import Status

POPULATION = DtfmOptions.population      # DT-FM's own settings
OFFSPRING = DtfmOptions.offspring
CROSSOVER_POINTS = 5
LS_CYCLES = 8
HELD_KARP_MAX = 16


def message_sizes(inst: Instance, D: int, P: int, o: DtfmOptions = DtfmOptions()) -> tuple[float, float]:
    """(S_a, S_g) in bytes: DT-FM's activation and gradient messages."""
    m, a = inst.model, inst.arrays
    sa, sg = o.dtfm_activation_gb, o.dtfm_gradient_gb
    sa = float(sa) * 1e9 if sa is not None else m.seq_len * m.hidden * m.precision_bytes * m.global_batch / D
    n_total = float(a.par_prefix[-1] + a.emb_params + a.head_params)
    sg = float(sg) * 1e9 if sg is not None else 4.0 * n_total / P
    return sa, sg


# ----------------------------------------------------------------- its cost
def bottleneck_value(C: np.ndarray) -> float:
    """min over perfect matchings of the largest entry used (C square)."""
    lo = max(C.min(axis=1).max(), C.min(axis=0).max())
    vals = np.unique(C[C >= lo])
    i, j = 0, len(vals) - 1
    while i < j:                     # smallest threshold that admits a perfect matching
        mid = (i + j) // 2
        over = C > vals[mid]
        r, c = linear_sum_assignment(over)
        if over[r, c].any():
            i = mid + 1
        else:
            j = mid
    return float(vals[i])


def bottleneck_matching(C: np.ndarray) -> np.ndarray:
    """A bottleneck-optimal matching (column of each row), the cheapest in sum among
    them, as DT-FM's edge-deletion loop ends with a Hungarian assignment."""
    v = bottleneck_value(C)
    _, col = linear_sum_assignment(np.where(C > v, C.max() * C.size + 1.0, C))   # edges above v: never chosen
    return col


@lru_cache(maxsize=None)
def _masks(P: int) -> list[np.ndarray]:
    allm = np.arange(1 << P)
    pop = np.array([bin(x).count("1") for x in allm])
    return [allm[pop == s] for s in range(P + 1)]


def open_tsp(W: np.ndarray) -> tuple[float, list[int]]:
    """Cheapest open path through all nodes: exact Held-Karp (every start) up to
    HELD_KARP_MAX nodes, else nearest neighbour from every start plus 2-opt."""
    P = len(W)
    if P == 1:
        return 0.0, [0]
    if P > HELD_KARP_MAX:
        return _tsp_heuristic(W)
    full = 1 << P
    dp = np.full((full, P), np.inf)
    parent = np.full((full, P), -1, dtype=np.int64)
    for j in range(P):
        dp[1 << j, j] = 0.0
    masks = _masks(P)
    for s in range(2, P + 1):
        Ms = masks[s]
        for j in range(P):
            sub = Ms[(Ms >> j) & 1 == 1]
            cand = dp[sub ^ (1 << j)] + W[:, j]
            k = cand.argmin(axis=1)
            dp[sub, j] = cand[np.arange(len(sub)), k]
            parent[sub, j] = k
    end = int(dp[full - 1].argmin())
    cost = float(dp[full - 1, end])
    path, mask, j = [end], full - 1, end
    while parent[mask, j] >= 0:
        k = int(parent[mask, j])
        mask ^= 1 << j
        path.append(k)
        j = k
    return cost, path[::-1]


def _tsp_heuristic(W: np.ndarray) -> tuple[float, list[int]]:
    P = len(W)
    best: tuple[float, list[int]] | None = None
    symmetric = bool(np.array_equal(W, W.T))      # DT-FM's matrices are (DtfmCost symmetrises them)
    for s in range(P):
        path, left = [s], set(range(P)) - {s}
        while left:
            nxt = min(left, key=lambda j: W[path[-1], j])
            path.append(nxt)
            left.remove(nxt)
        path = _two_opt(W, path) if symmetric else _two_opt_any(W, path)
        cost = _length(W, path)
        if best is None or cost < best[0]:
            best = (cost, path)
    assert best is not None
    return best


def _two_opt(W: np.ndarray, path: list[int]) -> list[int]:
    """First-improvement 2-opt of an open path under a symmetric W, as ``_two_opt_any``
    but each move's change from its four end edges (the reversed segment keeps its
    length), the candidates of one i at once: O(P^2) a pass instead of O(P^3)."""
    p = np.array(path)
    P = len(p)
    improved = True
    while improved:
        improved = False
        for i in range(1, P - 1):
            k0 = i + 1
            while k0 < P:
                a, b = p[i - 1], p[i]
                ks = np.arange(k0, P)
                c = p[ks]
                after = p[np.minimum(ks + 1, P - 1)]
                tail = np.where(ks + 1 < P, W[b, after] - W[c, after], 0.0)
                delta = W[a, c] - W[a, b] + tail
                hit = np.nonzero(delta < -1e-15)[0]
                if not len(hit):
                    break
                k = int(ks[hit[0]])
                p[i:k + 1] = p[i:k + 1][::-1].copy()
                improved = True
                k0 = k + 1          # the scan goes on from the next k, on the new path
    return [int(x) for x in p]


def _two_opt_any(W: np.ndarray, path: list[int]) -> list[int]:
    """First-improvement 2-opt of an open path (any W), by whole lengths."""
    P = len(path)
    improved = True
    while improved:
        improved = False
        for i in range(1, P - 1):
            for k in range(i + 1, P):
                cand = path[:i] + path[i:k + 1][::-1] + path[k + 1:]
                if _length(W, cand) < _length(W, path) - 1e-15:
                    path, improved = cand, True
    return path


def _length(W: np.ndarray, path: list[int]) -> float:
    return float(sum(W[a, b] for a, b in zip(path, path[1:])))


class DtfmCost:
    """DT-FM's objective over partitions of ``devices`` (indices into the instance)
    into P groups of D; memoised per partition and per pair of groups."""

    def __init__(self, inst: Instance, D: int, P: int, sa: float, sg: float) -> None:
        a = inst.arrays
        self.D, self.P = D, P
        self.inv_beta, self.alpha, self.sa, self.sg_d = a.inv_beta, a.alpha, sa, sg / D
        self._w: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
        self._total: dict[tuple[tuple[int, ...], ...], tuple[float, float, float, list[int]]] = {}
        self.evaluations = 0

    def links(self, get, same: np.ndarray, dp: bool = False) -> np.ndarray:
        """DT-FM's symmetrised matrices where read: c_pp = alpha + sa / beta, or (dp)
        c_dp = alpha + sg / (D beta), alpha and 1 / beta the means of the two
        directions, 0 where ``same``. ``get(m)``: (the entries of m read, the entries
        of m.T in the same layout). Only the blocks the search reads are computed:
        whole n x n matrices cost 1.3 s at 4,096 GPUs, longer than a short time limit."""
        fwd, back = get(self.inv_beta)
        inv = np.add(fwd, back)
        inv *= 0.5
        fwd, back = get(self.alpha)
        alpha = np.add(fwd, back)
        alpha *= 0.5
        inv *= self.sg_d if dp else self.sa
        inv += alpha
        inv[same] = 0.0
        return inv

    def block(self, rows, cols) -> np.ndarray:
        """c_pp of ``rows`` x ``cols`` (device indices); the transposed entries are read
        as rows too (a column-wise gather misses the cache on every entry)."""
        r, c = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        return self.links(lambda m: (m[np.ix_(r, c)], m[np.ix_(c, r)].T), r[:, None] == c[None, :])

    def dp(self, groups: np.ndarray) -> float:
        if self.D == 1:
            return 0.0
        def get(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sub = m[groups[:, :, None], groups[:, None, :]]
            return sub, sub.transpose(0, 2, 1)
        sub = self.links(get, groups[:, :, None] == groups[:, None, :], dp=True)
        return float(2.0 * sub.sum(axis=2).max())

    def w(self, A: tuple[int, ...], B: tuple[int, ...]) -> float:
        key = (A, B) if A < B else (B, A)
        v = self._w.get(key)
        if v is None:
            v = self._w[key] = bottleneck_value(self.block(key[0], key[1]))
        return v

    def evaluate(self, groups: np.ndarray) -> tuple[float, float, float, list[int]]:
        """(total, DP, 2 PP, path order of the canonical groups) of a partition."""
        canon = tuple(sorted(tuple(sorted(int(x) for x in g)) for g in groups))
        hit = self._total.get(canon)
        self.evaluations += 1
        if hit is not None:
            return hit
        P = self.P
        W = np.zeros((P, P))
        for i in range(P):
            for j in range(i + 1, P):
                W[i, j] = W[j, i] = self.w(canon[i], canon[j])
        pp, order = open_tsp(W)
        dp = self.dp(np.array(canon))
        out = (dp + 2.0 * pp, dp, 2.0 * pp, order)
        self._total[canon] = out
        return out

    def grid(self, groups: np.ndarray) -> np.ndarray:
        """(D, P) grid: groups in path order, replicas along the bottleneck matchings."""
        canon = [list(g) for g in sorted(tuple(sorted(int(x) for x in g)) for g in groups)]
        order = self.evaluate(np.array(canon))[3]
        cols = [np.array(canon[order[0]])]
        for j in order[1:]:
            nxt = np.array(canon[j])
            col = bottleneck_matching(self.block(cols[-1], nxt))
            cols.append(nxt[col])
        return np.stack(cols, axis=1)


# --------------------------------------------------------------- its search
def _groups(labels: np.ndarray, devices: np.ndarray, P: int) -> np.ndarray:
    return np.stack([devices[labels == j] for j in range(P)])


def crossover(p1: np.ndarray, p2: np.ndarray, D: int, P: int, rng: np.random.Generator) -> np.ndarray:
    """Five-point crossover: parent 1's labels at five positions into parent 2, then
    greedy balance repair (each device of an over-full group, in index order, moves
    to the first group short of D)."""
    child = p2.copy()
    pts = rng.choice(len(child), size=min(CROSSOVER_POINTS, len(child)), replace=False)
    child[pts] = p1[pts]
    counts = np.bincount(child, minlength=P)
    for v in range(len(child)):
        if counts[child[v]] > D:
            short = int(np.flatnonzero(counts < D)[0])
            counts[child[v]] -= 1
            counts[short] += 1
            child[v] = short
    return child


def _gains(lab: np.ndarray, cpp: np.ndarray, off: np.ndarray, locked: np.ndarray, P: int):
    """DT-FM's move gains. Score of device v for its own group: its cheapest c_pp to a
    mate; for another group: its mean c_pp to that group's members. Each group's
    nominee is its unlocked device with the least own score; G[i, j] = gain of moving
    group i's nominee to group j (its score for j minus its own score)."""
    onehot = np.eye(P)[lab]
    size = onehot.sum(axis=0)
    mean = (cpp @ onehot) / np.maximum(size, 1)
    same = lab[:, None] == lab[None, :]
    own = np.where(same, off, np.inf).min(axis=1)
    free = (onehot.T > 0) & ~locked[None, :]                  # (P, n) unlocked members
    pick = np.where(free, own[None, :], np.inf)
    pick = np.where(free & ~np.isfinite(pick), np.finfo(float).max, pick)   # lone members still count
    nominee = pick.argmin(axis=1)
    has = free.any(axis=1)
    G = mean[nominee] - own[nominee][:, None]
    G[np.arange(P), np.arange(P)] = -np.inf
    G[~has] = -np.inf
    nominee = np.where(has, nominee, -1)
    return G, nominee


def local_search(labels: np.ndarray, cpp: np.ndarray, D: int, P: int, rng: np.random.Generator,
                 stop: Callable[[], bool] | None = None) -> np.ndarray:
    """One pass of DT-FM's cyclic partitioning ("Ours" gain), ``cpp`` indexed like
    ``labels``. A cycle starts at the group with the best move and follows best
    moves until it returns there; its best prefix (closed by sending the current
    nominee back to the start group) is kept. Up to P cycles, moved devices stay
    locked, and the best number of cycles by cumulative gain is applied. Once
    ``stop()`` says so (polled each move: a move costs 0.3 s at 4,096 GPUs) the cycle
    under way is dropped and the best of the finished ones applied."""
    del rng                                  # deterministic given its input, as in DT-FM
    if P < 2 or D < 2:
        return labels
    n = len(labels)
    off = cpp + np.diag(np.full(n, np.inf))  # no device is its own mate
    locked = np.zeros(n, dtype=bool)
    reached = np.zeros(P, dtype=bool)
    states, sums = [labels.copy()], [0.0]
    stopped = False
    for _ in range(P):
        if stop is not None and stop():
            break
        cur = states[-1].copy()
        moves: list[tuple[int, int, int]] = []      # (device, from, to)
        eps: list[float] = []
        tau: list[float] = []
        G, nom = _gains(cur, cpp, off, locked, P)
        if not np.isfinite(G.max()):
            break
        S0 = Si = int(np.argmax(G.max(axis=1)))
        for _ in range(n):
            if nom[Si] >= 0:
                v, dest = int(nom[Si]), int(np.argmax(G[Si]))
            else:                               # nothing left to move here: send the last one home
                v, dest = moves[-1][0], S0
            cur[v] = dest
            locked[v] = True
            reached[dest] = True
            moves.append((v, Si, dest))
            eps.append(float(G[Si].max()))
            tau.append(float(G[Si, S0]))
            Si = dest
            if Si == S0:
                break
            if stop is not None and stop():
                stopped = True
                break
            G, nom = _gains(cur, cpp, off, locked, P)
        if stopped:         # within the cycle: it is dropped
            break
        best, l = 0.0, 0
        for i in range(1, len(eps)):
            if sum(eps[:i]) + tau[i] > best:
                best, l = sum(eps[:i]) + tau[i], i
        for i in range(len(eps) - 1, l, -1):
            cur[moves[i][0]] = moves[i][1]
        cur[moves[l][0]] = S0
        states.append(cur)
        sums.append(best)
        if reached.all():
            break
    m, best = 0, 0.0
    for i in range(1, len(sums) + 1):
        if sum(sums[:i]) > best:
            best, m = sum(sums[:i]), i - 1
    return states[m]


def _left(stop: Callable[[], bool]) -> float:
    """Seconds a :class:`Termination` has left (unbounded for a plain callable)."""
    deadline = getattr(stop, "deadline", None)
    return deadline.remaining if deadline is not None else float("inf")


def gcma(cost: DtfmCost, devices: np.ndarray, rng: np.random.Generator, stop: Callable[[], bool],
         population: int = POPULATION, offspring: int = OFFSPRING) -> tuple[np.ndarray, dict[str, Any]]:
    """DT-FM's steady-state memetic search; returns the best partition ever seen."""
    D, P = cost.D, cost.P
    n = D * P
    base = np.repeat(np.arange(P), D)
    pop = [base[rng.permutation(n)] for _ in range(population)]
    fit: list[float] = []
    took = 0.0
    for x in pop:        # the initial population alone can outlast a short time limit
        # past the first, no evaluation is started that the time left cannot finish
        # (one takes 0.5 s at 4,096 GPUs: issue 39)
        if fit and (stop() or _left(stop) < took):
            break
        t = time.perf_counter()
        fit.append(cost.evaluate(_groups(x, devices, P))[0])
        took = max(took, time.perf_counter() - t)
    pop = pop[: len(fit)]
    population = len(pop)
    best_i = int(np.argmin(fit))
    best, best_cost = pop[best_i].copy(), fit[best_i]
    made = 0
    # the offspring's local search reads every pair's cost (a 4,096 x 4,096 block, a
    # second at that size): not built when not even one more evaluation fits
    cpp = cost.block(devices, devices) if offspring > 0 and not stop() and _left(stop) >= took else None
    while cpp is not None and made < offspring and not stop():
        made += 1
        i, j = int(rng.integers(population)), int(rng.integers(population))
        child = crossover(pop[i], pop[j], D, P, rng)
        child = local_search(child, cpp, D, P, rng, stop)
        c = cost.evaluate(_groups(child, devices, P))[0]
        if c < best_cost:
            best, best_cost = child.copy(), c
        worse = i if fit[i] >= fit[j] else j
        if c <= fit[worse]:
            pop[worse], fit[worse] = child, c
    return _groups(best, devices, P), {"candidates": population + made, "dtfm_cost_s": best_cost}


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    term = Termination(opts.time_limit_s)
    rng = np.random.default_rng(opts.seed)
    o = opts.typed(DtfmOptions, "dtfm")
    if o.shape is not None and o.shape[0] * o.shape[1] > inst.n:
        D, P = o.shape
        raise SolverError(f"dtfm: option 'shape' {D}x{P} needs {D * P} GPUs, the instance has {inst.n}")
    shapes = [o.shape] if o.shape is not None else all_gpu_shapes(inst)
    inc = Incumbent(inst)
    stats: dict[str, Any] = {"shapes": []}
    with term.guard():     # Ctrl-C: the best plan of the shapes searched so far
        for i, (D, P) in enumerate(shapes):
            if term():
                break
            _search_shape(inst, o, D, P, Termination(term.deadline.remaining / (len(shapes) - i)), rng, inc, stats)
    stats["interrupted"] = term.interrupted
    status = Status.HEURISTIC if inc.plan is not None else Status.UNKNOWN
    return finish("dtfm", inst, opts, inc.plan, status, term.deadline, stats=stats)


def _search_shape(inst: Instance, o: DtfmOptions, D: int, P: int, share: Termination,
                  rng: np.random.Generator, inc: Incumbent, stats: dict[str, Any]) -> None:
    """GCMA on one shape, scored by DT-FM's cost; the plan offered under our model."""
    M, L = inst.model.num_micro_batches, inst.model.layers
    a = inst.arrays
    # every GPU when D x P = n (DT-FM's assertion); else the fastest D x P
    devices = np.sort(np.argsort(-a.speed, kind="stable")[:D * P])
    sa, sg = message_sizes(inst, D, P, o)
    cost = DtfmCost(inst, D, P, sa, sg)
    groups, info = gcma(cost, devices, rng, share, o.population, o.offspring)
    total, dp, pp2, _ = cost.evaluate(groups)
    plan = Plan.from_indices(inst.ids, cost.grid(groups), uniform_cuts(L, P), split_micro_batches(M, D))
    ev = evaluate(inst, plan)
    row = {"D": D, "P": P, "dtfm_cost_s": total, "dtfm_dp_s": dp, "dtfm_pp_s": pp2,
           "candidates": info["candidates"], "T": ev.time_s, "acceptable": ev.acceptable}
    stats["shapes"].append(row)
    if inc.offer_evaluated(plan, ev):
        stats.update({k: row[k] for k in ("dtfm_cost_s", "dtfm_dp_s", "dtfm_pp_s", "candidates")})
