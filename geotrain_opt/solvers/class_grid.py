"""The class-grid relaxation of one shape (formulations/exact.md §9): a bound and
plans for instances whose devices fall into few classes, by CP-SAT.

A plan of shape (D, P) assigns a device to each of the D x P slots; where devices
form classes of interchangeable ones (``formulation.device_classes``: same speed
and memory, the same links to every other device), the time of a plan depends
only on the class of each slot, the cut, and the order of the replicas, which is
the order of every data-parallel ring. The relaxation drops that order: each
stage's ring is charged the least bottleneck of a closed walk over the classes
of its column (a class holding one device of the column is visited once, one
holding more may be revisited), which no ring order beats. The replicas are then
interchangeable under a uniform split, so the rows are sorted, and a row is a
sequence of P classes: the model has D x P class variables instead of a device
per slot.

Every plan of the shape has a model value at most its time (coefficients are
rounded down), so "no solution below the cutoff" proves that no plan of the
shape beats the cutoff. A solution is turned into a plan (the ring order that
costs least, with a bound over all orders), evaluated exactly, and excluded when
no order of it can beat the cutoff; the search goes on until the model has
nothing below the cutoff left or the time is up.
"""
from __future__ import annotations

import collections
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from ..evaluator import evaluate
from ..instance import Instance
from ..plan import Plan
from ..stagecost import flushes, ring_time, stage_memory_of
from .formulation import device_classes

# Times are integers in units of cutoff * 2^-b, b chosen so that no row's activity
# can pass 2^ACTIVITY_BITS (the replica row has 2P terms: b = 40 - log2(2P + 2));
# CP-SAT proved wrong optima past 2^46 (cpsat.ACTIVITY_BITS). A plan within the
# rounding of the cutoff is found, evaluated and excluded by the loop.
# Labelled walks (a class visited once or revisited) up to this many classes;
# up to MAX_CLASSES only whether a class is in the column (strong connectivity).
WALK_CLASSES = 8
MAX_CLASSES = 12
# Every ring order is tried up to this many replicas (7! orders once the first is
# fixed); beyond, a descent over orders.
ORDERS_UP_TO = 8
CIRCUIT_UP_TO = 64        # a CP-SAT circuit finds the order up to this many replicas
MAX_EXCLUSIONS = 2000


@dataclass
class GridOutcome:
    """``status``: "closed" (no plan of the shape beats the cutoff, or the best plan
    found in it is optimal), "open" (time up, or a relaxed solution no ring order
    could be checked for), "not_applicable"; ``bound``: a lower bound on the time of
    every plan of the shape (None: none proved); ``plan``: the best plan found."""
    status: str
    bound: float | None
    plan: Plan | None
    value: float = math.inf
    solutions: int = 0
    reason: str = ""


def not_applicable(inst: Instance, D: int) -> str | None:
    """Why the relaxation does not hold or does not pay on this instance (None: it does)."""
    obj = inst.objective
    if obj.kind != "time":
        return "objective is not time"
    if any(getattr(obj, f, None) is not None for f in ("max_energy_j", "max_cost_usd", "max_carbon_g")):
        return "a limit on energy, cost or carbon"
    if inst.options.batch_split != "uniform" and D > 1:
        return "free split"
    if inst.has_choices:
        return "micro-batch or recomputation choices (solved per choice)"
    a = inst.arrays
    for pre in (a.w_prefix, a.par_prefix, a.act_prefix):
        if not np.allclose(np.diff(pre), pre[1] - pre[0], rtol=1e-12, atol=0.0):
            return "layers of different sizes"
    C = len(device_classes(inst))
    if C > MAX_CLASSES:
        return f"{C} classes (at most {MAX_CLASSES})"
    if C >= inst.n:
        return "no two devices are interchangeable"
    return None


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
        self.ib = np.zeros((C, C))
        self.al = np.zeros((C, C))
        for c in range(C):
            for e in range(C):
                u = rep[c]
                v = rep[e] if e != c else (self.members[c][1] if self.size[c] > 1 else None)
                if v is not None:
                    self.ib[c, e], self.al[c, e] = a.inv_beta[u, v], a.alpha[u, v]
        labelled = C <= WALK_CLASSES
        self.labelled = labelled
        self.walk_ib = walk_bottlenecks(self.ib, labelled)
        self.walk_al = walk_bottlenecks(self.al, labelled)


def _classes(inst: Instance) -> _Classes:
    got = inst._cache.get("class_grid")
    if got is None:
        got = inst._cache["class_grid"] = _Classes(inst)
    return got


def _ring_floor(inst: Instance, cl: _Classes, rows: list[tuple[int, ...]], N: list[float]) -> float:
    """The largest ring of a solution as the relaxation charges it (no order does better)."""
    a, D = inst.arrays, len(rows)
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
        worst = max(worst, ring_time(a, D, n_j, *pair))
    return worst


