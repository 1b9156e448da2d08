"""The per-instance side of the bounds: sorted speeds and capacities, the slowest
links of each tier, and the cut problems (least largest stage, least peak memory,
one cut for the period and the ring), each solved once per (P, ...) and cached."""
from __future__ import annotations

import itertools
import math
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from geotrain_opt.bounds.knobs import INF, SLOW_PLACES
from geotrain_opt.bounds.shape import ShapeBound, bound_shape
from geotrain_opt.problem.tiers import Stopped, _check, _Inside, _speeds_by_label, _Tiers, link_tiers
from geotrain_opt.cost import stagecost as sc
from geotrain_opt.decisions.clocks import least_j_per_flop
from geotrain_opt.problem.tolerances import TINY

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance


def _least(values: np.ndarray) -> float:
    """The least candidate; a NaN (0 * inf) counts as 0, never as no candidate: skipping
    it could leave a shape's bound at inf, closing a shape that has plans."""
    return float(np.nan_to_num(values, nan=0.0).min())


def _min_max_partition(values: np.ndarray, P: int, extra: np.ndarray) -> float:
    """Least, over cuts of the layers into P contiguous non-empty stages, of the
    largest stage total; ``extra[j]`` is added to stage j (embedding, head). Each
    stage's every (lo, l) at once: an L x L table per stage."""
    L = len(values)
    pre = np.concatenate([[0.0], np.cumsum(values)])
    # best[l]: least max over the first j+1 stages covering layers [0, l)
    best = pre + extra[0]
    best[0] = INF
    lo, hi = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
    span = pre[hi] - pre[lo]
    for j in range(1, P):
        valid = (lo >= j) & (lo < hi)               # previous stages cover [0, lo)
        best = np.where(valid, np.maximum(best[:, None], span + extra[j]), INF).min(axis=0)
    return float(best[L])


def _least_where(m: np.ndarray, where: np.ndarray) -> float:
    """The least entry of ``m`` where ``where`` holds (inf where it holds nowhere)."""
    return float(np.min(m, where=where, initial=INF))


