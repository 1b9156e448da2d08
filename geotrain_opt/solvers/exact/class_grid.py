"""The class-grid relaxation of one shape (formulations/proofs.md §9): a bound and
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
nothing below the cutoff left or the time is up."""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any
import numpy as np
from ortools.sat.python import cp_model
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.cost.stagecost import flushes, stage_memory_of
from geotrain_opt.solvers.exact.formulation import device_classes
from geotrain_opt.solvers.exact.numerics import ACTIVITY_BITS
from geotrain_opt.solvers.exact.ring_orders import _best_order, _classes
from geotrain_opt.problem.tolerances import PROOF_RTOL



# Times are integers in units of cutoff * 2^-b, b chosen so that no row's activity
# can pass 2^ACTIVITY_BITS (the replica row has 2P terms: b = 40 - log2(2P + 2));
# CP-SAT proved wrong optima past 2^46 (numerics.ACTIVITY_BITS). A plan within the
# rounding of the cutoff is found, evaluated and excluded by the loop.
# (beyond ring_orders.WALK_CLASSES) only whether a class is in the column, up to:
MAX_CLASSES = 12


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
    if not a.gpipe and a.M // D > 1:
        # its replica rows are version 2's: under 1F1B they leave out the window
        # (model.md §3.1), so they would find and exclude plans one by one, not close shapes
        return "1F1B's window is not in the class grid's rows"
    if a.shared_wan:
        return "shared WAN capacity (model.md §3.2) is not in the class grid's rows"
    for pre in (a.w_prefix, a.par_prefix, a.act_prefix):
        if not np.allclose(np.diff(pre), pre[1] - pre[0], rtol=1e-12, atol=0.0):
            return "layers of different sizes"
    C = len(device_classes(inst))
    if C > MAX_CLASSES:
        return f"{C} classes (at most {MAX_CLASSES})"
    if C >= inst.n:
        return "no two devices are interchangeable"
    return None


def solve_shape(inst: Instance, D: int, P: int, cutoff: float, seconds: float, workers: int = 2,
                seed: int = 0, log=None) -> GridOutcome:
    """Plans of shape (D, P) faster than ``cutoff`` seconds: the best one found and
    whether none is left (formulations/proofs.md §9)."""
    why = not_applicable(inst, D)
    if why is not None:
        return GridOutcome("not_applicable", None, None, reason=why)
    t_end = time.perf_counter() + seconds
    grid = _GridModel(inst, D, P, cutoff)
    grid.slots()
    grid.replica_rows()
    if D > 1:
        grid.rings()
    grid.md.minimize(grid.Tm)
    grid.naming_literals()
    return _search(grid, cutoff, t_end, workers, seed, log)


