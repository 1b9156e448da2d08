"""The exact model of one (D, P) shape, written once for two back ends.

The mathematics is in formulations/exact.md; the names below follow it. A back
end (CP-SAT or PuLP) only knows how to make variables, how to state
``lhs >= sum(coef * var) + const`` or ``sum(coef * var) <= rhs`` under
enforcement literals (CP-SAT: ``only_enforce_if``; MILP: big-M from variable
bounds) and how to minimise. Every continuous quantity is declared with a
*unit*: CP-SAT stores it as an integer multiple of that unit and rounds each
coefficient up (so the model never under-estimates a plan's cost), the MILP
stores value/unit as a continuous variable for numerical balance.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

import numpy as np

from .. import stagecost as sc
from ..instance import Instance

Terms = list[tuple[float, Any]]

# ε-limits are stated this much (relative) inside their value; see formulations/exact.md §5
LIMIT_MARGIN = 1e-6


class Backend(Protocol):
    def boolean(self, name: str) -> Any: ...
    def integer(self, name: str, lo: int, hi: int) -> Any: ...
    def real(self, name: str, ub: float, unit: float) -> Any: ...
    def ge(self, lhs: Any, terms: Terms, const: float = 0.0, enforce: tuple = ()) -> None: ...
    def le(self, terms: Terms, rhs: float, unit: float, enforce: tuple = ()) -> None: ...
    def eq_int(self, terms: list[tuple[int, Any]], rhs: int) -> None: ...
    def minimize(self, terms: Terms, unit: float) -> None: ...
    def hint(self, var: Any, value: float) -> None: ...


@dataclass
class Shape:
    """Variables of a built (D, P) model, kept so a solution can be read back."""

    D: int
    P: int
    x: dict[tuple[int, int, int], Any]       # unit u (a device, or a class of them) at replica k, stage j
    n_layers: list[Any] | None               # identical layers: layers per stage
    y: dict[tuple[int, int], Any] | None     # per-layer overrides: layer l in stage j
    mb: list[Any] | None                     # free split: one-hot mu[k][v-1]
    T: Any
    E_terms: Terms
    obj_terms: Terms
    # the derived variables by name (t, lk, oc, tau, ring, Rmax, eb, om): read back by
    # the pinned-plan tests, which compare each with the evaluator's term
    vars: dict[str, Any] = field(default_factory=dict)
    # the devices behind each unit u of x: one device each in the per-device
    # model, a class of interchangeable devices in the class model (§3.7)
    units: list[list[int]] = field(default_factory=list)
    # the clock level of each unit (formulations/exact.md §3.8): a class at each of its clocks is one unit
    levels: list[int] = field(default_factory=list)
    # whether twin classes are ordered by first use (§3.7): hints must be too
    twins: bool = False


def _identical_layers(inst: Instance) -> bool:
    return all(row == (1.0, 1.0, 1.0) for row in inst.model.layer_scale)


class BuildTimeout(Exception):
    """The time limit ended while a model was still being built."""


@dataclass(frozen=True)
class BuildSpec:
    """How to state one (D, P) model (everything but the instance and the shape).

    ``t_unit``/``e_unit``: the time and energy units (§5). ``cutoff``: only plans
    whose objective is at most this are wanted (pruning with an incumbent).
    ``objective``: overrides the instance's (the tie-break phase). ``time_cap``:
    extra T <= cap (tie-break, ε-sweeps); ``energy_cap``: a tighter energy limit.
    ``classes``: the class model (formulations/exact.md §3.7). ``stop``: polled
    while building (the model has O(D P n^2) terms, so building alone can outlast
    a time limit); when it returns True the build raises :class:`BuildTimeout`."""

    t_unit: float
    e_unit: float
    cutoff: float | None = None
    c_unit: float = 1.0          # dollars and grams (formulations/model.md §9), where modelled
    q_unit: float = 1.0
    objective: str | None = None
    time_cap: float | None = None
    energy_cap: float | None = None
    symmetry: bool = True
    classes: bool = False
    stop: Callable[[], bool] | None = None

    def scaled(self, factor: float) -> "BuildSpec":
        """The same spec with both units multiplied by ``factor``."""
        return replace(self, t_unit=self.t_unit * factor, e_unit=self.e_unit * factor,
                       c_unit=self.c_unit * factor, q_unit=self.q_unit * factor)

    def but(self, **changes: Any) -> "BuildSpec":
        return replace(self, **changes)


def build(inst: Instance, D: int, P: int, be: Backend, spec: BuildSpec | None = None, **fields: Any) -> Shape:
    """State the model of formulations/model.md §3 for a fixed (D, P) on back end
    ``be``, as ``spec`` says (or a :class:`BuildSpec` of ``fields``, e.g.
    ``t_unit=..., e_unit=...``). The energy cap of the spec is applied by the
    caller (``exact.run_model``), which states it as the instance's limit.

    The parts follow formulations/exact.md and run in this order (the order in
    which variables are created is part of what a CP-SAT run does, so it is fixed):
    layers per stage, units, assignment and symmetry (§3.1, §3.6, §3.7),
    micro-batches (§4), bounds for domains, stage times, pipeline links and rings
    (§3.2), the makespan, memory (§3.3), energy (§3.4), objective and limits (§3.5)."""
    m = _Model(inst, D, P, be, spec if spec is not None else BuildSpec(**fields))
    for part in (m.layers, m.units, m.assignment, m.symmetry, m.micro_batches, m.bounds, m.stage_times,
                 m.pipeline, m.rings, m.makespan, m.memory, m.energy, m.objective):
        part()
    return Shape(D, P, m.x, m.nl, m.y, m.mu, m.T, m.E_terms, m.obj_terms,
                 dict(t=m.t, lk=m.lk, oc=m.oc, tau=m.tau, ring=m.ring, Rmax=m.Rmax, eb=m.ebv, om=m.omv),
                 m.unit_members, m.unit_level, bool(m.spec.classes and m.spec.symmetry))


def _scaled(terms: Terms, s: float) -> Terms:
    return [(c * s, v) for c, v in terms]


class _Model:
    """One (D, P) model being stated: the context every part reads and extends."""

    def __init__(self, inst: Instance, D: int, P: int, be: Backend, spec: BuildSpec) -> None:
        self.inst, self.D, self.P, self.be, self.spec = inst, D, P, be, spec
        self.a = inst.arrays
        self.obj = inst.objective
        self.kind = spec.objective or self.obj.kind
        self.K, self.J = range(D), range(P)

    def tick(self) -> None:
        if self.spec.stop is not None and self.spec.stop():
            raise BuildTimeout(f"building the {self.D}x{self.P} model ran out of time")

    def layers(self) -> None:
        """Layers per stage: linear expressions W_j, N_j, act_j."""
        a, be, P, J = self.a, self.be, self.P, self.J
        L = a.L
        if _identical_layers(self.inst):
            nl = [be.integer(f"n_{j}", 1, L - P + 1) for j in J]
            be.eq_int([(1, v) for v in nl], L)
            w1, p1, c1 = a.w_prefix[1], a.par_prefix[1], a.act_prefix[1]
            W = [[(w1, nl[j])] for j in J]
            Npar = [[(p1, nl[j])] for j in J]
            act = [[(c1, nl[j])] for j in J]
            y = None
        else:
            nl = None
            y = {(l, j): be.boolean(f"y_{l}_{j}") for l in range(L) for j in J}
            # stage index s_l = sum_j j*y[l,j] starts at 0, ends at P-1, steps by 0 or 1
            for l in range(L):
                be.eq_int([(1, y[l, j]) for j in J], 1)
            be.eq_int([(1, y[0, 0])], 1)
            be.eq_int([(1, y[L - 1, P - 1])], 1)
            for l in range(L - 1):
                step = [(j, y[l + 1, j]) for j in J] + [(-j, y[l, j]) for j in J]
                be.le(step, 1, 1.0)
                be.le([(-c, v) for c, v in step], 0, 1.0)
            wl = np.diff(a.w_prefix)
            pl = np.diff(a.par_prefix)
            cl = np.diff(a.act_prefix)
            W = [[(wl[l], y[l, j]) for l in range(L)] for j in J]
            Npar = [[(pl[l], y[l, j]) for l in range(L)] for j in J]
            act = [[(cl[l], y[l, j]) for l in range(L)] for j in J]
        self.nl, self.y, self.W, self.Npar, self.act = nl, y, W, Npar, act
        self.W_c = [a.head_work if j == P - 1 else 0.0 for j in J]
        self.N_c = [(a.emb_params if j == 0 else 0.0) + (a.head_params if j == P - 1 else 0.0) for j in J]

    def units(self) -> None:
        """The per-device model has one unit per device, the class model one per
        class of interchangeable devices with its count cap[u]. Every figure of a
        unit is its first member's; the link of a unit to itself is the link between
        two of its members (the same for every pair, formulations/exact.md §3.7)."""
        a, inst = self.a, self.inst
        classes = device_classes(inst) if self.spec.classes else [[g] for g in range(inst.n)]
        # §3.8: a device (class) that lists lower clocks is one unit per clock; without
        # clocks every class is one unit at level 0, exactly as before
        pairs = [(c, lv) for c in classes for lv in range(int(a.n_levels[c[0]]))]
        units = [c for c, _ in pairs]
        self.unit_members, self.unit_level = units, [lv for _, lv in pairs]
        self.unit_class = [ci for ci, c in enumerate(classes) for _ in range(int(a.n_levels[c[0]]))]
        self.classes = classes
        U = self.U = range(len(units))
        cap = self.cap = [len(c) for c in units]
        first = [c[0] for c in units]
        if a.has_clocks:
            self.speed = a.speed[first] * a.clock_frac[first, self.unit_level]
            self.p_busy = a.clock_busy[first, self.unit_level]
        else:
            self.speed, self.p_busy = a.speed[first], a.p_busy[first]
        self.mem_cap, self.p_wait = a.mem_cap[first], a.p_wait[first]
        self.al, self.ib, self.cross = (_unit_links(m, units, self.unit_class) for m in (a.alpha, a.inv_beta, a.cross))
        # the units a slot of unit u can talk to: any other, itself only with two members
        self.peers = [[v for v in U if v != u or cap[u] > 1] for u in U]

    def assignment(self) -> None:
        """x[u, k, j]: unit u holds stage j of replica k; one unit per slot, at most
        cap[u] slots per unit."""
        be, U, K, J, cap = self.be, self.U, self.K, self.J, self.cap
        x = self.x = {}
        for u in U:
            self.tick()
            for k in K:
                for j in J:
                    x[u, k, j] = be.boolean(f"x_{u}_{k}_{j}")
        for k in K:
            for j in J:
                self.tick()
                be.eq_int([(1, x[u, k, j]) for u in U], 1)
        for u in U:
            self.tick()
            be.le([(1.0, x[u, k, j]) for k in K for j in J], cap[u], 1.0)
        if len(self.classes) < len(self.unit_members):      # §3.8: a class's clocks share its devices
            of_class: dict[int, list[int]] = {}
            for u in U:
                of_class.setdefault(self.unit_class[u], []).append(u)
            for ci, mine in of_class.items():
                if len(mine) > 1:
                    be.le([(1.0, x[u, k, j]) for u in mine for k in K for j in J], len(self.classes[ci]), 1.0)

    def symmetry(self) -> None:
        """Symmetry breaking (formulations/exact.md §3.6)."""
        be, U, K, J, D, P, x = self.be, self.U, self.K, self.J, self.D, self.P, self.x
        classes = self.spec.classes
        # rotating the replicas of a plan changes nothing (same ring edges, same split
        # multiset in the same cyclic order): replica 0 holds the smallest stage-0 unit
        # (strictly smaller where a unit is one device: no two replicas share it)
        strict = 0 if classes else -1
        twins = class_twins(self.inst) if classes and self.spec.symmetry else []
        order = unit_order(len(U), twins)
        for k in range(1, D):
            be.le([(float(order[u]), x[u, 0, 0]) for u in U] + [(-float(order[u]), x[u, k, 0]) for u in U], strict, 1.0)
        # twin classes (equal figures, sizes and links: the whole classes trade places,
        # like DT-FM's identical nodes) are used in order of their first slot
        # (formulations/exact.md §3.7): a twin holds a slot only if its predecessor
        # holds an earlier one
        slots = [(k, j) for k in K for j in J]
        for group in twins:
            for u1, u2 in zip(group, group[1:]):
                for i, (k, j) in enumerate(slots):
                    self.tick()
                    be.le([(1.0, x[u2, k, j])] + [(-1.0, x[u1, kk, jj]) for kk, jj in slots[:i]], 0, 1.0)
        # interchangeable devices (same figures, same links to everyone): the used ones
        # form a prefix of their class and occupy slots in increasing order. Together
        # with the rotation rule this keeps one plan of every equivalence class
        # (formulations/exact.md §3.6). The class model has no such symmetry left.
        if self.spec.symmetry and not classes:
            of_dev: dict[int, list[int]] = {g: [] for g in range(self.inst.n)}     # a device's units (§3.8)
            for u in U:
                of_dev[self.unit_members[u][0]].append(u)
            rank = {g: [(float(k * P + j + 1), x[u, k, j]) for u in of_dev[g] for k in K for j in J]
                    for g in range(self.inst.n)}
            used: dict[int, Any] = {}
            for cls in interchangeable_classes(self.inst):
                for g in cls:
                    used[g] = be.boolean(f"used_{g}")
                    be.eq_int([(1, used[g])] + [(-1, x[u, k, j]) for u in of_dev[g] for k in K for j in J], 0)
                for g1, g2 in zip(cls, cls[1:]):
                    be.le([(1.0, used[g2]), (-1.0, used[g1])], 0, 1.0)
                    be.le(rank[g1] + [(-c, v) for c, v in rank[g2]], -1, 1.0, (used[g2],))

    def micro_batches(self) -> None:
        """The split: fixed (uniform) or one-hot mu[k][v-1] per replica (free)."""
        be, K, D, M = self.be, self.K, self.D, self.a.M
        self.vmax = vmax = M - D + 1
        if self.a.uniform:
            self.mvals = [M // D] * D
            self.mu = None
        else:
            mu = self.mu = [[be.boolean(f"mu_{k}_{v}") for v in range(1, vmax + 1)] for k in K]
            for k in K:
                be.eq_int([(1, b) for b in mu[k]], 1)
            be.eq_int([(v, mu[k][v - 1]) for k in K for v in range(1, vmax + 1)], M)
            self.mvals = None

    def m_cases(self, k: int) -> list:
        """(m value, flushes S_k, micro-batches per flush q_k, extra enforcement
        literals) for replica k: the accumulation constants are fixed per value of m."""
        vals = ([(self.mvals[k], ())] if self.a.uniform
                else [(v, (self.mu[k][v - 1],)) for v in range(1, self.vmax + 1)])
        return [(m, *(int(x) for x in sc.flushes(self.a, m)), lits) for m, lits in vals]

    def bounds(self) -> None:
        """Upper bounds for domains and big-M; the cutoff and the limits cap T."""
        a, obj, D, P, M, kind = self.a, self.obj, self.D, self.P, self.a.M, self.kind
        cutoff, time_cap = self.spec.cutoff, self.spec.time_cap
        kappa = a.kappa
        self.W_tot = W_tot = float(a.w_prefix[-1] + a.head_work)
        t_ub = W_tot / float((a.speed[:, None] * a.clock_frac).min())     # the slowest clock (§3.8)
        lk_ub = float((a.alpha + a.A * a.inv_beta).max())
        occ_ub = float(a.A * a.inv_beta.max())
        tau_ub = max(t_ub + 4.0 * kappa * occ_ub, occ_ub)
        Tk_ub = min(a.steps, M) * (P * t_ub + 2 * (P - 1) * lk_ub) + (M - 1) * tau_ub
        self.N_tot = N_tot = float(a.par_prefix[-1] + a.emb_params + a.head_params)
        self.cring = cring = 2.0 * (D - 1) / D * a.grad_bytes
        R_ub = cring * N_tot * float(a.inv_beta.max()) + 2.0 * (D - 1) * float(a.alpha.max()) if D > 1 else 0.0
        T_ub = Tk_ub + R_ub
        if time_cap is not None:
            T_ub = min(T_ub, time_cap * (1 + 1e-9))
        if obj.max_time_s is not None:
            T_ub = min(T_ub, obj.max_time_s * (1 - LIMIT_MARGIN))
        if cutoff is not None:
            # the cutoff bounds T too, which keeps CP-SAT's integer domains small
            if kind == "time":
                T_ub = min(T_ub, cutoff)
            elif kind in ("energy", "cost", "carbon"):
                # every metric charges each selected device at least its wait rate for T
                if kind == "energy":
                    waits = a.p_wait
                else:
                    from ..tariffs import tariffs
                    waits = tariffs(self.inst)["cost_usd" if kind == "cost" else "carbon_g"].wait
                pw = float(np.sort(waits)[: D * P].sum())
                if pw > 0:
                    T_ub = min(T_ub, cutoff / pw)
            elif obj.lam > 0:
                T_ub = min(T_ub, cutoff * obj.time_ref_s / obj.lam)
        self.T_ub = T_ub
        self.t_ub, self.lk_ub, self.occ_ub, self.tau_ub, self.R_ub = (
            min(v, T_ub) for v in (t_ub, lk_ub, occ_ub, tau_ub, R_ub))

    def stage_times(self) -> None:
        """t[k,j] >= W_j / speed_u if x[u,k,j]."""
        be, K, J, U, x, W, W_c = self.be, self.K, self.J, self.U, self.x, self.W, self.W_c
        t = self.t = {(k, j): be.real(f"t_{k}_{j}", self.t_ub, self.spec.t_unit) for k in K for j in J}
        for k in K:
            for j in J:
                for u in U:
                    self.tick()
                    s = 1.0 / self.speed[u]
                    be.ge(t[k, j], _scaled(W[j], s), W_c[j] * s, (x[u, k, j],))

    def pipeline(self) -> None:
        """Pipeline links: hop lk, occupancy oc, period tau (with exposed communication)."""
        a, be, K, J, U, P, x = self.a, self.be, self.K, self.J, self.U, self.P, self.x
        al, ib, peers, t, t_unit, kappa = self.al, self.ib, self.peers, self.t, self.spec.t_unit, a.kappa
        lk, oc, tau = self.lk, self.oc, self.tau = {}, {}, {}
        for k in K:
            tau[k] = be.real(f"tau_{k}", self.tau_ub, t_unit)
            for j in range(P - 1):
                lk[k, j] = be.real(f"lk_{k}_{j}", self.lk_ub, t_unit)
                oc[k, j] = be.real(f"oc_{k}_{j}", self.occ_ub, t_unit)
                for u in U:
                    self.tick()
                    row = [(al[u, v] + a.A * ib[u, v], x[v, k, j + 1]) for v in peers[u]]
                    be.ge(lk[k, j], row, 0.0, (x[u, k, j],))
                    be.ge(oc[k, j], [(a.A * ib[u, v], x[v, k, j + 1]) for v in peers[u]], 0.0, (x[u, k, j],))
                be.ge(tau[k], [(1.0, oc[k, j])])
            # tau_k >= t_kj + 2 kappa (o_{k,j-1} + o_kj): exposed communication (§3.2)
            for j in J:
                around = [(2.0 * kappa, oc[k, i]) for i in (j - 1, j) if (k, i) in oc] if kappa > 0 else []
                be.ge(tau[k], [(1.0, t[k, j])] + around)

    def rings(self) -> None:
        """Data-parallel rings: R_j = Rb_j + Ra_j, Rmax >= every R_j."""
        be, K, J, U, D, x, al, ib, peers = self.be, self.K, self.J, self.U, self.D, self.x, self.al, self.ib, self.peers
        R_ub, t_unit, cring = self.R_ub, self.spec.t_unit, self.cring
        self.Rmax = Rmax = be.real("Rmax", max(R_ub, 0.0), t_unit)
        ring: dict[int, tuple[Any, Any]] = {}
        self.ring = ring
        if D > 1:
            for j in J:
                Rb = be.real(f"Rb_{j}", R_ub, t_unit)
                Ra = be.real(f"Ra_{j}", R_ub, t_unit)
                ring[j] = (Rb, Ra)
                for k in K:
                    k2 = (k + 1) % D
                    for u in U:
                        self.tick()
                        be.ge(Ra, [(2.0 * (D - 1) * al[u, v], x[v, k2, j]) for v in peers[u]], 0.0, (x[u, k, j],))
                        for v in peers[u]:
                            s = cring * ib[u, v]
                            be.ge(Rb, _scaled(self.Npar[j], s), self.N_c[j] * s, (x[u, k, j], x[v, k2, j]))
                be.ge(Rmax, [(1.0, Rb), (1.0, Ra)])

    def makespan(self) -> None:
        """T >= S_k (sum_j t_kj + 2 sum_j lk_kj) + (m_k - S_k) tau_k + Rmax, one row per value of m_k."""
        be, K, J, P, t, lk, tau = self.be, self.K, self.J, self.P, self.t, self.lk, self.tau
        self.T = T = be.real("T", self.T_ub, self.spec.t_unit)
        for k in K:
            fill = [(1.0, t[k, j]) for j in J] + [(2.0, lk[k, j]) for j in range(P - 1)]
            for m, S_k, _q, lits in self.m_cases(k):
                be.ge(T, _scaled(fill, float(S_k)) + [(1.0, self.Rmax), (float(m - S_k), tau[k])], 0.0, lits)

    def memory(self) -> None:
        """state*N_j + act_j*inflight (+ logits) <= usable memory of u, if u holds slot (k, j)."""
        a, be, K, J, U, P, x = self.a, self.be, self.K, self.J, self.U, self.P, self.x
        for k in K:
            for j in J:
                for m, _S, q, lits in self.m_cases(k):
                    infl = int(sc.inflight(a, P, j, q))
                    terms = _scaled(self.Npar[j], a.state_bytes) + _scaled(self.act[j], infl)
                    logits = a.logits * int(sc.logits_inflight(a, infl)) if j == P - 1 else 0.0
                    const = a.state_bytes * self.N_c[j] + logits
                    for u in U:
                        self.tick()
                        be.le(terms, float(self.mem_cap[u]) - const, 1.0, (x[u, k, j],) + lits)

    def energy(self) -> None:
        """E = sum pue(Pb-Pw) U + sum_{g in S} pue Pw T + e_net * cross bytes; and the
        priced metrics of formulations/model.md §9 (dollars, grams) where the
        objective or a limit asks for them: the same sums at other rates (§3.4)."""
        a = self.a
        self.on = {}          # class members in use, shared by every metric's wait term
        self.E_terms = self.metric("", self.p_busy, self.p_wait, a.net_j_per_byte, self.cross, self.cross,
                                   self.spec.e_unit)
        self.priced_terms: dict[str, Terms] = {}
        obj, kind = self.obj, self.kind
        for name, metric, cap in (("cost", "cost_usd", obj.max_cost_usd), ("carbon", "carbon_g", obj.max_carbon_g)):
            if kind != name and cap is None:
                continue
            from ..tariffs import tariffs
            tf = tariffs(self.inst)[metric]
            first = [c[0] for c in self.unit_members]
            pipe, ring = (tf.link + tf.link.T) / 2.0, tf.link
            scale = float(max(pipe.max(), ring.max()))
            norm = (lambda m: _unit_links(m / scale, self.unit_members)) if scale > 0 else (lambda m: m[:0, :0])
            unit = self.spec.c_unit if name == "cost" else self.spec.q_unit
            busy = tf.busy[first] if tf.per_watt is None else tf.per_watt[first] * self.p_busy   # at the unit's clock
            self.priced_terms[name] = self.metric(f"{name}_", busy, tf.wait[first], scale,
                                                  norm(pipe), norm(ring), unit)

    def metric(self, tag: str, p_busy: np.ndarray, p_wait: np.ndarray, scale: float, pipe: np.ndarray,
               ring: np.ndarray, e_unit: float) -> Terms:
        """Terms of sum (Pb-Pw) U + sum_{g in S} Pw T + scale * (bytes weighted by
        ``pipe`` on pipeline links, by ``ring`` on directed ring edges), rates per
        unit, link weights in [0, 1] (energy: 0/1 for crossing regions)."""
        a, be, K, J, U, P, D, M, x = self.a, self.be, self.K, self.J, self.U, self.P, self.D, self.a.M, self.x
        speed, cap, peers = self.speed, self.cap, self.peers
        t_unit, T, T_ub = self.spec.t_unit, self.T, self.T_ub
        W, W_c, Npar, N_c, cring = self.W, self.W_c, self.Npar, self.N_c, self.cring
        E_ub_slot = float(((p_busy - p_wait) / speed).max()) * M * self.W_tot
        E_terms: Terms = []
        ebv, omv = {}, {}
        if not tag:
            self.ebv, self.omv = ebv, omv
        if tag == "" or (p_busy - p_wait).any():
            for k in K:
                for j in J:
                    eb = ebv[k, j] = be.real(f"{tag}eb_{k}_{j}", E_ub_slot, e_unit)
                    E_terms.append((1.0, eb))
                    for m, _S, _q, lits in self.m_cases(k):
                        for u in U:
                            self.tick()
                            s = m * (p_busy[u] - p_wait[u]) / speed[u]
                            be.ge(eb, _scaled(W[j], s), W_c[j] * s, (x[u, k, j],) + lits)
        # the bilinear T * sum_{g in S} Pw_g: om_g = T when g is selected, else free to be 0.
        # A class of c devices has c of them, the first n_u of which are on when the
        # class holds n_u slots (the prefix rule of §3.6, counted instead of labelled).
        for u in U:
            self.tick()
            if cap[u] == 1:
                om = omv[u] = be.real(f"{tag}om_{u}", T_ub, t_unit)
                E_terms.append((float(p_wait[u]), om))
                for k in K:
                    for j in J:
                        be.ge(om, [(1.0, T)], 0.0, (x[u, k, j],))
                continue
            if u not in self.on:
                on = self.on[u] = [be.boolean(f"on_{u}_{i}") for i in range(cap[u])]
                be.eq_int([(1, b) for b in on] + [(-1, x[u, k, j]) for k in K for j in J], 0)
                for i in range(cap[u] - 1):
                    be.le([(1.0, on[i + 1]), (-1.0, on[i])], 0, 1.0)
            on = self.on[u]
            for i in range(cap[u]):
                om = omv[u, i] = be.real(f"{tag}om_{u}_{i}", T_ub, t_unit)
                E_terms.append((float(p_wait[u]), om))
                be.ge(om, [(1.0, T)], 0.0, (on[i],))
        if scale > 0:
            for k in K:
                for j in range(P - 1):
                    # cp = the weight of the link of replica k between stages j and j+1
                    cp = be.real(f"{tag}cp_{k}_{j}", 1.0, 1.0)
                    for u in U:
                        self.tick()
                        be.ge(cp, [(pipe[u, v], x[v, k, j + 1]) for v in peers[u]], 0.0, (x[u, k, j],))
                    if a.uniform:
                        E_terms.append((scale * 2.0 * self.mvals[k] * a.A, cp))
                    else:
                        cb = be.real(f"{tag}cb_{k}_{j}", 2.0 * self.vmax * a.A, e_unit / scale)
                        for m, _S, _q, lits in self.m_cases(k):
                            be.ge(cb, [(2.0 * m * a.A, cp)], 0.0, lits)
                        E_terms.append((scale, cb))
            if D > 1:
                for j in J:
                    for k in K:
                        k2 = (k + 1) % D
                        # bytes in units worth one energy unit: an LP solver sees their cost
                        rb = be.real(f"{tag}rb_{k}_{j}", cring * self.N_tot, e_unit / scale)
                        for u in U:
                            self.tick()
                            for v in peers[u]:
                                if ring[u, v]:
                                    w = cring * ring[u, v]
                                    be.ge(rb, _scaled(Npar[j], w), N_c[j] * w, (x[u, k, j], x[v, k2, j]))
                        E_terms.append((scale, rb))
        return E_terms

    def objective(self) -> None:
        """The objective (time, energy, weighted, cost or carbon), the limits and the cutoff."""
        be, obj, kind, T, E_terms = self.be, self.obj, self.kind, self.T, self.E_terms
        t_unit, e_unit, cutoff = self.spec.t_unit, self.spec.e_unit, self.spec.cutoff
        if obj.max_energy_j is not None:
            # a hair inside the limit: an LP solver's feasibility tolerance (1e-7)
            # must not hand back a plan that the exact evaluator finds over it
            be.le(E_terms, obj.max_energy_j * (1 - LIMIT_MARGIN), e_unit)
        priced_unit = {"cost": self.spec.c_unit, "carbon": self.spec.q_unit}
        for name, cap in (("cost", obj.max_cost_usd), ("carbon", obj.max_carbon_g)):
            if cap is not None:
                be.le(self.priced_terms[name], cap * (1 - LIMIT_MARGIN), priced_unit[name])
        unit = None
        if kind == "time":
            obj_terms: Terms = [(1.0, T)]
        elif kind == "energy":
            obj_terms = list(E_terms)
        elif kind in priced_unit:
            obj_terms, unit = list(self.priced_terms[kind]), priced_unit[kind]
        else:
            obj_terms = ([(obj.lam / obj.time_ref_s, T)]
                         + [((1 - obj.lam) / obj.energy_ref_j * c, v) for c, v in E_terms])
        if unit is None:
            unit = t_unit if kind == "time" else (e_unit if kind == "energy" else
                                                  obj.lam * t_unit / obj.time_ref_s + (1 - obj.lam) * e_unit / obj.energy_ref_j)
        if cutoff is not None:
            be.le(obj_terms, cutoff, unit)
        be.minimize(obj_terms, unit)
        self.obj_terms = obj_terms


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


def device_classes(inst: Instance) -> list[list[int]]:
    """Every device in exactly one class of devices that can trade places in any
    plan without changing its cost: same speed, memory, power (PUE included) and
    region, the same links to every device outside the class, and one link, both
    ways, between any two members. Classes in order of their first member.
    Computed once per instance (every shape's model asks); a fingerprint checks
    only the classes a device can join (formulations/exact.md §3.7)."""
    cached = inst._cache.get("device_classes")
    if cached is not None:
        return [list(c) for c in cached]
    classes = _device_classes(inst)
    inst._cache["device_classes"] = tuple(tuple(c) for c in classes)
    return classes


def _device_classes(inst: Instance) -> list[list[int]]:
    a = inst.arrays
    n = inst.n
    key = [(a.speed[g], a.mem_cap[g], a.p_busy[g], a.p_wait[g], a.region[g], inst.devices[g].price_per_hour,
            inst.devices[g].clocks) for g in range(n)]
    mats = (a.alpha, a.inv_beta)
    # A fingerprint that members of one class share, so that only classes whose
    # head matches are checked (the check is O(n), and thousands of devices have
    # hundreds of classes): with each link as a residue of its bits, id < p, and
    # random weights r < p, s_g = sum_o id[g, o] r_o; two members g, h of a class
    # whose inner link has id x differ only in columns g and h, so
    # s_g + (x - id[g, g]) r_g = s_h + (x - id[h, h]) r_h. Exact integers (p < 2^20,
    # n <= 2^12 terms stay below 2^52); equal links have equal ids, so a mismatch
    # rules a class out, and a match is checked in full.
    p = 1048573
    r = np.random.default_rng(0).integers(1, p, size=n, dtype=np.int64)
    prints = []
    if n <= 2 ** 12:
        for m in mats:
            ids = (np.ascontiguousarray(m, dtype=np.float64) + 0.0).view(np.int64) % p   # + 0.0: -0.0 is 0.0
            for mm in (ids, ids.T):
                prints.append((mm, mm @ r, mm.diagonal().copy()))
    classes: list[list[int]] = []
    heads: dict[tuple, list[int]] = {}        # key -> index of each class with that key
    for g in range(n):
        mine = heads.setdefault(key[g], [])
        cand = np.array([classes[c][0] for c in mine], dtype=np.int64)
        ok = np.ones(len(mine), dtype=bool)
        for ids, sig, diag in prints:
            if len(mine):
                x = ids[g, cand]
                ok &= sig[g] + (x - diag[g]) * r[g] == sig[cand] + (x - diag[cand]) * r[cand]
        for c in (mine[i] for i in np.nonzero(ok)[0]):
            cls = classes[c]
            h = cls[0]
            others = np.ones(n, dtype=bool)
            others[g] = False
            others[cls] = False
            if not all(np.array_equal(m[g, others], m[h, others]) and np.array_equal(m[others, g], m[others, h])
                       for m in mats):
                continue
            # within the class every pair has the same link both ways
            pair = cls[:2] if len(cls) > 1 else [g, h]
            intra = (a.alpha[pair[0], pair[1]], a.inv_beta[pair[0], pair[1]])
            if all((a.alpha[g, o], a.inv_beta[g, o]) == intra == (a.alpha[o, g], a.inv_beta[o, g]) for o in cls):
                cls.append(g)
                break
        else:
            mine.append(len(classes))
            classes.append([g])
    return classes


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
        key = [(len(c), a.speed[c[0]], a.mem_cap[c[0]], a.p_busy[c[0]], a.p_wait[c[0]], a.region[c[0]],
                inst.devices[c[0]].price_per_hour) for c in classes]
        mats = [_unit_links(m, classes) for m in (a.alpha, a.inv_beta, a.cross)]

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


def canonical_grid(inst: Instance, grid: np.ndarray, levels: np.ndarray | None = None):
    """The equivalent grid that satisfies the symmetry rules of ``build`` (the
    construction of formulations/exact.md §3.6), e.g. to turn any plan into a
    valid solution hint; with ``levels`` (each slot's clock, §3.8) also those
    levels moved with their slots: (grid, levels)."""
    classes = interchangeable_classes(inst)
    cls_of = {g: i for i, c in enumerate(classes) for g in c}
    key = lambda g: min(classes[cls_of[g]]) if g in cls_of else g  # noqa: E731
    D, P = grid.shape
    k0 = min(range(D), key=lambda k: (key(int(grid[k, 0])), k))
    g = np.roll(grid, -k0, axis=0).copy()
    if levels is None:
        return _label_in_rank_order(g, classes)
    return _label_in_rank_order(g, classes), np.roll(levels, -k0, axis=0)


def _label_in_rank_order(grid: np.ndarray, classes: list[list[int]]) -> np.ndarray:
    """Each class's devices, in order, on the slots its members hold, in slot order."""
    D, P = grid.shape
    g = grid.copy()
    for c in classes:
        slots = [(k, j) for k in range(D) for j in range(P) if int(grid[k, j]) in c]
        for (k, j), dev in zip(slots, c):    # slots come in rank order
            g[k, j] = dev
    return g


def hint_values(inst: Instance, shape: Shape, grid: np.ndarray,
                levels: np.ndarray | None = None) -> list[tuple[Any, int]]:
    """(x variable, 0/1) of a device grid of the shape's size, in the shape's model;
    ``levels``: each slot's clock level (None: all at full clock)."""
    if levels is None:
        levels = np.zeros_like(grid)
    level_of = shape.levels or [0] * len(shape.units)
    if all(len(c) == 1 for c in shape.units):
        grid, levels = canonical_grid(inst, grid, levels)
        unit = {(c[0], lv): u for u, (c, lv) in enumerate(zip(shape.units, level_of))}
        ugrid = np.array([[unit[int(g), int(lv)] for g, lv in zip(gr, lr)] for gr, lr in zip(grid, levels)])
    else:
        cls = {g: min(c) for c in shape.units for g in c}
        unit = {(min(c), lv): u for u, (c, lv) in enumerate(zip(shape.units, level_of))}
        ugrid = np.array([[unit[cls[int(g)], int(lv)] for g, lv in zip(gr, lr)] for gr, lr in zip(grid, levels)])
        twins = class_twins(inst) if shape.twins else []
        order = unit_order(len(shape.units), twins)
        k0 = min(range(shape.D), key=lambda k: (order[int(ugrid[k, 0])], k))
        ugrid = _twins_by_first_use(np.roll(ugrid, -k0, axis=0), twins)
    return [(var, int(ugrid[k][j] == u)) for (u, k, j), var in shape.x.items()]


def _twins_by_first_use(ugrid: np.ndarray, twins: list[list[int]]) -> np.ndarray:
    """Relabel each twin group so that its members are used in order of their first
    slot (the rule of ``symmetry``); the classes are interchangeable, the cost is the same."""
    out = ugrid.copy()
    flat = [int(u) for u in ugrid.reshape(-1)]
    for g in twins:
        used = list(dict.fromkeys(u for u in flat if u in g))
        rename = dict(zip(used + [u for u in g if u not in used], g))
        for u_old, u_new in rename.items():
            out[ugrid == u_old] = u_new
    return out


def read_plan(inst: Instance, shape: Shape, value) -> tuple[np.ndarray, list[int], list[int]]:
    """(grid, cuts, micro_batches) of the solution, given ``value(var) -> number``."""
    a = inst.arrays
    D, P = shape.D, shape.P
    ugrid = np.zeros((D, P), dtype=np.int64)
    for (u, k, j), var in shape.x.items():
        if value(var) > 0.5:
            ugrid[k, j] = u
    # a class's slots get its devices in slot order (at whatever clock each slot has)
    grid = np.array([[shape.units[u][0] for u in row] for row in ugrid], dtype=np.int64)
    classes = {tuple(c): c for c in shape.units if len(c) > 1}
    grid = _label_in_rank_order(grid, list(classes.values()))
    if shape.n_layers is not None:
        counts = [int(round(value(v))) for v in shape.n_layers]
    else:
        counts = [sum(1 for l in range(a.L) if value(shape.y[l, j]) > 0.5) for j in range(P)]
    cuts = [0] + list(np.cumsum(counts).astype(int))
    if shape.mb is None:
        mb = [a.M // D] * D
    else:
        mb = [1 + int(np.argmax([value(b) for b in row])) for row in shape.mb]
    return grid, cuts, mb


def read_solution(inst: Instance, shape: Shape, value) -> Any:
    """The solution as a plan, with the clock of every slot (§3.8)."""
    from ..plan import Plan
    grid, cuts, mb = read_plan(inst, shape, value)
    clocks = None
    if shape.levels and any(shape.levels):
        clocks = {}
        for (u, k, j), var in shape.x.items():
            if value(var) > 0.5 and shape.levels[u]:
                g = int(grid[k, j])
                clocks[inst.ids[g]] = inst.devices[g].levels[shape.levels[u]][0]
    return Plan.from_indices(inst.ids, grid, cuts, mb, clocks)
