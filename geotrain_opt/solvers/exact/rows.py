"""The rows of one (D, P) model, one method per family in the order of formulations/exact.md
(the order in which variables are created is part of what a CP-SAT run does, so it is fixed)."""
from __future__ import annotations

from typing import Any
import numpy as np
from geotrain_opt.cost import stagecost as sc
from geotrain_opt.decisions.clocks import model_units
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.exact.classes import (_unit_links, class_twins, device_classes,
                                                interchangeable_classes, unit_order)
from geotrain_opt.problem.tolerances import LIMIT_MARGIN
from geotrain_opt.solvers.exact.spec import Backend, BuildSpec, BuildTimeout, Terms
from geotrain_opt.solvers.exact.spec import scaled as _scaled
from geotrain_opt.solvers.exact.window import window_rows


def _identical_layers(inst: Instance) -> bool:
    return all(row == (1.0, 1.0, 1.0) for row in inst.model.layer_scale)


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
        # §3.8: a device (class) that lists lower clocks is one unit per clock (the clock
        # decision's model units); without clocks every class is one unit at level 0
        pairs = model_units(a, classes)
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
        self.mem_cap, self.p_wait, self.act_scale = a.mem_cap[first], a.p_wait[first], a.act_scale[first]
        self.al, self.ib, self.cross, self.exm = (_unit_links(m, units, self.unit_class)
                                                  for m in (a.alpha, a.inv_beta, a.cross, a.exposed))
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
        self.W_tot = W_tot = float(a.w_prefix[-1] + a.head_work)
        t_ub = W_tot / float((a.speed[:, None] * a.clock_frac).min())     # the slowest clock (§3.8)
        lk_ub = float((a.alpha + a.A * a.inv_beta).max())
        occ_ub = float(a.A * a.inv_beta.max())
        ex_ub = float(a.exposed.max())
        wan_ub = a.A * float(a.inv_cap.max()) * D * max(P - 1, 0)    # §3.2: D (P-1) messages per period
        tau_ub = max(t_ub + 4.0 * ex_ub, occ_ub, wan_ub) * (2.0 if a.gpipe else 1.0)   # GPipe: two phases
        Tk_ub = min(a.steps, M) * (P * t_ub + (P - 1) * (2 * lk_ub + 4 * ex_ub)) + (M - 1) * tau_ub
        if not a.gpipe:
            # 1F1B's window: at most q_f + 1 round trips of at most P rows and 2(P-1) hops per flush
            Tk_ub = max(Tk_ub, (M + min(a.steps, M)) * (P * tau_ub + 2 * (P - 1) * lk_ub) + M * tau_ub)
        self.N_tot = N_tot = float(a.par_prefix[-1] + a.emb_params + a.head_params)
        self.cring = cring = 2.0 * (D - 1) / D * a.ring_bytes
        R_ub = cring * N_tot * float(a.inv_beta.max()) + 2.0 * (D - 1) * float(a.alpha.max()) if D > 1 else 0.0
        if D > 1 and a.shared_wan:         # §3.2: every ring edge of every stage over one pair
            R_ub = max(R_ub, cring * N_tot * D * float(a.inv_cap.max()) + float(a.cap_alpha.max()))
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
                    from geotrain_opt.cost.tariffs import tariffs
                    waits = tariffs(self.inst)["cost_usd" if kind == "cost" else "carbon_g"].wait
                pw = float(np.sort(waits)[: D * P].sum())
                if pw > 0:
                    T_ub = min(T_ub, cutoff / pw)
            elif obj.lam > 0:
                T_ub = min(T_ub, cutoff * obj.time_ref_s / obj.lam)
        self.T_ub = T_ub
        self.t_ub, self.lk_ub, self.occ_ub, self.ex_ub, self.tau_ub, self.R_ub = (
            min(v, T_ub) for v in (t_ub, lk_ub, occ_ub, ex_ub, tau_ub, R_ub))
        self.tau_ub = tau_ub if a.shared_wan else self.tau_ub   # §3.2: its floor may pass T where m_k = S_k

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
        """Pipeline links: hop lk, occupancy oc, exposed time ex, period tau."""
        a, be, K, J, U, P, x = self.a, self.be, self.K, self.J, self.U, self.P, self.x
        al, ib, peers, t_unit = self.al, self.ib, self.peers, self.spec.t_unit
        lk, oc, tau = self.lk, self.oc, self.tau = {}, {}, {}
        self.ex = ex = {}
        for k in K:
            tau[k] = be.real(f"tau_{k}", self.tau_ub, t_unit)
            for j in range(P - 1):
                lk[k, j] = be.real(f"lk_{k}_{j}", self.lk_ub, t_unit)
                oc[k, j] = be.real(f"oc_{k}_{j}", self.occ_ub, t_unit)
                if a.mu > 0:            # A/gamma on messages between nodes: its own variable
                    ex[k, j] = be.real(f"ex_{k}_{j}", self.ex_ub, t_unit)
                for u in U:
                    self.tick()
                    row = [(al[u, v] + a.A * ib[u, v], x[v, k, j + 1]) for v in peers[u]]
                    be.ge(lk[k, j], row, 0.0, (x[u, k, j],))
                    be.ge(oc[k, j], [(a.A * ib[u, v], x[v, k, j + 1]) for v in peers[u]], 0.0, (x[u, k, j],))
                    if (k, j) in ex:
                        be.ge(ex[k, j], [(self.exm[u, v], x[v, k, j + 1]) for v in peers[u]], 0.0, (x[u, k, j],))
                be.ge(tau[k], [(1.0, oc[k, j])])
            # tau_k >= t_kj + 2 (e_{k,j-1} + e_kj): exposed communication (model.md §3)
            for j in J:
                be.ge(tau[k], self.stage_row(k, j))

    def stage_row(self, k: int, l: int) -> list:
        """Stage l's row t + 2 (e_{l-1} + e_l); e = kappa o without mu (no variable of its own)."""
        out = [(1.0, self.t[k, l])]
        for i in (l - 1, l):
            if (k, i) in self.ex:
                out.append((2.0, self.ex[k, i]))
            elif (k, i) in self.oc and self.a.kappa > 0:
                out.append((2.0 * self.a.kappa, self.oc[k, i]))
        return out

    def rings(self) -> None:
        """Data-parallel rings: R_j = Rb_j + Ra_j (the makespan places them, sync.py)."""
        be, K, J, U, D, x, al, ib, peers = self.be, self.K, self.J, self.U, self.D, self.x, self.al, self.ib, self.peers
        R_ub, t_unit, cring = self.R_ub, self.spec.t_unit, self.cring
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

    def makespan(self) -> None:
        """PT_k >= S_k (sum_j r_kj + 2 sum_j lk_kj) + (m_k - S_k) tau_k per value of m_k (r_kj: stage j's
        row), and under 1F1B every window row (exact.md §3.2); T over them: sync.py."""
        be, K, J, P, lk, tau = self.be, self.K, self.J, self.P, self.lk, self.tau
        self.T = be.real("T", self.T_ub, self.spec.t_unit)
        self.PT = {}
        self.tails: dict = {}         # tl_kj and dr_kjl, the blocks' drain (window.py)
        for k in K:
            self.PT[k] = pt = be.real(f"PT_{k}", self.T_ub, self.spec.t_unit)
            fill = [r for j in J for r in self.stage_row(k, j)] + [(2.0, lk[k, j]) for j in range(P - 1)]
            for m, S_k, _q, lits in self.m_cases(k):
                self.tick()         # 1F1B's window rows: thousands of long rows in a deep pipeline
                be.ge(pt, _scaled(fill, float(S_k)) + [(float(m - S_k), tau[k])], 0.0, lits)
                if not self.a.gpipe:
                    for window in window_rows(self, k, fill, m, S_k):
                        be.ge(pt, window, 0.0, lits)

    def memory(self) -> None:
        """state*N_j + act_j*inflight*scale_u (+ logits) <= memory of u if u holds (k, j); state at D
        (ZeRO, §15), scale_u the unit's activation scale (groups without sequence parallelism, §14)."""
        a, be, K, J, U, P, x, state = self.a, self.be, self.K, self.J, self.U, self.P, self.x, sc.state_per_param(self.a, self.D)
        for k in K:
            for j in J:
                for m, _S, q, lits in self.m_cases(k):
                    infl = int(sc.inflight(a, P, j, q))
                    params = _scaled(self.Npar[j], state)
                    logits = a.logits * int(sc.logits_inflight(a, infl)) if j == P - 1 else 0.0
                    const = state * self.N_c[j] + logits
                    for u in U:
                        self.tick()
                        terms = params + _scaled(self.act[j], infl * float(self.act_scale[u]))
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
            from geotrain_opt.cost.tariffs import tariffs
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
        if obj.max_energy_j is not None:   # a hair inside: an LP solver's 1e-7 must not pass the evaluator's limit
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