def _circuit_order(inst: Instance, cl: _Classes, cls: np.ndarray, N: list[float], seconds: float,
                   unit: float) -> tuple[np.ndarray | None, float]:
    """The ring order by CP-SAT (a circuit over the rows, the largest ring minimised):
    an order and a lower bound on the largest ring of every order (coefficients
    rounded down)."""
    a = inst.arrays
    D, P = cls.shape
    md = cp_model.CpModel()
    arcs = {(i, k): md.new_bool_var("") for i in range(D) for k in range(D) if i != k}
    md.add_circuit([(i, k, v) for (i, k), v in arcs.items()])
    Z = md.new_int_var(0, 2 ** 50, "largest")
    coef = 2.0 * (D - 1) / D * a.grad_bytes
    for j in range(P):
        ib = cl.ib[cls[:, j][:, None], cls[:, j][None, :]]
        al = cl.al[cls[:, j][:, None], cls[:, j][None, :]]
        B = md.new_int_var(0, 2 ** 50, "")
        Al = md.new_int_var(0, 2 ** 50, "")
        for (i, k), v in arcs.items():
            md.add(B >= math.floor(coef * N[j] * ib[i, k] / unit)).only_enforce_if(v)
            md.add(Al >= math.floor(2 * (D - 1) * al[i, k] / unit)).only_enforce_if(v)
        md.add(Z >= B + Al)
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
                seconds: float = 5.0, unit: float = 1e-12) -> tuple[list[int], float]:
    """An order of the rows whose largest ring costs least, and a lower bound on the
    largest ring of every order: every order for D <= ORDERS_UP_TO (the first row
    fixed; the bound is the least value), a CP-SAT circuit up to CIRCUIT_UP_TO rows,
    beyond that a descent by swaps and reversals from the sorted order (bound: the
    relaxation's own ring cost, ``_ring_floor``)."""
    D = len(rows)
    a = inst.arrays
    cls = np.array(rows)                                   # (D, P)

    def worst(perms: np.ndarray) -> np.ndarray:
        nxt = np.roll(perms, -1, axis=1)
        out = np.zeros(len(perms))
        for j in range(cls.shape[1]):
            u, v = cls[perms, j], cls[nxt, j]
            out = np.maximum(out, ring_time(a, D, N[j], cl.ib[u, v].max(axis=1), cl.al[u, v].max(axis=1)))
        return out
    if D <= 2:
        order = np.arange(D)
        return list(order), float(worst(order[None])[0])
    if D <= ORDERS_UP_TO:
        perms = np.array([(0,) + p for p in itertools.permutations(range(1, D))])
        vals = worst(perms)
        i = int(np.argmin(vals))
        return list(perms[i]), float(vals[i])
    floor = _ring_floor(inst, cl, rows, N)
    order = np.arange(D)
    best = float(worst(order[None])[0])
    if D <= CIRCUIT_UP_TO:
        got, lb = _circuit_order(inst, cl, cls, N, seconds, unit)
        floor = max(floor, lb)
        if got is not None and float(worst(got[None])[0]) < best:
            order, best = got, float(worst(got[None])[0])
    moves = [(i, k) for i in range(D) for k in range(i + 1, D)]
    while best > floor * (1 + 1e-12):
        cands = []
        for i, k in moves:
            sw = order.copy()
            sw[i], sw[k] = sw[k], sw[i]
            rv = order.copy()
            rv[i:k + 1] = rv[i:k + 1][::-1]
            cands += [sw, rv]
        vals = worst(np.array(cands))
        i = int(np.argmin(vals))
        if vals[i] >= best * (1 - 1e-12):
            break
        order, best = cands[i], float(vals[i])
    return list(order), min(floor, best)


