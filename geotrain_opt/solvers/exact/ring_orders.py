"""Rings over device classes (formulations/proofs.md §9): the least bottleneck of a
closed walk over a column's classes (what the class grid charges a ring), and the
ring order that costs least for a solution's rows (every order, a CP-SAT circuit,
or a descent), with a bound over all orders."""
from __future__ import annotations

import collections
import itertools
import math
import numpy as np
from ortools.sat.python import cp_model
from geotrain_opt.problem.instance import Instance
from geotrain_opt.cost.stagecost import ring_time
from geotrain_opt.solvers.exact.formulation import device_classes
from geotrain_opt.problem.tolerances import IMPROVE_RTOL



# Labelled walks (a class visited once or revisited) up to this many classes;
# up to class_grid.MAX_CLASSES only whether a class is in the column (strong connectivity).
WALK_CLASSES = 8


# Every ring order is tried up to this many replicas (7! orders once the first is
# fixed); beyond, a descent over orders.
ORDERS_UP_TO = 8


CIRCUIT_UP_TO = 64        # a CP-SAT circuit finds the order up to this many replicas


def walk_bottlenecks(W: np.ndarray, labelled: bool = True) -> dict[tuple[int, int], float]:
    """(Q, U) -> the least b such that a closed walk over the classes of bitmask Q
    (|Q| >= 2) with every step u -> v of weight W[u, v] <= b visits each class of
    Q \\ U exactly once and each class of U at least once. ``labelled`` False:
    only U = Q (every class may be revisited: strong connectivity).

    A ring's consecutive devices of one class are one visit; a class with one
    device in the column can be visited once. Reachability over (class, visited
    set) states, the sets of one class held as the bits of a Python integer."""
    C = W.shape[0]
    full = 1 << C
    has = [sum(1 << m for m in range(full) if m >> v & 1) for v in range(C)]
    everything = (1 << full) - 1
    lacks = [everything ^ h for h in has]
    out: dict[tuple[int, int], float] = {}
    for b in sorted({float(W[u, v]) for u in range(C) for v in range(C) if u != v}):
        adj = [[v for v in range(C) if v != u and W[u, v] <= b] for u in range(C)]
        for U in (range(full) if labelled else (full - 1,)):
            for s in range(C):
                reach = [0] * C
                reach[s] = 1 << (1 << s)
                changed = True
                while changed:
                    changed = False
                    for u in range(C):
                        if not reach[u]:
                            continue
                        for v in adj[u]:
                            new = (reach[u] & lacks[v]) << (1 << v)
                            if U >> v & 1:
                                new |= reach[u] & has[v]
                            new &= ~reach[v]
                            if new:
                                reach[v] |= new
                                changed = True
                if U >> s & 1:
                    closed = reach[s] & ~(1 << (1 << s))
                else:
                    closed = 0
                    for u in range(C):
                        if s in adj[u]:
                            closed |= reach[u]
                while closed:
                    low = closed & -closed
                    closed ^= low
                    Q = low.bit_length() - 1
                    if Q & ((1 << s) - 1) or Q & (Q - 1) == 0:
                        continue          # s is the lowest class of Q; |Q| >= 2
                    out.setdefault((Q, U & Q), b)
    return out


class _Classes:
    """Per class: members, speed, usable memory; class-pair link tables."""

    def __init__(self, inst: Instance) -> None:
        a = inst.arrays
        self.members = device_classes(inst)
        C = self.C = len(self.members)
        rep = [m[0] for m in self.members]
        self.size = [len(m) for m in self.members]
        self.speed = np.array([a.speed[r] for r in rep], dtype=float)
        self.mem = np.array([a.mem_cap[r] for r in rep], dtype=float)
        self.act_scale = np.array([a.act_scale[r] for r in rep], dtype=float)   # §14
        self.ib = np.zeros((C, C))
        self.al = np.zeros((C, C))
        self.ex = np.zeros((C, C))         # exposed time of a message (kappa o + mu across nodes)
        for c in range(C):
            for e in range(C):
                u = rep[c]
                v = rep[e] if e != c else (self.members[c][1] if self.size[c] > 1 else None)
                if v is not None:
                    self.ib[c, e], self.al[c, e], self.ex[c, e] = a.inv_beta[u, v], a.alpha[u, v], a.exposed[u, v]
        labelled = C <= WALK_CLASSES
        self.labelled = labelled
        self.walk_ib = walk_bottlenecks(self.ib, labelled)
        self.walk_al = walk_bottlenecks(self.al, labelled)


def _classes(inst: Instance) -> _Classes:
    got = inst._cache.get("class_grid")
    if got is None:
        got = inst._cache["class_grid"] = _Classes(inst)
    return got