class ShapeBounds:
    """Bounds for every shape of one instance (the per-instance work done once)."""

    def __init__(self, inst: "Instance", stop: Callable[[], bool] | None = None) -> None:
        """``stop()`` true between the steps (seconds each at thousands of GPUs):
        :class:`~geotrain_opt.problem.tiers.Stopped`."""
        self.inst, self.stop = inst, stop
        started = time.perf_counter()
        _check(stop)
        a = self.a = inst.arrays
        n = inst.n
        self.speed_desc = np.sort(a.speed)[::-1]
        self.speed_pre = np.concatenate([[0.0], np.cumsum(self.speed_desc)])
        self.cap_desc = np.sort(a.mem_cap)[::-1]
        self.pw_pre = np.concatenate([[0.0], np.cumsum(np.sort(a.p_wait))])
        self.W = float(a.w_prefix[-1] + a.head_work)
        self.N_all = float(a.par_prefix[-1] + a.emb_params + a.head_params)
        # at the most frugal clock of every device (§10: a lower clock can spend less per FLOP)
        self.j_per_flop = least_j_per_flop(a)
        # the least link figures over the pairs of two devices, each one masked pass
        # (a tenth of a second at 4,096 GPUs; no n x n copy is sorted: issue 39)
        self._off = ~np.eye(n, dtype=bool)
        _check(stop)
        self.alpha_min = _least_where(a.alpha, self._off) if n > 1 else 0.0
        _check(stop)
        self._hop = np.multiply(a.inv_beta, a.A)
        self._hop += a.alpha                            # alpha + A / beta, one array
        self.hop_min = _least_where(self._hop, self._off) if n > 1 else 0.0
        _check(stop)
        self.occ_min = float(a.A * _least_where(a.inv_beta, self._off)) if n > 1 else 0.0
        self._n_min = float(np.diff(a.par_prefix).min())
        self._w_min = float(np.diff(a.w_prefix).min())
        _check(stop)
        self.tiers = link_tiers(inst, stop=stop)
        self.hop_tiers = link_tiers(inst, "hop", stop=stop, weights=self._hop)
        self._wl, self._pl, self._al = np.diff(a.w_prefix), np.diff(a.par_prefix), np.diff(a.act_prefix)
        self._uniform: bool | None = None
        self._bw: dict[int, float] = {}
        self._bn: dict[int, float] = {}
        self._mem: dict[tuple[int, int], float] = {}
        self._prof: dict[tuple[int, int], np.ndarray] = {}
        self._rows: dict[tuple[int, float], float] = {}
        self._slow: dict[float, tuple[float, float]] = {}
        self._comp_speeds: dict[int, list[np.ndarray]] = {}
        self.init_s = time.perf_counter() - started      # what a whole pass over the links costs here

    def site_links(self, mt: _Inside, y: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``mt.site_links`` of this instance's links. The first call computes the
        least links between tier-0 components, a pass over every link (a second at
        4,096 GPUs): past ``stop``, or with less time left than this object's own
        precomputation took, :class:`~geotrain_opt.problem.tiers.Stopped` instead."""
        a = self.a
        if not mt.has_base(a.inv_beta, a.alpha, a.A):
            _check(self.stop)
            left = getattr(self.stop, "left", None)
            if left is not None and left() < self.init_s:
                raise Stopped
        return mt.site_links(y, a.inv_beta, a.alpha, a.A)

    def _slow_link(self, b: float) -> tuple[float, float]:
        """(least alpha, least alpha + A/beta) over the links no faster than tier b
        (1/beta >= b; inf where none is): a masked pass per tier asked, and the bounds
        ask a handful (at most 11 on the bundled and generated instances)."""
        got = self._slow.get(b)
        if got is None:
            slow = self._off & (self.a.inv_beta >= b)
            got = self._slow[b] = (_least_where(self.a.alpha, slow), _least_where(self._hop, slow))
        return got

    def _profile(self, kind: str, tiers: _Tiers, t: int, k: int) -> np.ndarray:
        """The k fastest speeds of the best component of tier t with at least k
        devices, elementwise over those components: no such component is faster."""
        key = (kind, t, k)
        prof = self._prof.get(key)
        if prof is None:
            comps = self._components(kind, tiers, t)
            prof = np.zeros(k)
            for sp in comps:
                if len(sp) < k:
                    break
                prof = np.maximum(prof, sp[:k])
            self._prof[key] = prof
        return prof

    def _components(self, kind: str, tiers: _Tiers, t: int) -> list[np.ndarray]:
        """Each component's speeds at tier t, fastest first, largest components first."""
        comps = self._comp_speeds.get((kind, t))
        if comps is None:
            comps = sorted(_speeds_by_label(tiers.labels[t], self.a.speed), key=len, reverse=True)
            self._comp_speeds[kind, t] = comps
        return comps

    def _ring_slots(self, view: _Inside, y: int, D: int, P: int) -> np.ndarray:
        """Speeds u_1 >= ... >= u_P such that, when every ring lies inside one
        component of tier y (of those in ``view``), some ordering of any replica's stages runs at most u:
        a component holding r disjoint rings gives the i-th of them a fastest device
        no faster than its own i-th fastest (the rings' maxima are distinct devices),
        and a replica's device in a ring is no faster than the ring's fastest. Empty
        if the components cannot hold P rings."""
        key = (y, D, P)
        got = view.slots.get(key)
        if got is None:
            offers = [sp[: len(sp) // D] for sp in view.components(y) if len(sp) >= D]
            pool = np.sort(np.concatenate(offers))[::-1] if offers else np.zeros(0)
            got = view.slots[key] = pool[:P] if len(pool) >= P else np.zeros(0)
        return got

    def _slot_replica(self, u: np.ndarray, S: float, steady: int, comm_fill: float, tau_rest: float,
                      S_comm: float | None = None) -> float:
        """Least S (fill) + steady (period) of a replica whose stages run at most the
        speeds u (fastest first, in some order): every stage holds at least one
        layer of at least the lightest layer's work, the rest of the work (other
        layers' excess, the head) at the fastest speed; for each candidate period
        tau (a value some stage's row takes) the fill is least with the spare layers
        on the fastest stages that keep their row <= tau."""
        a = self.a
        P, L, w = len(u), a.L, self._w_min
        if w <= 0.0:
            return 0.0
        n_hi = L - P + 1
        n = np.arange(1, n_hi + 1)
        tau = np.unique((n[:, None] * w / u[None, :]).ravel())
        caps = np.clip(np.floor(tau[:, None] * u[None, :] / w + 1e-9), 0, n_hi)
        ok = (caps >= 1).all(axis=1) & (caps.sum(axis=1) >= L)
        tau, caps = tau[ok], caps[ok]
        if len(tau) == 0:
            return INF
        room = caps - 1.0
        before = np.concatenate([np.zeros((len(tau), 1)), np.cumsum(room, axis=1)[:, :-1]], axis=1)
        layers = 1.0 + np.clip((L - P) - before, 0.0, room)
        rest = float(a.w_prefix[-1] + a.head_work - L * w) / float(u[0])
        comp = (layers * w / u[None, :]).sum(axis=1) + rest
        S_comm = S if S_comm is None else S_comm      # (the comm's multiplier; model.md §3.3)
        return float((S * comp + S_comm * comm_fill + steady * np.maximum(tau, tau_rest)).min())

    def _busiest(self, P: int) -> float:
        """Least largest stage work (FLOP per micro-batch) over the cuts into P stages."""
        if P not in self._bw:
            extra = np.zeros(P)
            extra[-1] += self.a.head_work
            self._bw[P] = _min_max_partition(self._wl, P, extra)
        return self._bw[P]

    def _busiest_row(self, P: int, s_top: float) -> float:
        """Least, over cuts into P stages, of the largest stage row t_j + 2 kappa
        (o_{j-1} + o_j) on devices of speed s_top, every link busy at least occ_min."""
        key = (P, s_top)
        if key not in self._rows:
            extra = np.zeros(P)
            extra[-1] += self.a.head_work
            if P > 1:
                nb = np.full(P, 2.0)
                nb[0] = nb[-1] = 1.0
                extra += s_top * 2.0 * self.a.kappa * self.occ_min * nb
            self._rows[key] = _min_max_partition(self._wl, P, extra) / s_top
        return self._rows[key]

    def _heaviest(self, P: int) -> float:
        """Least largest stage parameter count over the cuts into P stages."""
        if P not in self._bn:
            extra = np.zeros(P)
            extra[0] += self.a.emb_params
            extra[-1] += self.a.head_params
            self._bn[P] = _min_max_partition(self._pl, P, extra)
        return self._bn[P]

    def _uniform_layers(self) -> bool:
        """Every layer has the same work and parameters (the joint cut bound needs it)."""
        if self._uniform is None:
            self._uniform = bool(np.allclose(self._wl, self._wl[0]) and np.allclose(self._pl, self._pl[0]))
        return self._uniform

    def _row_caps(self, P: int, s_top: float, slow: tuple[float, ...] | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For identical layers: the candidate largest stage rows X (work units on
        s_top; values some stage's row takes), caps[i, j] the most layers stage j may
        hold with its row <= X[i], which X admit a cut at all, and each stage's
        parameters besides its layers (embedding, head). Rows as in _cut_fronts."""
        key = ("caps", P, s_top, slow)
        got = self._prof.get(key)
        if got is None:
            a = self.a
            L, w = a.L, float(self._wl[0])
            hx = np.zeros(P)
            hx[-1] += a.head_work
            if P > 1:
                occ = np.full(P - 1, self.occ_min)
                if slow is not None:
                    occ = np.maximum(occ, np.asarray(slow, dtype=float))
                hx[1:] += s_top * 2.0 * a.kappa * occ
                hx[:-1] += s_top * 2.0 * a.kappa * occ
            hn = np.zeros(P)
            hn[0] += a.emb_params
            hn[-1] += a.head_params
            n_hi = L - P + 1
            n = np.arange(1, n_hi + 1)
            X = np.unique((n[:, None] * w + hx[None, :]).ravel())
            # generous by 1e-9
            caps = np.clip(np.floor((X[:, None] - hx[None, :]) / w + 1e-9), 0, n_hi)
            ok = (caps >= 1).all(axis=1) & (caps.sum(axis=1) >= L)
            got = self._prof[key] = (X, caps, ok, hn)
        return got

    def _ring_front(self, P: int, s_top: float, exempt: tuple[int, ...], slow: tuple[float, ...] | None,
                    coef: float, lat: float, fast: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """For identical layers: each candidate largest row X (seconds on s_top) and
        the least ring R(X) over the cuts whose rows are all <= X, with one cut for
        both ring terms: every stage's ring at least fast[0] N_j + fast[1], the
        stages not in ``exempt`` also coef N_j + lat. A cut meets R when every stage
        holds at most the layers both terms allow at R (and its row allows at X)."""
        key = ("ring", P, s_top, exempt, slow, coef, lat, fast)
        got = self._prof.get(key)
        if got is not None:
            return got
        L, p = self.a.L, float(self._pl[0])
        X, caps, ok, hn = self._row_caps(P, s_top, slow)
        n_hi = L - P + 1
        n = np.arange(1, n_hi + 1)
        crossing = np.array([j not in exempt for j in range(P)])
        Nn = n[:, None] * p + hn[None, :]                                       # N_j with n layers
        Rc = np.unique(np.concatenate([(fast[0] * Nn + fast[1]).ravel(), (coef * Nn[:, crossing] + lat).ravel()]))
        # the most layers stage j may hold with its ring <= R
        top = np.where(crossing[None, :], np.minimum((Rc[:, None] - lat) / max(coef, TINY),
                                                     (Rc[:, None] - fast[1]) / max(fast[0], TINY)),
                       (Rc[:, None] - fast[1]) / max(fast[0], TINY))
        pc = np.clip(np.floor((top - hn[None, :]) / p + 1e-9), 0, n_hi)
        R = np.full(len(X), INF)
        rows = np.nonzero(ok)[0]
        block = max(1, 400_000 // max(1, len(Rc) * P))
        for b0 in range(0, len(rows), block):
            ix = rows[b0:b0 + block]
            room = np.minimum(caps[ix][:, None, :], pc[None, :, :])
            fit = (room >= 1).all(axis=2) & (room.sum(axis=2) >= L)
            any_fit = fit.any(axis=1)
            R[ix[any_fit]] = Rc[fit.argmax(axis=1)[any_fit]]
        got = self._prof[key] = (X / s_top, R)
        return got

    def _cut_fronts(self, P: int, s_top: float, exempt: int | tuple[int, ...] = 0,
                    slow: tuple[float, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """For identical layers: each candidate largest stage row X (seconds on speed
        s_top; a value some stage's row takes) and the least largest stage parameter
        count Y(X), over the cuts whose rows are all <= X, of the stages other than
        ``exempt`` freely chosen ones, or than the stages ``exempt`` names where it is
        a tuple (inf where no cut fits). A row is t_j + 2 kappa
        (o_{j-1} + o_j) with every link busy occ_min, or ``slow[i]`` for link i (between
        stages i and i+1) where that is more. Y is non-increasing in X."""
        key = ("front", P, s_top, exempt, slow)
        got = self._prof.get(key)
        if got is not None:
            return got
        a = self.a
        L, p = a.L, float(self._pl[0])
        X, caps, ok, hn = self._row_caps(P, s_top, slow)
        n_hi = L - P + 1
        n = np.arange(1, n_hi + 1)
        Yc = np.unique(np.concatenate([(n[:, None] * p + hn[None, :]).ravel(), [0.0]]))
        # for each Y candidate the layers stage j may hold with its parameters <= Y
        pc = np.clip(np.floor((Yc[:, None] - hn[None, :]) / p + 1e-9), 0, n_hi)
        Y = np.full(len(X), INF)
        rows = np.nonzero(ok)[0]
        # every (X, Y) pair at once, in blocks of X (fits is monotone in both, so the
        # least fitting Y of each X is the first True along Y)
        block = max(1, 400_000 // max(1, len(Yc) * P))
        for b0 in range(0, len(rows), block):
            ix = rows[b0:b0 + block]
            cap = caps[ix][:, None, :]
            room = np.minimum(cap, pc[None, :, :])
            if isinstance(exempt, tuple):
                room[:, :, list(exempt)] = cap[:, :, list(exempt)]
                fit = (room >= 1).all(axis=2) & (room.sum(axis=2) >= L)
            elif exempt == 0:
                fit = (room >= 1).all(axis=2) & (room.sum(axis=2) >= L)
            else:
                # exempt stages hold up to their row cap whatever their parameters: the
                # stages that fit no layer under Y must be exempt, the rest go by gain
                forced = room < 1
                n_forced = forced.sum(axis=2)
                gain = cap - room
                top = np.sort(np.where(forced, 0.0, gain), axis=2)[:, :, ::-1]
                top = np.concatenate([np.zeros(top.shape[:2] + (1,)), np.cumsum(top, axis=2)], axis=2)
                k = np.clip(exempt - n_forced, 0, P)
                extra = np.where(forced, gain, 0.0).sum(axis=2) + np.take_along_axis(top, k[:, :, None], axis=2)[:, :, 0]
                fit = (n_forced <= exempt) & (room.sum(axis=2) + extra >= L)
            any_fit = fit.any(axis=1)
            Y[ix[any_fit]] = Yc[fit.argmax(axis=1)[any_fit]]
        got = self._prof[key] = (X / s_top, Y)
        return got

    def _joint_cut(self, P: int, s_top: float, steady: float, tau_rest: float, ring_coef: float,
                   exempt: int | tuple[int, ...] = 0, slow_occ: float | None = None, n_slow: int = 1,
                   at: tuple[int, ...] | None = None, ring_lat: float = 0.0,
                   fast: tuple[float, float] = (0.0, 0.0), links: tuple[float, ...] | None = None) -> float:
        """Least, over the cuts, of steady * max(tau_rest, largest row) + the ring:
        ring_coef * largest stage parameter count (of all stages but ``exempt`` ones)
        + ring_lat, and at least fast[0] * largest of all stages + fast[1] (an exempt
        stage's ring stays inside a site, not free: no ring is faster than the fastest
        tier that holds one). The period and the ring of one plan come from the same
        cut (bounding them apart lets each pick its own best cut); the two ring terms
        each take their own least (a relaxation). ``slow_occ``: n_slow links (at most
        two placed, anywhere) are busy that long per message, or the links ``at`` if
        given; ``links``: every link's own occupancy (link i between stages i and i+1).
        For identical layers; otherwise the separate bound (a relaxation)."""
        has_exempt = exempt != 0 and (not isinstance(exempt, tuple) or len(exempt) > 0)
        n_ex = len(exempt) if isinstance(exempt, tuple) else exempt
        if not self._uniform_layers():
            heavy = self._heaviest(P)
            ring = max(ring_coef * heavy + ring_lat if not has_exempt else (ring_lat if n_ex < P else 0.0),
                       fast[0] * heavy + fast[1])
            return steady * max(tau_rest, self._busiest_row(P, s_top)) + ring
        def placed(at: tuple[int, ...]) -> tuple[float, ...]:
            return tuple(slow_occ if i in at else 0.0 for i in range(P - 1))

        places: list = [None]
        if links is not None and P > 1:
            places = [tuple(links)]
        elif slow_occ is not None and at is not None:
            places = [placed(at)] if at else [None]
        elif slow_occ is not None and P > 1:
            # as many of the slow links as SLOW_PLACES placements allow (at least one)
            k = min(n_slow, P - 1)
            while k > 1 and math.comb(P - 1, k) > SLOW_PLACES:
                k -= 1
            places = [placed(c) for c in itertools.combinations(range(P - 1), k)]
        best = INF
        # with the links and the exempt stages named (whole_sites), one cut for both ring
        # terms; elsewhere their own least each (a relaxation, much cheaper to share)
        one_ring = links is not None and isinstance(exempt, tuple) and has_exempt and fast[0] > 0.0
        for slow in places:
            if one_ring:
                # the exempt stages are named: one cut for both ring terms
                X, R = self._ring_front(P, s_top, exempt, slow, ring_coef, ring_lat, fast)
                best = min(best, _least(steady * np.maximum(tau_rest, X) + R))
                continue
            X, Y = self._cut_fronts(P, s_top, exempt, slow)
            # (a ring of no cost adds nothing, not 0 * inf where a front is empty)
            ring = (ring_coef * Y if ring_coef > 0.0 else 0.0) + ring_lat if n_ex < P else np.zeros_like(Y)
            if has_exempt and fast[0] > 0.0:
                # every stage's ring at the fastest ring tier, on the same candidate rows
                # (the rows do not depend on the exemption: the X lists are the same)
                ring = np.maximum(ring, fast[0] * self._cut_fronts(P, s_top, 0, slow)[1] + fast[1])
            best = min(best, _least(steady * np.maximum(tau_rest, X) + ring))
        return best

    def _memory_ok(self, D: int, P: int, q: int) -> bool:
        """Can the stage needing most memory, under the cut that makes it least, sit
        on D devices? (q: micro-batches per flush of the lightest replica). A DP over
        cuts, since a stage's memory depends on its position (in-flight count)."""
        key = (D if self.a.sharded_bytes else 1, P, q)       # ZeRO: the state depends on D (§15)
        if key not in self._mem:
            self._mem[key] = self._least_peak_memory(*key)
        return bool(self._mem[key] <= self.cap_desc[D - 1])

    def _least_peak_memory(self, D: int, P: int, q: int) -> float:
        """best[l]: the least peak memory of stages so far covering layers [0, l); each
        stage j takes layers [lo, hi), every (lo, hi) of it at once (an L x L table)."""
        a = self.a
        L = a.L
        best = np.full(L + 1, INF)
        best[0] = 0.0
        lo, hi = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
        for j in range(P):
            last = j == P - 1
            valid = (lo >= j) & (lo < hi) & (hi <= L - (P - 1 - j))
            N = sc.stage_params(a, lo, hi, j == 0, last)
            # the least activation scale of any device (§14: groups without sequence parallelism)
            mem = sc.stage_memory(a, N, sc.stage_act(a, lo, hi), last, sc.inflight(a, P, j, q), D, float(a.act_scale.min()))
            best = np.where(valid, np.maximum(best[:, None], mem), INF).min(axis=0)
        return float(best[L])

    def __call__(self, D: int, P: int) -> ShapeBound:
        return bound_shape(self, D, P)

    def cheap(self, D: int, P: int) -> ShapeBound:
        """Memory and compute only (bound_shape's ``cheap``)."""
        return bound_shape(self, D, P, cheap=True)