class _GridModel:
    """The class-grid model of one shape, built in the OR-Tools way: data, then the
    variables and constraints one family per method, then the objective."""

    def __init__(self, inst: Instance, D: int, P: int, cutoff: float) -> None:
        # ---- data
        self.inst, self.D, self.P = inst, D, P
        a = self.a = inst.arrays
        self.cl = _classes(inst)
        self.m = a.M // D
        self.S, self.q = (int(x) for x in flushes(a, self.m))
        self.unit = cutoff * 2.0 ** -(ACTIVITY_BITS - math.ceil(math.log2(2 * P + 2)))
        # a plan below cutoff*(1-PROOF_RTOL) has model value <= cap
        self.cap = math.ceil(cutoff * (1 - PROOF_RTOL) / self.unit) - 1
        self.layer_w = float(a.w_prefix[1] - a.w_prefix[0])
        layer_n = float(a.par_prefix[1] - a.par_prefix[0])
        self.N_of = [[l * layer_n + (a.emb_params if j == 0 else 0.0) + (a.head_params if j == P - 1 else 0.0)
                      for l in range(a.L + 1)] for j in range(P)]
        self.top = a.L - P + 1
        self.md = cp_model.CpModel()

    def fl(self, x: float) -> int:
        return math.floor(x / self.unit)

    def slots(self) -> None:
        """Stage j's layers; each slot's class (one-hot ``on``); class sizes; rows sorted."""
        md, a, cl, D, P, top = self.md, self.a, self.cl, self.D, self.P, self.top
        C = cl.C
        self.ell = ell = [md.new_int_var(1, top, f"layers{j}") for j in range(P)]
        md.add(sum(ell) == a.L)
        # a stage's (class, layers) pairs are those that fit in memory
        self.fits = {(j, c, l): stage_memory_of(a, P, j, 0, l, self.q, D, float(cl.act_scale[c])) <= cl.mem[c]
                     for j in range(P) for c in range(C) for l in range(1, top + 1)}
        self.x = x = [[md.new_int_var(0, C - 1, f"class{k}_{j}") for j in range(P)] for k in range(D)]
        self.on = on = [[[md.new_bool_var("") for _c in range(C)] for _j in range(P)] for _k in range(D)]
        for k in range(D):
            for j in range(P):
                md.add_exactly_one(on[k][j])
                md.add(x[k][j] == sum(c * on[k][j][c] for c in range(C)))
        for c in range(C):
            used = sum(on[k][j][c] for k in range(D) for j in range(P))
            md.add(used == cl.size[c]) if D * P == self.inst.n else md.add(used <= cl.size[c])
        # replicas are interchangeable once ring order is free: rows in lexicographic order
        # (of their first J stages, J as large as a 50-bit code allows: sorted rows have
        # sorted prefixes, so a plan's sorted rows stay a solution)
        J = max(1, min(P, int(50 // math.log2(max(C, 2)))))
        code = [sum(x[k][j] * C ** (J - 1 - j) for j in range(J)) for k in range(D)]
        for k in range(D - 1):
            md.add(code[k] <= code[k + 1])
        # Tm: the model's T, at least every replica's time and every stage's ring after
        # its drain (rings(), model.md §3.3)
        self.Tm = md.new_int_var(0, self.cap, "iteration")

    def replica_rows(self) -> None:
        """X >= every replica's time. The row X >= S (sum t + 2 sum (h + 2 e)) + (m - S) tau
        is stated with each term already multiplied out and rounded down once (S t, 2 S (h + 2 e);
        (m - S) t, (m - S) o and (m - S) 2 e in the period): a plan's model value
        is then within about 2P + 3 units of its time, where rounding t and o first and
        multiplying after would lose 3 (m - S). Every term is at most cap in a plan
        below the cap, so a link or stage beyond it is left out of the tables, and no
        row's activity passes 2P cap."""
        md, a, cl, D, P, cap, fl, S = self.md, self.a, self.cl, self.D, self.P, self.cap, self.fl, self.S
        C, x = cl.C, self.x
        slow = self.m - S
        # the last column, rounded up, is the link's share of a drain (x + 2 e >= what it adds)
        links = [(c, e, fl(slow * a.A * cl.ib[c, e]), fl(slow * 2 * cl.ex[c, e]),
                  fl(2 * S * (cl.al[c, e] + a.A * cl.ib[c, e] + 2 * cl.ex[c, e])), fl(slow * cl.ex[c, e]),
                  self.cl_(cl.al[c, e] + a.A * cl.ib[c, e] + 2 * cl.ex[c, e]))
                 for c in range(C) for e in range(C) if c != e or cl.size[c] > 1]
        links = [r for r in links if max(r[2:6]) <= cap]
        stage_tab = []
        for j in range(P):
            tab = []
            head = a.head_work if j == P - 1 else 0.0
            for c in range(C):
                for l in range(1, self.top + 1):
                    if self.fits[j, c, l]:
                        t = (l * self.layer_w + head) / cl.speed[c]
                        f = (l * self.layer_w * a.fwd_share + head / 3.0) / cl.speed[c]     # GPipe's phases
                        # last column: the backward, rounded up, a drain's share (no head before P - 1)
                        tab.append((c, l, fl(S * t), fl(slow * t), fl(slow * f), fl(slow * (t - f)),
                                    self.cl_(t - f) if j < P - 1 else 0))
            stage_tab.append([r for r in tab if max(r[2:6]) <= cap])
        self.Xk, self.steps = [], []
        for k in range(D):
            occ, occ2, hop, occ1, dl = [], [], [], [], []
            for j in range(P - 1):
                o, o2, h, o1 = (md.new_int_var(0, cap, "") for _ in range(4))
                d = md.new_int_var(0, cap + 1, "")
                md.add_allowed_assignments([x[k][j], x[k][j + 1], o, o2, h, o1, d], links)
                occ.append(o), occ2.append(o2), hop.append(h), occ1.append(o1), dl.append(d)
            t_fill, t_tau, t_ph, db = [], [], [], []
            for j in range(P):
                tf, tt, tF, tB = (md.new_int_var(0, cap, "") for _ in range(4))
                d = md.new_int_var(0, cap + 1, "")
                md.add_allowed_assignments([x[k][j], self.ell[j], tf, tt, tF, tB, d], stage_tab[j])
                t_fill.append(tf), t_tau.append(tt), t_ph.append((tF, tB)), db.append(d)
            Xk = md.new_int_var(0, self.cap, f"replica{k}")
            md.add(Xk >= sum(t_fill) + sum(hop) + self._period(occ, occ2, occ1, t_tau, t_ph))
            md.add(self.Tm >= Xk)
            self.Xk.append(Xk)
            self.steps.append([db[i] + dl[i] for i in range(P - 1)])     # stage i's drain step, rounded up

    def cl_(self, x: float) -> int:
        """x in units, rounded up (a drain is subtracted: rounding it up keeps the relaxation)."""
        return math.ceil(x / self.unit)

    def _period(self, occ: list, occ2: list, occ1: list, t_tau: list, t_ph: list) -> Any:
        """(m - S) times the period: 1F1B's tau >= every stage's row and every link's
        occupancy; GPipe's is a forward and a backward phase, each with its bottleneck."""
        md, P = self.md, self.P
        if not self.m - self.S:
            return 0
        around = [(occ2[j - 1] if j > 0 else 0) + (occ2[j] if j < P - 1 else 0) for j in range(P)]
        if not self.a.gpipe:
            tau = md.new_int_var(0, self.cap, "")
            for j in range(P):
                md.add(tau >= t_tau[j] + around[j])
            for o in occ:
                md.add(tau >= o)
            return tau
        half = [(occ1[j - 1] if j > 0 else 0) + (occ1[j] if j < P - 1 else 0) for j in range(P)]
        phases = []
        for i in (0, 1):
            tp = md.new_int_var(0, self.cap, "")
            for j in range(P):
                md.add(tp >= t_ph[j][i] + half[j])
            for o in occ:
                md.add(tp >= o)
            phases.append(tp)
        return sum(phases)

    def _label_table(self, ibv: list[float], alv: list[float], levels: int) -> list[tuple]:
        """(label of every class, bottleneck index, latency index): a column's classes
        labelled 0 (absent), 1 (one device) or 2 (more), and the least closed walk."""
        cl, C = self.cl, self.cl.C
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
        return lab_tab

    def rings(self) -> None:
        """Tm >= every replica's time less its drain to stage j plus stage j's ring: the
        least bottleneck of a closed walk over its column's labelled classes."""
        md, a, cl, D, P, cap, fl, on = self.md, self.a, self.cl, self.D, self.P, self.cap, self.fl, self.on
        C = cl.C
        ibv = sorted(set(cl.walk_ib.values()) | {float(cl.ib[c, c]) for c in range(C)})
        alv = sorted(set(cl.walk_al.values()) | {float(cl.al[c, c]) for c in range(C)})
        levels = 3 if cl.labelled else 2
        lab_tab = self._label_table(ibv, alv, levels)
        coef = 2.0 * (D - 1) / D * a.ring_bytes
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
            tab = [(i, l, fl(coef * self.N_of[j][l] * v)) for i, v in enumerate(ibv) for l in range(1, self.top + 1)]
            md.add_allowed_assignments([bi, self.ell[j], rb], [r for r in tab if r[2] <= cap])
            md.add_element(ai, [min(fl(2 * (D - 1) * v), cap + 1) for v in alv], ra)
            for k in range(D):
                md.add(self.Tm >= self.Xk[k] - sum(self.steps[k][:j]) + rb + ra)

    def naming_literals(self) -> None:
        """Literals that name a solution, to exclude it once it is evaluated."""
        md, P, top = self.md, self.P, self.top
        self.is_l = is_l = [[md.new_bool_var("") for _l in range(top + 1)] for _j in range(P)]
        for j in range(P):
            for l in range(1, top + 1):
                md.add(self.ell[j] == l).only_enforce_if(is_l[j][l])
                md.add(self.ell[j] != l).only_enforce_if(~is_l[j][l])

    def plan_of(self, solver: cp_model.CpSolver, t_end: float) -> tuple[Plan, list, list, float]:
        """A solution as a plan with the ring order that costs least; its rows, its
        layers and a lower bound on its time over the orders (the replicas' times and
        the rings' starts, model.md §3.3, are the same in every order)."""
        D, P, cl, inst = self.D, self.P, self.cl, self.inst
        rows = [tuple(solver.value(v) for v in self.x[k]) for k in range(D)]
        lay = [solver.value(v) for v in self.ell]
        cuts = [0] + list(itertools.accumulate(lay))
        N = [self.N_of[j][lay[j]] for j in range(P)]

        def plan(order: list[int]) -> Plan:
            pool = [list(mm) for mm in cl.members]
            return Plan.from_indices(inst.ids, [[pool[c].pop(0) for c in rows[k]] for k in order], cuts, [self.m] * D)
        ev = evaluate(inst, plan(list(range(D))))
        starts = ev.stage_sync_start_s or [0.0] * P
        order, lb = _best_order(inst, cl, rows, N, min(10.0, max(0.1, t_end - time.perf_counter())), self.unit,
                                starts)
        return plan(order), rows, lay, max(max(ev.replica_times_s, default=0.0), lb)

    def exclude(self, rows: list, lay: list) -> None:
        """No more of this solution (every order of its rows is no better)."""
        D, P = self.D, self.P
        picked = [self.on[k][j][rows[k][j]] for k in range(D) for j in range(P)] + \
                 [self.is_l[j][lay[j]] for j in range(P)]
        self.md.add_bool_or([~v for v in picked])
        self.md.clear_hints()


def _search(grid: _GridModel, cutoff: float, t_end: float, workers: int, seed: int, log) -> GridOutcome:
    """Solve, turn each solution into a plan, evaluate it, exclude it; until the model
    is infeasible below the cutoff (closed) or time runs out (open)."""
    best: Plan | None = None
    best_val = math.inf
    first_cutoff = cutoff
    bound = None
    found = 0
    closed = False
    D, P, unit = grid.D, grid.P, grid.unit
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
        st = solver.solve(grid.md)
        if st == cp_model.INFEASIBLE:
            closed = True
            break
        # every plan left in the model is at least this; those excluded, at least best_val
        bound = min(solver.best_objective_bound * unit, best_val, first_cutoff)
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        found += 1
        plan, rows, lay, order_lb = grid.plan_of(solver, t_end)
        ev = evaluate(grid.inst, plan)
        value = ev.time_s if ev.acceptable else math.inf
        if log is not None:
            log(f"class grid {D}x{P}: relaxed {solver.objective_value * unit:.6f} s, plan {value:.6f} s")
        if value < best_val:
            best, best_val = plan, value
            if value < cutoff:
                cutoff = value
                grid.cap = min(grid.cap, math.ceil(cutoff * (1 - PROOF_RTOL) / unit) - 1)
                grid.md.add(grid.Tm <= grid.cap)
        # excluded only if no order of its rows beats the cutoff: its replicas (which no
        # order changes) and the least max_j s_j + R_j over the orders (model.md §3.3)
        if order_lb < cutoff * (1 - PROOF_RTOL):
            break
        grid.exclude(rows, lay)
    if closed:
        # nothing left below the cutoff; what was excluded is no better than best_val
        bound = min(best_val, cutoff * (1 - PROOF_RTOL))
    return GridOutcome("closed" if closed else "open", bound, best, best_val, found)