def solve_shape(inst: Instance, D: int, P: int, cutoff: float, seconds: float, workers: int = 2,
                seed: int = 0, log=None) -> GridOutcome:
    """Plans of shape (D, P) faster than ``cutoff`` seconds: the best one found and
    whether none is left (formulations/exact.md §9)."""
    why = not_applicable(inst, D)
    if why is not None:
        return GridOutcome("not_applicable", None, None, reason=why)
    t_end = time.perf_counter() + seconds
    a = inst.arrays
    cl = _classes(inst)
    C = cl.C
    L, M = a.L, a.M
    m = M // D
    S, q = (int(x) for x in flushes(a, m))
    from .cpsat import ACTIVITY_BITS        # cpsat imports the driver, which imports this module
    unit = cutoff * 2.0 ** -(ACTIVITY_BITS - math.ceil(math.log2(2 * P + 2)))
    cap = math.ceil(cutoff * (1 - 1e-9) / unit) - 1        # a plan below cutoff*(1-1e-9) has model value <= cap

    def fl(x: float) -> int:
        return math.floor(x / unit)

    layer_w = float(a.w_prefix[1] - a.w_prefix[0])
    layer_n = float(a.par_prefix[1] - a.par_prefix[0])
    N_of = [[l * layer_n + (a.emb_params if j == 0 else 0.0) + (a.head_params if j == P - 1 else 0.0)
             for l in range(L + 1)] for j in range(P)]
    md = cp_model.CpModel()
    # stage j's layers; a stage's (class, layers) pairs are those that fit in memory
    top = L - P + 1
    ell = [md.new_int_var(1, top, f"layers{j}") for j in range(P)]
    md.add(sum(ell) == L)
    fits = {(j, c, l): stage_memory_of(a, P, j, 0, l, q) <= cl.mem[c]
            for j in range(P) for c in range(C) for l in range(1, top + 1)}
    x = [[md.new_int_var(0, C - 1, f"class{k}_{j}") for j in range(P)] for k in range(D)]
    on = [[[md.new_bool_var("") for _c in range(C)] for _j in range(P)] for _k in range(D)]
    for k in range(D):
        for j in range(P):
            md.add_exactly_one(on[k][j])
            md.add(x[k][j] == sum(c * on[k][j][c] for c in range(C)))
    for c in range(C):
        used = sum(on[k][j][c] for k in range(D) for j in range(P))
        md.add(used == cl.size[c]) if D * P == inst.n else md.add(used <= cl.size[c])
    # replicas are interchangeable once ring order is free: rows in lexicographic order
    # (of their first J stages, J as large as a 50-bit code allows: sorted rows have
    # sorted prefixes, so a plan's sorted rows stay a solution)
    J = max(1, min(P, int(50 // math.log2(max(C, 2)))))
    code = [sum(x[k][j] * C ** (J - 1 - j) for j in range(J)) for k in range(D)]
    for k in range(D - 1):
        md.add(code[k] <= code[k + 1])
    X = md.new_int_var(0, cap, "pipeline")
    Y = md.new_int_var(0, cap, "allreduce")
    md.add(X + Y <= cap)
    # The replica row X >= S (sum t + 2 sum h) + (m - S) tau is stated with each term
    # already multiplied out and rounded down once (S t, 2 S h; (m - S) t, (m - S) o and
    # (m - S) 2 kappa o in the period): a plan's model value is then within about 2P + 3
    # units of its time, where rounding t and o first and multiplying after would
    # lose 3 (m - S). Every term is at most cap in a plan below the cap, so a link or
    # stage beyond it is left out of the tables, and no row's activity passes 2P cap.
    slow = m - S
    links = [(c, e, fl(slow * a.A * cl.ib[c, e]), fl(slow * 2 * a.kappa * a.A * cl.ib[c, e]),
              fl(2 * S * (cl.al[c, e] + a.A * cl.ib[c, e])))
             for c in range(C) for e in range(C) if c != e or cl.size[c] > 1]
    links = [r for r in links if max(r[2:]) <= cap]
    for k in range(D):
        occ, occ2, hop = [], [], []
        for j in range(P - 1):
            o, o2, h = (md.new_int_var(0, cap, "") for _ in range(3))
            md.add_allowed_assignments([x[k][j], x[k][j + 1], o, o2, h], links)
            occ.append(o), occ2.append(o2), hop.append(h)
        t_fill, t_tau = [], []
        for j in range(P):
            tf, tt = md.new_int_var(0, cap, ""), md.new_int_var(0, cap, "")
            tab = []
            for c in range(C):
                for l in range(1, top + 1):
                    if fits[j, c, l]:
                        t = (l * layer_w + (a.head_work if j == P - 1 else 0.0)) / cl.speed[c]
                        tab.append((c, l, fl(S * t), fl(slow * t)))
            md.add_allowed_assignments([x[k][j], ell[j], tf, tt], [r for r in tab if max(r[2:]) <= cap])
            t_fill.append(tf), t_tau.append(tt)
        tau = md.new_int_var(0, cap, "")          # (m - S) times the period
        if slow:
            for j in range(P):
                md.add(tau >= t_tau[j] + (occ2[j - 1] if j > 0 else 0) + (occ2[j] if j < P - 1 else 0))
            for o in occ:
                md.add(tau >= o)
        md.add(X >= sum(t_fill) + sum(hop) + tau)
    if D > 1:
        ibv = sorted(set(cl.walk_ib.values()) | {float(cl.ib[c, c]) for c in range(C)})
        alv = sorted(set(cl.walk_al.values()) | {float(cl.al[c, c]) for c in range(C)})
        levels = 3 if cl.labelled else 2
        lab_tab = []
        for labs in itertools.product(range(levels), repeat=C):
            Q = sum(1 << c for c in range(C) if labs[c])
            if not Q:
                continue
            U = sum(1 << c for c in range(C) if labs[c] == 2) if cl.labelled else Q
            if Q & (Q - 1) == 0:
                c = Q.bit_length() - 1
                if cl.size[c] < 2:
                    continue
                pair = (float(cl.ib[c, c]), float(cl.al[c, c]))
            else:
                pair = (cl.walk_ib[Q, U], cl.walk_al[Q, U])
            lab_tab.append(labs + (ibv.index(pair[0]), alv.index(pair[1])))
        coef = 2.0 * (D - 1) / D * a.grad_bytes
        for j in range(P):
            labs = []
            for c in range(C):
                cnt = sum(on[k][j][c] for k in range(D))
                lab = md.new_int_var(0, levels - 1, "")
                if cl.labelled:
                    n_c = md.new_int_var(0, D, "")
                    md.add(n_c == cnt)
                    md.add_min_equality(lab, [n_c, md.new_constant(2)])
                else:
                    md.add_max_equality(lab, [on[k][j][c] for k in range(D)])
                labs.append(lab)
            bi, ai = md.new_int_var(0, len(ibv) - 1, ""), md.new_int_var(0, len(alv) - 1, "")
            md.add_allowed_assignments(labs + [bi, ai], lab_tab)
            rb, ra = md.new_int_var(0, cap, ""), md.new_int_var(0, cap, "")
            tab = [(i, l, fl(coef * N_of[j][l] * v)) for i, v in enumerate(ibv) for l in range(1, top + 1)]
            md.add_allowed_assignments([bi, ell[j], rb], [r for r in tab if r[2] <= cap])
            md.add_element(ai, [min(fl(2 * (D - 1) * v), cap + 1) for v in alv], ra)
            md.add(Y >= rb + ra)
    md.minimize(X + Y)
    # literals that name a solution, to exclude it once it is evaluated
    is_l = [[md.new_bool_var("") for _l in range(top + 1)] for _j in range(P)]
    for j in range(P):
        for l in range(1, top + 1):
            md.add(ell[j] == l).only_enforce_if(is_l[j][l])
            md.add(ell[j] != l).only_enforce_if(~is_l[j][l])

    best: Plan | None = None
    best_val = math.inf
    first_cutoff = cutoff
    bound = None
    found = 0
    closed = False
    for _ in range(MAX_EXCLUSIONS):
        left = t_end - time.perf_counter()
        if left <= 0:
            break
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.01, left)
        solver.parameters.num_workers = max(1, workers)
        solver.parameters.random_seed = seed
        # the same CP-SAT 9.15 safety settings as cpsat.py's models
        solver.parameters.auto_detect_greater_than_at_least_one_of = False
        solver.parameters.presolve_inclusion_work_limit = 0
        st = solver.solve(md)
        if st == cp_model.INFEASIBLE:
            closed = True
            break
        # every plan left in the model is at least this; those excluded, at least best_val
        bound = min(solver.best_objective_bound * unit, best_val, first_cutoff)
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        found += 1
        rows = [tuple(solver.value(v) for v in x[k]) for k in range(D)]
        lay = [solver.value(v) for v in ell]
        cuts = [0] + list(itertools.accumulate(lay))
        N = [N_of[j][lay[j]] for j in range(P)]
        order, ring_lb = _best_order(inst, cl, rows, N, min(10.0, max(0.1, t_end - time.perf_counter())), unit)
        pool = [list(mm) for mm in cl.members]
        grid = [[pool[c].pop(0) for c in rows[k]] for k in order]
        plan = Plan.from_indices(inst.ids, grid, cuts, [m] * D)
        ev = evaluate(inst, plan)
        value = ev.time_s if ev.acceptable else math.inf
        if log is not None:
            log(f"class grid {D}x{P}: relaxed {solver.objective_value * unit:.6f} s, plan {value:.6f} s")
        if value < best_val:
            best, best_val = plan, value
            if value < cutoff:
                cutoff = value
                cap = min(cap, math.ceil(cutoff * (1 - 1e-9) / unit) - 1)
                md.add(X + Y <= cap)
        # excluded only if no order of its rows beats the cutoff: its replicas (which no
        # order changes) and the least largest ring over the orders
        if max(float(r) for r in ev.replica_times_s) + ring_lb < cutoff * (1 - 1e-9):
            break
        picked = [on[k][j][rows[k][j]] for k in range(D) for j in range(P)] + [is_l[j][lay[j]] for j in range(P)]
        md.add_bool_or([~v for v in picked])
        md.clear_hints()
    if closed:
        # nothing left below the cutoff; what was excluded is no better than best_val
        bound = min(best_val, cutoff * (1 - 1e-9))
    return GridOutcome("closed" if closed else "open", bound, best, best_val, found)