def _ring_floor(inst: Instance, cl: _Classes, rows: list[tuple[int, ...]], N: list[float],
                starts: list[float] | None = None) -> float:
    """max_j s_j + R_j of a solution, each ring as the relaxation charges it (no order does better)."""
    a, D = inst.arrays, len(rows)
    starts = [0.0] * len(N) if starts is None else starts
    worst = 0.0
    for j, n_j in enumerate(N):
        counts = collections.Counter(r[j] for r in rows)
        Q = sum(1 << c for c in counts)
        if len(counts) == 1:
            (c,) = counts
            pair = (cl.ib[c, c], cl.al[c, c])
        else:
            U = sum(1 << c for c, k in counts.items() if k > 1) if cl.labelled else Q
            pair = (cl.walk_ib[Q, U], cl.walk_al[Q, U])
        worst = max(worst, starts[j] + ring_time(a, D, n_j, *pair))
    return worst


def _circuit_order(inst: Instance, cl: _Classes, cls: np.ndarray, N: list[float], starts: list[float],
                   seconds: float, unit: float) -> tuple[np.ndarray | None, float]:
    """The ring order by CP-SAT (a circuit over the rows, max_j s_j + R_j minimised):
    an order and a lower bound on that of every order (coefficients rounded down)."""
    a = inst.arrays
    D, P = cls.shape
    md = cp_model.CpModel()
    arcs = {(i, k): md.new_bool_var("") for i in range(D) for k in range(D) if i != k}
    md.add_circuit([(i, k, v) for (i, k), v in arcs.items()])
    Z = md.new_int_var(0, 2 ** 50, "largest")
    coef = 2.0 * (D - 1) / D * a.ring_bytes
    for j in range(P):
        ib = cl.ib[cls[:, j][:, None], cls[:, j][None, :]]
        al = cl.al[cls[:, j][:, None], cls[:, j][None, :]]
        B = md.new_int_var(0, 2 ** 50, "")
        Al = md.new_int_var(0, 2 ** 50, "")
        for (i, k), v in arcs.items():
            md.add(B >= math.floor(coef * N[j] * ib[i, k] / unit)).only_enforce_if(v)
            md.add(Al >= math.floor(2 * (D - 1) * al[i, k] / unit)).only_enforce_if(v)
        md.add(Z >= B + Al + math.floor(starts[j] / unit))
    md.minimize(Z)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, seconds)
    solver.parameters.num_workers = 1
    st = solver.solve(md)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, solver.best_objective_bound * unit if st != cp_model.INFEASIBLE else 0.0
    nxt = {i: k for (i, k), v in arcs.items() if solver.value(v)}
    order, i = [0], nxt[0]
    while i != 0:
        order.append(i)
        i = nxt[i]
    return np.array(order), solver.best_objective_bound * unit


def _best_order(inst: Instance, cl: _Classes, rows: list[tuple[int, ...]], N: list[float],
                seconds: float = 5.0, unit: float = 1e-12,
                starts: list[float] | None = None) -> tuple[list[int], float]:
    """An order of the rows whose max_j s_j + R_j (s_j: stage j's ring start, which no
    order changes, model.md §3.3; 0: the largest ring) costs least, and a lower bound
    on it over every order: every order for D <= ORDERS_UP_TO (the first row fixed;
    the bound is the least value), a CP-SAT circuit up to CIRCUIT_UP_TO rows, beyond
    that a descent by swaps and reversals from the sorted order (bound: the
    relaxation's own ring cost, ``_ring_floor``)."""
    D = len(rows)
    starts = [0.0] * len(N) if starts is None else starts
    a = inst.arrays
    cls = np.array(rows)                                   # (D, P)

    def worst(perms: np.ndarray) -> np.ndarray:
        nxt = np.roll(perms, -1, axis=1)
        out = np.zeros(len(perms))
        for j in range(cls.shape[1]):
            u, v = cls[perms, j], cls[nxt, j]
            out = np.maximum(out, starts[j] + ring_time(a, D, N[j], cl.ib[u, v].max(axis=1), cl.al[u, v].max(axis=1)))
        return out
    if D <= 2:
        order = np.arange(D)
        return list(order), float(worst(order[None])[0])
    if D <= ORDERS_UP_TO:
        perms = np.array([(0,) + p for p in itertools.permutations(range(1, D))])
        vals = worst(perms)
        i = int(np.argmin(vals))
        return list(perms[i]), float(vals[i])
    floor = _ring_floor(inst, cl, rows, N, starts)
    order = np.arange(D)
    best = float(worst(order[None])[0])
    if D <= CIRCUIT_UP_TO:
        got, lb = _circuit_order(inst, cl, cls, N, starts, seconds, unit)
        floor = max(floor, lb)
        if got is not None and float(worst(got[None])[0]) < best:
            order, best = got, float(worst(got[None])[0])
    moves = [(i, k) for i in range(D) for k in range(i + 1, D)]
    while best > floor * (1 + IMPROVE_RTOL):
        cands = []
        for i, k in moves:
            sw = order.copy()
            sw[i], sw[k] = sw[k], sw[i]
            rv = order.copy()
            rv[i:k + 1] = rv[i:k + 1][::-1]
            cands += [sw, rv]
        vals = worst(np.array(cands))
        i = int(np.argmin(vals))
        if vals[i] >= best * (1 - IMPROVE_RTOL):
            break
        order, best = cands[i], float(vals[i])
    return list(order), min(floor, best)
