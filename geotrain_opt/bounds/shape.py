"""The bound of one shape (D, P): its constants (micro-batches of the busiest and the
lightest replica, the ring's coefficient, the heaviest stage) and the bounds by
compute, by tiers, by sorted tiers and by the merge tier (merge.py), the largest of
which holds (formulations/proofs.md §8)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geotrain_opt.bounds.knobs import INF, SLOW_PLACES
from geotrain_opt.bounds.merge import MergeCases
from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost import stagecost as sc
from geotrain_opt.cost.tariffs import priced_floors
from geotrain_opt.problem.tolerances import TINY

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.bounds.cuts import ShapeBounds


@dataclass(frozen=True)
class ShapeBound:
    """A valid lower bound on the primary objective of every plan of one shape."""

    D: int
    P: int
    value: float            # inf: no plan of this shape is feasible
    by: str                 # the bound that set it: memory, limit, compute, tiers
    T: float                # the bound on the iteration time
    E: float                # the bound on the energy


def bound_shape(sb: "ShapeBounds", D: int, P: int, cheap: bool = False) -> ShapeBound:
    """The bound of shape (D, P): inf where its memory or a limit rules it out.
    ``cheap``: memory and compute only (work and the replicas' periods, no link):
    weaker, a fraction of the cost, and valid alone (instance_bound orders the shapes
    by it and skips the full bound of those it already puts above the least)."""
    a = sb.a
    m_light = a.M // D if a.uniform else 1
    _S, q_light = (int(v) for v in sc.flushes(a, m_light))
    if not sb._memory_ok(D, P, q_light):
        return ShapeBound(D, P, INF, "memory", INF, INF)
    if cheap:
        # without a ring term, c = 0: a bound on max_k T_k, as the ringless one below
        return _limits(sb, D, P, _Shape(sb, D, P, ringless=True).compute_bound(), "compute")
    T, by = _Shape(sb, D, P).time_bound()
    if D > 1 and P > 1:
        # the rings overlap the drain, so the bounds with a ring count only part of the
        # fill; the same bounds without any ring keep all of it (T >= max_k T_k)
        T_pipe, by_pipe = _Shape(sb, D, P, ringless=True).time_bound()
        if T_pipe > T:
            T, by = T_pipe, by_pipe
    return _limits(sb, D, P, T, by)


def _limits(sb: "ShapeBounds", D: int, P: int, T: float, by: str) -> ShapeBound:
    """The shape's bound from its time bound T: the energy bound, the ε-limits, the
    primary objective."""
    a, obj = sb.a, sb.inst.objective
    if obj.max_time_s is not None and T > obj.max_time_s:
        return ShapeBound(D, P, INF, "limit", T, INF)
    E = a.M * sb.W * sb.j_per_flop + float(sb.pw_pre[D * P]) * T
    if obj.max_energy_j is not None and E > obj.max_energy_j:
        return ShapeBound(D, P, INF, "limit", T, E)
    C, Q = priced_floors(sb.inst, a.M * sb.W, T, D * P)
    if (obj.max_cost_usd is not None and (C or 0.0) > obj.max_cost_usd) or \
            (obj.max_carbon_g is not None and (Q or 0.0) > obj.max_carbon_g):
        return ShapeBound(D, P, INF, "limit", T, E)
    return ShapeBound(D, P, float(objmod.primary(obj, T, E, C, Q)), by, T, E)


class _Shape(MergeCases):
    """One shape's constants and its relaxations, each a method (the merge tier's
    cases in MergeCases); ``sb`` holds the per-instance work."""

    def __init__(self, sb: "ShapeBounds", D: int, P: int, ringless: bool = False) -> None:
        self.sb, self.D, self.P = sb, D, P
        self.ringless = ringless          # every ring term 0: bounds on max_k T_k alone
        a = self.a = sb.a
        self.M = M = a.M
        self.m = -(-M // D)                      # the busiest replica's micro-batches
        self.m_light = M // D if a.uniform else 1
        self.s_max = float(sb.speed_desc[0])
        self.busy_P = sb._busiest(P)
        self.W, self.hop, self.A = sb.W, sb.hop_min, a.A
        self.flush_of = {k: int(sc.flushes(a, k)[0]) for k in {self.m, self.m_light}}
        self.tiers = sb.tiers
        self.lv = self.tiers.levels
        self.cring = 0.0 if ringless else 2.0 * (D - 1) / D * a.ring_bytes
        self.N_big = sb._heaviest(P)
        self.ring_lat = 2.0 * (D - 1) * sb.alpha_min if D > 1 and not ringless else 0.0
        self.c = self.c_tail = 0.0      # the drain's share of the fill where a ring follows (time_bound)

    def lead(self, S: int) -> float:
        """The compute's multiplier in T_k - d_kj: S flushes less the drain's share c,
        the backward share 1 - rho (formulations/proofs.md §8)."""
        return S - self.c

    def lead_comm(self, S: int) -> float:
        """The communication's: a drain holds half of the fill's exposed time and hops."""
        return S - 0.5 if self.c > 0.0 else float(S)

    def filled(self, S: int, fill: float, s_top: float) -> float:
        """S flushes' fill as T_k - d_kj keeps it, ``fill`` a lower bound whose compute
        is W / s_top: (S - c) compute + (S - 1/2) communication + the last stage's
        backward, which no drain holds (at least a layer's and the head's)."""
        if self.c == 0.0:
            return S * fill
        comp = self.W / s_top
        return self.lead(S) * comp + self.lead_comm(S) * max(fill - comp, 0.0) + self.c_tail / s_top

    def time_bound(self) -> tuple[float, str]:
        """The bound on the iteration time and the relaxation that set it."""
        T_compute = self.compute_bound()
        if self.D > 1 and self.P > 1 and not self.ringless:
            # every bound below adds a ring to a replica's time, and a ring may overlap the
            # drain of the stages before it (model.md §3.3): the drain holds the backward c of
            # the stages' compute but the last's and half the communication, so each replica
            # counts its fill that much less (filled), and the work bound drops c per replica
            back = 1.0 - self.a.fwd_share
            self.c = max(back, 0.5)
            self.c_tail = back * (self.sb._w_min + self.a.head_work)
            self.compute = self.work(self.sb.speed_desc)
        T_tiers = self.tiers_bound()
        T_sorted, ring_s = self.sorted_bound()
        self.ring_floor(ring_s)
        T_merge = max(self.merge("bandwidth"), self.merge("hop"))
        T = max(T_compute, T_tiers, T_sorted, T_merge)
        by = ("compute" if T == T_compute else "tiers" if T == T_tiers
              else "sorted tiers" if T == T_sorted else "merge tier")
        return T, by

    def compute_bound(self) -> float:
        """Work spread over the D P fastest devices; the replicas' periods."""
        self.compute = self.work(self.sb.speed_desc)
        return max(self.compute, self.replicas(0.0))

    def tiers_bound(self) -> float:
        """x = slowest pipeline link of some replica, y = slowest ring link of some ring."""
        D, P, A, tiers, lv, sb = self.D, self.P, self.A, self.tiers, self.lv, self.sb
        xs = range(tiers.first_fit(P), len(lv)) if P > 1 else [None]
        ys = range(tiers.first_fit(D), len(lv)) if D > 1 else [None]
        T_tiers = INF
        for xi in xs:
            # x is the least, over replicas, of a replica's slowest link: every replica has one as slow
            pipe_x = max(self.compute, self.replicas(0.0, 0.0) if xi is None
                         else self.replicas(A * float(lv[xi]), sb._slow_link(float(lv[xi]))[1]))
            for yi in ys:
                if pipe_x >= T_tiers:
                    break
                if xi is not None and yi is not None and not tiers.joint(xi, P, yi, D, D + P - 1):
                    continue
                ring = 0.0 if yi is None or self.ringless else (self.cring * self.N_big * float(lv[yi])
                                               + 2.0 * (D - 1) * sb._slow_link(float(lv[yi]))[0])
                T_tiers = min(T_tiers, pipe_x + ring)
                break                       # higher y only costs more
        return T_tiers

    def sorted_bound(self) -> tuple[float, float]:
        """(the bound, its ring term): the i best rings are i disjoint D-sets, so the
        i-th best ring's slowest link is no faster than the tier where i such sets fit;
        with R >= c N_j beta_j for every stage, R >= c N / sum_j 1/beta_j. Likewise the
        replica with the slowest link: D disjoint P-sets must fit below it."""
        D, P, A, tiers, lv, sb = self.D, self.P, self.A, self.tiers, self.lv, self.sb
        if not (P > 1 or D > 1):
            return 0.0, 0.0
        pipe_s = 0.0
        if P > 1:
            bx = float(lv[min(tiers.nth_fit(P, D), len(lv) - 1)])
            pipe_s = self.replica(self.m_light, self.s_max, float(sb.speed_pre[P]), A * bx, sb._slow_link(bx)[1])
        ring_s = 0.0
        if D > 1 and not self.ringless:
            betas = [float(lv[min(tiers.nth_fit(D, i), len(lv) - 1)]) for i in range(1, P + 1)]
            # the slowest ring still carries a stage of at least one layer
            ring_s = self.cring * sb._n_min * betas[-1] + 2.0 * (D - 1) * sb._slow_link(betas[-1])[0]
            if min(betas) > 0:
                ring_s = max(ring_s, self.cring * sb.N_all / sum(1.0 / b for b in betas) + self.ring_lat)
        return max(self.compute, self.replicas(0.0), pipe_s) + ring_s, ring_s

    def ring_floor(self, ring_s: float) -> None:
        """R0, the ring every plan pays at least, and b1, ring_lat1: the fastest tier
        that holds a ring and its latency (an exempt stage's ring pays them)."""
        D, tiers, lv = self.D, self.tiers, self.lv
        self.R0 = self.b1 = self.ring_lat1 = 0.0
        if D > 1 and not self.ringless:
            self.b1 = float(lv[min(tiers.first_fit(D), len(lv) - 1)])
            self.ring_lat1 = 2.0 * (D - 1) * self.sb._slow_link(self.b1)[0]
            self.R0 = max(ring_s, self.cring * self.N_big * self.b1 + self.ring_lat1)

    def replica(self, m: int, s_top: float, s_sum: float, occ: float, slow_hop: float = 0.0, n_slow: int = 1) -> float:
        S, fill, tau_rest = self.replica_parts(m, s_top, s_sum, occ, slow_hop, n_slow)
        return (self.filled(S, fill, s_top)
                + (m - S) * max(tau_rest, self.busy_P / s_top, self.sb._busiest_row(self.P, s_top)))

    def replica_parts(self, m: int, s_top: float, s_sum: float, occ: float, slow_hop: float = 0.0,
                      n_slow: int = 1, exact: list[tuple[float, float]] | None = None) -> tuple[int, float, float]:
        """T_k of a replica with m micro-batches whose fastest device runs at most
        s_top, whose devices add up to at most s_sum, and whose slowest pipeline
        link is busy ``occ`` per message: the fill passes every stage once and
        every link twice; the period is at least the busiest stage of the best
        cut, the link's occupancy, and (kappa) the average of the stage rows.
        ``slow_hop``: the least alpha + A/beta of a link as slow as that one.
        ``exact``: instead, (occupancy, alpha + A/beta) of each of the P-1 links."""
        S = self.flush_of[m]
        if exact is not None:
            occs = [max(o, self.sb.occ_min) for o, _h in exact]
            # the fill passes each link twice and holds both its stages kappa o each way
            fill = self.W / s_top + 2.0 * sum(max(self.sb.alpha_min + o, h) for o, h in exact) \
                + 4.0 * self.a.kappa * sum(occs)
            rows = (self.W / s_top + 4.0 * self.a.kappa * sum(occs)) / self.P
            beside = self.sb._w_min / s_top + 2.0 * self.a.kappa * max(occs)
            return S, fill, max(self.W / s_sum, max(occs), rows, beside)
        fill = self.W / s_top + 2.0 * (self.P - 1) * self.hop
        if self.P > 1:
            fill = max(fill, self.W / s_top + 2.0 * (self.P - 1 - n_slow) * self.hop + 2.0 * n_slow * max(self.sb.alpha_min + occ, slow_hop))
        # rows: every link is busy at least occ_min, the slowest one occ; the fill
        # holds every stage for the exposed time of its links too (kappa o, at least)
        busy = n_slow * max(occ, self.sb.occ_min) + (self.P - 1 - n_slow) * self.sb.occ_min if self.P > 1 else 0.0
        fill += 4.0 * self.a.kappa * busy
        rows = (self.W / s_top + 4.0 * self.a.kappa * busy) / self.P if self.P > 1 else 0.0
        # the two stages beside the slow link each carry a layer and 2 kappa occ
        beside = self.sb._w_min / s_top + 2.0 * self.a.kappa * occ if self.P > 1 else 0.0
        # the period without the cut's own largest row (busy_P, _busiest_row)
        return S, fill, max(self.W / s_sum, occ, rows, beside)

    def with_ring(self, desc: np.ndarray, ring_coef: float, ring_lat: float, exempt: int | tuple[int, ...] = 0, occ: float = 0.0,
                  slow_hop: float = 0.0, n_slow: int = 1, which: str = "every", isolated: bool = False,
                  exact: list[tuple[float, float]] | None = None) -> float:
        """A replica plus a ring of ring_coef per parameter of its stage, with one
        cut for both (the least over the cuts of T_k + R): for ``every`` replica,
        the larger over the busiest and the slowest-topped one; for ``some``
        replica, one with the lightest load on the fastest devices. ``exempt``
        stages' rings cross no slow link (they pay the fastest ring tier); ``occ`` > 0: the replica has n_slow links that
        slow (one of them, anywhere, in its stage rows when P is small).
        ``isolated``: the exempt stages are some ``exempt`` positions whose
        pipeline neighbours all lie in other sites (sites filled by their rings),
        so the replica's slow links are exactly the links beside them, for the
        least over those positions. ``exact``: (occupancy, alpha + A/beta) of
        each of the replica's P-1 links, in order."""
        s_top, s_Dth, s_P = float(desc[0]), float(desc[self.D - 1]), float(desc[:self.P].sum())
        kinds = (((self.m, s_top, s_P), (self.m_light, s_Dth, min(self.P * s_Dth, s_P))) if which == "every"
                 else ((self.m_light, s_top, s_P),))
        fast = (self.cring * self.b1, self.ring_lat1)      # an exempt stage's ring: inside a site, not free
        if isolated:
            best = INF
            for ex in itertools.combinations(range(self.P), exempt):
                links = tuple(i for i in range(self.P - 1) if i in ex or i + 1 in ex)
                out = 0.0
                for mk, top, ssum in kinds:
                    S, fill, tau_rest = self.replica_parts(mk, top, ssum, occ, slow_hop, len(links))
                    out = max(out, self.filled(S, fill, top) + self.sb._joint_cut(self.P, top, mk - S, tau_rest, ring_coef, ex, occ,
                                                               at=links, ring_lat=ring_lat, fast=fast))
                best = min(best, out)
            return best
        slow_occ = occ if occ > 0.0 and 1 < self.P <= SLOW_PLACES + 1 else None
        links = None if exact is None else tuple(o for o, _h in exact)
        out = 0.0
        for mk, top, ssum in kinds:
            S, fill, tau_rest = self.replica_parts(mk, top, ssum, occ, slow_hop, n_slow, exact)
            out = max(out, self.filled(S, fill, top) + self.sb._joint_cut(self.P, top, mk - S, tau_rest, ring_coef, exempt, slow_occ,
                                                       n_slow, ring_lat=ring_lat, fast=fast, links=links))
        return out

    def replicas(self, occ: float, slow_hop: float = 0.0, desc: np.ndarray | None = None, n_slow: int = 1) -> float:
        # the busiest replica; and the one whose fastest device is slowest: the D
        # replicas' fastest devices are D different devices, so one runs at most s_D
        desc = self.sb.speed_desc if desc is None else desc
        s_top, s_Dth, s_P = float(desc[0]), float(desc[self.D - 1]), float(desc[:self.P].sum())
        return max(self.replica(self.m, s_top, s_P, occ, slow_hop, n_slow),
                   self.replica(self.m_light, s_Dth, min(self.P * s_Dth, s_P), occ, slow_hop, n_slow))

    def work(self, desc: np.ndarray) -> float:
        """Work over the D P speeds ``desc`` (fastest first), with the bubble: replica
        k's T_k >= sum_j w_j/s_j + (m_k - 1) max_j w_j/s_j + 2 (P-1) h, so within
        T' = T - 2(P-1)h it runs m_k <= 1 + sum_j (T' s_j / W - 1)^+ micro-batches;
        summed over the replicas, M <= D + sum_i (T' s_i / W - 1)^+, i.e.
        T' >= min_u (M - D + u) W / (s_1 + ... + s_u). Before a ring (c > 0, time_bound):
        T_k - d >= (m_k - c) max_j w_j/s_j >= (m_k - c) W / sum_j s_j, so the work is
        (M - c D) W / (sum of the D P fastest) and the bubble is left out."""
        if self.c > 0.0:
            return (self.M - self.c * self.D) * self.W / float(desc[: self.D * self.P].sum())
        u = np.arange(1, self.D * self.P + 1)
        bubble = float(((self.M - self.D + u) * self.W / np.cumsum(desc[: self.D * self.P])).min()) + 2.0 * (self.P - 1) * self.hop
        return max(self.M * self.W / float(desc[: self.D * self.P].sum()), bubble)

    def split_work(self, desc: np.ndarray, k_max: int, f_s: float, occ_z: float) -> float:
        """Least T at which k <= k_max whole replicas (bubble capacity on the fastest
        k P speeds) and D - k split ones (fill >= f_s, period >= occ_z, so at most
        1 + (T - f_s) / occ_z micro-batches each) can run M micro-batches. Before a
        ring (c > 0): a split one runs 1 + (T - (1 - c) f_s) / occ_z, a whole one
        c + T (its speeds) / W (see ``work``)."""
        top = desc[: k_max * self.P]
        ks = np.arange(k_max + 1)
        two_h = 2.0 * (self.P - 1) * self.hop
        c = self.c
        f_s = (1.0 - c) * f_s
        cum = np.concatenate([[0.0], np.cumsum(top)])

        def capacity(T: float) -> float:
            if c > 0.0:
                whole = ks * c + T * cum[ks * self.P] / self.W
            else:
                whole = ks + np.concatenate([[0.0], np.cumsum(np.maximum(0.0, (T - two_h) * top / self.W - 1.0))])[ks * self.P]
            g = 1.0 + (T - f_s) / max(occ_z, TINY)
            return float((whole + (self.D - ks) * g).max())

        lo = f_s
        if capacity(lo) >= self.M:
            return lo
        hi = 2.0 * lo
        while capacity(hi) < self.M:
            hi *= 2.0
        for _ in range(40):          # capacity(lo) < M throughout: lo stays a valid bound
            mid = 0.5 * (lo + hi)
            if capacity(mid) >= self.M:
                hi = mid
            else:
                lo = mid
        return lo

    def penalties(self, kind: str, z: float) -> tuple[float, float, float, float]:
        """(occupancy, hop, ring with the heaviest stage, ring with one layer) of a
        link no better than z: z a bandwidth tier (1/beta), or a hop tier
        (alpha + A/beta; a ring pays 2(D-1) alpha + c N / beta >= k hop with
        k = min(2(D-1), c N / A))."""
        if kind == "bandwidth":
            alpha_z, hop_z = self.sb._slow_link(z)
            lat = 0.0 if self.ringless else 2.0 * (self.D - 1) * alpha_z
            return self.A * z, hop_z, self.cring * self.N_big * z + lat, self.cring * self.sb._n_min * z + lat
        k_big, k_one = min(2.0 * (self.D - 1), self.cring * self.N_big / self.A), min(2.0 * (self.D - 1), self.cring * self.sb._n_min / self.A)
        return self.sb.occ_min, z, k_big * z, k_one * z
