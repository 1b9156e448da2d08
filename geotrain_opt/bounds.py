"""Lower bounds on the objective of every plan of a shape (D, P), and of the instance.

Each bound relaxes the cost model of formulations/model.md §3 in a way a reader
can check in a line (formulations/exact.md §8 states them with proofs):

- ``memory``: the stage that needs the most memory under the best cut still
  needs D devices that hold it; otherwise no plan of the shape exists;
- ``compute``: the busiest replica works at least M W / (sum of the D P fastest
  speeds); every replica's micro-batch period is at least the best integer
  cut's largest stage on the fastest device;
- ``tiers``: the links a plan may use. A replica's P devices are joined by its
  pipeline links and a ring's D devices by its ring links, so each lies in one
  connected component of the graph of links no slower than its slowest one.
  Over the tiers (distinct bandwidths) of the network this gives the slowest
  pipeline link x and ring link y that some replica and ring must have, jointly
  (a replica and a ring share a device, so they lie in one component);
- the time bound is max(compute, pipeline(x)) + ring(y), minimised over the
  feasible (x, y); energy adds the busy energy of the work at the least
  J/FLOP and the waiting power of the D P lowest-waiting devices over that time.

All are cheap (numpy over the tiers), so the exact driver prunes shapes with them
before building a model, and every solver reports the instance's bound, the least
over its shapes, with the gap of its plan to it.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from . import objective as objmod
from . import stagecost as sc

if TYPE_CHECKING:                     # pragma: no cover
    from .instance import Instance

INF = float("inf")
# the joint cut bound tries at most this many placements of a replica's slow links
# in its stage rows (as many links as that allows; the rest count in the cut-free
# period terms and the fill only)
SLOW_PLACES = 40
ISOLATED_SETS = 256      # placements of the whole rings' stages tried by the full-sites bound
SITE_ORDERS = 120        # orders of the sites that hold one ring each tried by the site-order bound
# joint cuts the whole-sites bound may try: placements of the whole rings times the
# sites of a replica's crossing stages
SITE_WORK = 1000
# the merge tier's cases are also taken with the components of the lowest tiers as
# sites (typically nodes and regions; each costs about one more pass)
LOWER_SITES, LOWER_SITES_MAX = 2, 10     # (at most this many sites)


@dataclass(frozen=True)
class ShapeBound:
    """A valid lower bound on the primary objective of every plan of one shape."""

    D: int
    P: int
    value: float            # inf: no plan of this shape is feasible
    by: str                 # the bound that set it: memory, limit, compute, tiers
    T: float                # the bound on the iteration time
    E: float                # the bound on the energy


def _min_max_partition(values: np.ndarray, P: int, extra: np.ndarray) -> float:
    """Least, over cuts of the layers into P contiguous non-empty stages, of the
    largest stage total; ``extra[j]`` is added to stage j (embedding, head)."""
    L = len(values)
    pre = np.concatenate([[0.0], np.cumsum(values)])
    # best[j][l]: least max over the first j+1 stages covering layers [0, l)
    best = np.full(L + 1, INF)
    for l in range(1, L + 1):
        best[l] = pre[l] + extra[0]
    best[0] = INF
    for j in range(1, P):
        nxt = np.full(L + 1, INF)
        for l in range(j + 1, L + 1):
            lo = np.arange(j, l)                       # previous stages cover [0, lo)
            cand = np.maximum(best[lo], pre[l] - pre[lo] + extra[j])
            nxt[l] = cand.min()
        best = nxt
    return float(best[L])


def _fewest_segments(sizes: np.ndarray, devices: int, P: int) -> int:
    """The fewest pieces, each of at most P devices inside one site (``sizes``,
    largest first), that hold ``devices`` devices: whole P-pieces first, then the
    sites' remainders, largest first (no piece holds more than a whole one)."""
    full = int((sizes // P).sum())
    if full * P >= devices:
        return -(-devices // P)
    rest = np.sort(sizes % P)[::-1]
    held = full * P + np.cumsum(rest)
    return full + int(np.searchsorted(held, devices)) + 1


class _Tiers:
    """Connected components of the graph of links with weight <= b, per tier b
    (weight: 1/beta, or alpha + A/beta)."""

    def __init__(self, inv_beta: np.ndarray) -> None:
        n = inv_beta.shape[0]
        off = inv_beta[~np.eye(n, dtype=bool)]
        self.levels = np.unique(off) if n > 1 else np.zeros(1)
        self.labels = []
        keep = []
        comp_of = np.arange(n)           # device -> its component at the current tier
        mat = np.asarray(inv_beta)       # slowest-needed link between two current components: the fastest pair
        for b in self.levels:
            adj = mat <= b
            c = len(mat)
            lab = np.arange(c)
            while True:       # label propagation: the least label reachable
                new = np.where(adj, lab[None, :], c).min(axis=1)
                new = new[new]
                if np.array_equal(new, lab):
                    break
                lab = new
            _u, merged = np.unique(lab, return_inverse=True)
            if len(_u) == c and self.labels:
                continue      # same components as the tier below: the lower value is the one to use
            comp_of = merged[comp_of]
            # contract: the fastest link between two new components is the least entry between their members
            order = np.argsort(merged, kind="stable")
            starts = np.concatenate([[0], np.nonzero(np.diff(merged[order]))[0] + 1])
            mat = np.minimum.reduceat(np.minimum.reduceat(mat[np.ix_(order, order)], starts, axis=0), starts, axis=1)
            keep.append(b)
            self.labels.append(comp_of.copy())
        self.levels = np.array(keep)
        # component sizes per tier
        self.sizes = [np.bincount(lb, minlength=n) for lb in self.labels]
        self.largest = np.array([s.max() for s in self.sizes])
        self._fits: dict[int, np.ndarray] = {}

    def nth_fit(self, size: int, count: int) -> int:
        """Index of the lowest tier whose components hold ``count`` disjoint sets of
        ``size`` devices each (len(levels) if none does)."""
        fits = self._fits.get(size)
        if fits is None:
            fits = self._fits[size] = np.array([int((s // size).sum()) for s in self.sizes])
        return int(np.searchsorted(fits, count))

    def first_fit(self, size: int) -> int:
        """Index of the lowest tier with a component of at least ``size`` devices."""
        return int(np.searchsorted(self.largest, size))

    def joint(self, i: int, need_i: int, k: int, need_k: int, together: int) -> bool:
        """Is there a component at tier max(i, k) of >= ``together`` devices that
        contains a component at the lower of the two tiers of >= its need?"""
        lo, hi = (i, k) if i <= k else (k, i)
        need_lo = need_i if i <= k else need_k
        lab_lo, lab_hi, size_hi = self.labels[lo], self.labels[hi], self.sizes[hi]
        # the devices of the lower tier's large enough components, and their components
        # at the higher tier (labels are per device: a component's label is no device)
        in_big = np.nonzero(self.sizes[lo][lab_lo] >= need_lo)[0]
        if len(in_big) == 0:
            return False
        return bool((size_hi[lab_hi[in_big]] >= together).any())


def _speeds_by_label(lab: np.ndarray, speed: np.ndarray) -> list[np.ndarray]:
    """Each label's speeds, fastest first, in label order."""
    order = np.lexsort((-speed, lab))
    starts = np.concatenate([[0], np.nonzero(np.diff(lab[order]))[0] + 1, [len(lab)]])
    return [speed[order[i:j]] for i, j in zip(starts[:-1], starts[1:])]


class _Inside:
    """The tiers below t inside one component C of tier t that joins two or more
    components of tier t-1 (a plan whose merge tier is t lies in such a C): the
    sizes and speeds of the components of each lower tier that lie in C."""

    def __init__(self, tiers: _Tiers, t: int, members: np.ndarray, speed: np.ndarray) -> None:
        self.levels = tiers.levels
        self.t = t
        self.members = members
        self._speed = speed[members]
        self._labels = [tiers.labels[y][members] for y in range(t)]
        self.sizes = [np.unique(lab, return_counts=True)[1] for lab in self._labels]
        self.sizes += [np.array([len(members)])] * (len(self.levels) - t)
        self.largest = np.array([int(s.max()) for s in self.sizes])
        self.desc = np.sort(self._speed)[::-1]
        self._comps: dict[int, list[np.ndarray]] = {}
        self.slots: dict[tuple[int, int, int], np.ndarray] = {}
        self._pairs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def first_fit(self, size: int) -> int:
        return int(np.searchsorted(self.largest, size))

    def site_links(self, y: int, inv_beta: np.ndarray, alpha: np.ndarray,
                   A: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sizes, least 1/beta, least alpha + A/beta, least alpha) of the components
        of tier y < t inside C and of the links between each pair of them (on the
        diagonal, inside one): a link between their devices is no better."""
        got = self._pairs.get(y)
        if got is None:
            lab = self._labels[y]
            order = np.argsort(lab, kind="stable")
            starts = np.concatenate([[0], np.nonzero(np.diff(lab[order]))[0] + 1])
            idx = self.members[order]

            def least(mat: np.ndarray) -> np.ndarray:
                sub = mat[np.ix_(idx, idx)].astype(float)
                np.fill_diagonal(sub, INF)          # a link joins two devices
                return np.minimum.reduceat(np.minimum.reduceat(sub, starts, axis=0), starts, axis=1)

            sizes = np.diff(np.concatenate([starts, [len(idx)]]))
            got = self._pairs[y] = (sizes, least(inv_beta), least(alpha + A * inv_beta), least(alpha))
        return got

    def components(self, y: int) -> list[np.ndarray]:
        """Speeds of each component of tier y < t inside C, fastest first."""
        got = self._comps.get(y)
        if got is None:
            got = self._comps[y] = _speeds_by_label(self._labels[y], self._speed)
        return got


def merged_components(inst: "Instance", tiers: _Tiers, t: int) -> list[_Inside]:
    """The components of tier t >= 1 that join two or more of tier t-1, largest first."""
    key = ("merged", id(tiers), t)
    got = inst._cache.get(key)
    if got is None:
        lab, below = tiers.labels[t], tiers.labels[t - 1]
        got = []
        for c in np.unique(lab):
            members = np.nonzero(lab == c)[0]
            if len(np.unique(below[members])) >= 2:
                got.append(_Inside(tiers, t, members, inst.arrays.speed))
        got.sort(key=lambda v: -len(v.members))
        inst._cache[key] = got
    return got


def link_tiers(inst: "Instance", weight: str = "bandwidth") -> _Tiers:
    """The instance's tier components by 1/beta (``bandwidth``) or by alpha + A/beta
    (``hop``), computed once: the bounds and the constructive seeds inside fast
    components both use them."""
    key = f"link_tiers_{weight}"
    t = inst._cache.get(key)
    if t is None:
        a = inst.arrays
        t = inst._cache[key] = _Tiers(a.inv_beta if weight == "bandwidth" else a.alpha + a.A * a.inv_beta)
    return t


class ShapeBounds:
    """Bounds for every shape of one instance (the per-instance work done once)."""

    def __init__(self, inst: "Instance") -> None:
        self.inst = inst
        a = self.a = inst.arrays
        n = inst.n
        self.speed_desc = np.sort(a.speed)[::-1]
        self.speed_pre = np.concatenate([[0.0], np.cumsum(self.speed_desc)])
        self.cap_desc = np.sort(a.mem_cap)[::-1]
        self.pw_pre = np.concatenate([[0.0], np.cumsum(np.sort(a.p_wait))])
        self.W = float(a.w_prefix[-1] + a.head_work)
        self.N_all = float(a.par_prefix[-1] + a.emb_params + a.head_params)
        # at the most frugal clock of every device (§10: a lower clock can spend less per FLOP)
        self.j_per_flop = float(((a.clock_busy - a.p_wait[:, None]) / (a.clock_frac * a.speed[:, None])).min())
        off = ~np.eye(n, dtype=bool)
        self.alpha_min = float(a.alpha[off].min()) if n > 1 else 0.0
        self.hop_min = float((a.alpha + a.A * a.inv_beta)[off].min()) if n > 1 else 0.0
        self.occ_min = float(a.A * a.inv_beta[off].min()) if n > 1 else 0.0
        # a link at least as slow as tier b has alpha >= the least alpha of such links:
        # suffix minima over the links sorted by 1/beta answer that for any b
        if n > 1:
            ib, al = a.inv_beta[off], a.alpha[off]
            order = np.argsort(ib, kind="stable")
            self._ib_sorted = ib[order]
            self._alpha_suf = np.minimum.accumulate(al[order][::-1])[::-1]
            self._hop_suf = np.minimum.accumulate((al + a.A * ib)[order][::-1])[::-1]
        self._n_min = float(np.diff(a.par_prefix).min())
        self._w_min = float(np.diff(a.w_prefix).min())
        self.tiers = link_tiers(inst)
        self.hop_tiers = link_tiers(inst, "hop")
        self._wl, self._pl, self._al = np.diff(a.w_prefix), np.diff(a.par_prefix), np.diff(a.act_prefix)
        self._uniform: bool | None = None
        self._bw: dict[int, float] = {}
        self._bn: dict[int, float] = {}
        self._mem: dict[tuple[int, int], float] = {}
        self._prof: dict[tuple[int, int], np.ndarray] = {}
        self._rows: dict[tuple[int, float], float] = {}
        self._slow: dict[float, tuple[float, float]] = {}
        self._comp_speeds: dict[int, list[np.ndarray]] = {}

    def _slow_link(self, b: float) -> tuple[float, float]:
        """(least alpha, least alpha + A/beta) over the links no faster than tier b."""
        got = self._slow.get(b)
        if got is None:
            i = int(np.searchsorted(self._ib_sorted, b, side="left"))
            got = self._slow[b] = ((INF, INF) if i >= len(self._ib_sorted)
                                   else (float(self._alpha_suf[i]), float(self._hop_suf[i])))
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

    def _slot_replica(self, u: np.ndarray, S: int, steady: int, comm_fill: float, tau_rest: float) -> float:
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
        fill = (layers * w / u[None, :]).sum(axis=1) + rest + comm_fill
        return float((S * fill + steady * np.maximum(tau, tau_rest)).min())

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
        top = np.where(crossing[None, :], np.minimum((Rc[:, None] - lat) / max(coef, 1e-300),
                                                     (Rc[:, None] - fast[1]) / max(fast[0], 1e-300)),
                       (Rc[:, None] - fast[1]) / max(fast[0], 1e-300))
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
                best = min(best, float((steady * np.maximum(tau_rest, X) + R).min()))
                continue
            X, Y = self._cut_fronts(P, s_top, exempt, slow)
            ring = ring_coef * Y + ring_lat if n_ex < P else np.zeros_like(Y)
            if has_exempt and fast[0] > 0.0:
                # every stage's ring at the fastest ring tier, on the same candidate rows
                # (the rows do not depend on the exemption: the X lists are the same)
                ring = np.maximum(ring, fast[0] * self._cut_fronts(P, s_top, 0, slow)[1] + fast[1])
            best = min(best, float((steady * np.maximum(tau_rest, X) + ring).min()))
        return best

    def _memory_ok(self, D: int, P: int, q: int) -> bool:
        """Can the stage needing most memory, under the cut that makes it least, sit
        on D devices? (q: micro-batches per flush of the lightest replica). A DP over
        cuts, since a stage's memory depends on its position (in-flight count)."""
        if (P, q) not in self._mem:
            self._mem[P, q] = self._least_peak_memory(P, q)
        return bool(self._mem[P, q] <= self.cap_desc[D - 1])

    def _least_peak_memory(self, P: int, q: int) -> float:
        a = self.a
        L = a.L
        best = np.full(L + 1, INF)              # best[l]: stages so far cover layers [0, l)
        best[0] = 0.0
        for j in range(P):
            infl = sc.inflight(a, P, j, q)
            nxt = np.full(L + 1, INF)
            for l in range(j + 1, L - (P - 1 - j) + 1):
                lo = np.arange(j, l)
                N = sc.stage_params(a, lo, l, j == 0, j == P - 1)
                mem = sc.stage_memory(a, N, sc.stage_act(a, lo, l), j == P - 1, np.full(len(lo), infl))
                nxt[l] = np.maximum(best[lo], mem).min()
            best = nxt
        return float(best[L])

    def __call__(self, D: int, P: int) -> ShapeBound:
        a, inst = self.a, self.inst
        obj = inst.objective
        M = a.M
        m = -(-M // D)                      # the busiest replica's micro-batches
        m_light = M // D if a.uniform else 1
        _S, q_light = (int(v) for v in sc.flushes(a, m_light))
        if not self._memory_ok(D, P, q_light):
            return ShapeBound(D, P, INF, "memory", INF, INF)
        s_max, s_D = float(self.speed_desc[0]), float(self.speed_desc[D - 1])
        busy_P = self._busiest(P)
        W, hop, A = self.W, self.hop_min, a.A

        flush_of = {k: int(sc.flushes(a, k)[0]) for k in {m, m_light}}

        def replica(m: int, s_top: float, s_sum: float, occ: float, slow_hop: float = 0.0, n_slow: int = 1) -> float:
            S, fill, tau_rest = replica_parts(m, s_top, s_sum, occ, slow_hop, n_slow)
            return S * fill + (m - S) * max(tau_rest, busy_P / s_top, self._busiest_row(P, s_top))

        def replica_parts(m: int, s_top: float, s_sum: float, occ: float, slow_hop: float = 0.0,
                          n_slow: int = 1, exact: list[tuple[float, float]] | None = None) -> tuple[int, float, float]:
            """T_k of a replica with m micro-batches whose fastest device runs at most
            s_top, whose devices add up to at most s_sum, and whose slowest pipeline
            link is busy ``occ`` per message: the fill passes every stage once and
            every link twice; the period is at least the busiest stage of the best
            cut, the link's occupancy, and (kappa) the average of the stage rows.
            ``slow_hop``: the least alpha + A/beta of a link as slow as that one.
            ``exact``: instead, (occupancy, alpha + A/beta) of each of the P-1 links."""
            S = flush_of[m]
            if exact is not None:
                occs = [max(o, self.occ_min) for o, _h in exact]
                fill = W / s_top + 2.0 * sum(max(self.alpha_min + o, h) for o, h in exact)
                rows = (W / s_top + 4.0 * a.kappa * sum(occs)) / P
                beside = self._w_min / s_top + 2.0 * a.kappa * max(occs)
                return S, fill, max(W / s_sum, max(occs), rows, beside)
            fill = W / s_top + 2.0 * (P - 1) * hop
            if P > 1:
                fill = max(fill, W / s_top + 2.0 * (P - 1 - n_slow) * hop + 2.0 * n_slow * max(self.alpha_min + occ, slow_hop))
            # rows: every link is busy at least occ_min, the slowest one occ
            rows = (W / s_top + 4.0 * a.kappa * (n_slow * max(occ, self.occ_min) + (P - 1 - n_slow) * self.occ_min)) / P if P > 1 else 0.0
            # the two stages beside the slow link each carry a layer and 2 kappa occ
            beside = self._w_min / s_top + 2.0 * a.kappa * occ if P > 1 else 0.0
            # the period without the cut's own largest row (busy_P, _busiest_row)
            return S, fill, max(W / s_sum, occ, rows, beside)

        def with_ring(desc: np.ndarray, ring_coef: float, ring_lat: float, exempt: int | tuple[int, ...] = 0, occ: float = 0.0,
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
            s_top, s_Dth, s_P = float(desc[0]), float(desc[D - 1]), float(desc[:P].sum())
            kinds = (((m, s_top, s_P), (m_light, s_Dth, min(P * s_Dth, s_P))) if which == "every"
                     else ((m_light, s_top, s_P),))
            fast = (cring * b1, ring_lat1)      # an exempt stage's ring: inside a site, not free
            if isolated:
                best = INF
                for ex in itertools.combinations(range(P), exempt):
                    links = tuple(i for i in range(P - 1) if i in ex or i + 1 in ex)
                    out = 0.0
                    for mk, top, ssum in kinds:
                        S, fill, tau_rest = replica_parts(mk, top, ssum, occ, slow_hop, len(links))
                        out = max(out, S * fill + self._joint_cut(P, top, mk - S, tau_rest, ring_coef, ex, occ,
                                                                   at=links, ring_lat=ring_lat, fast=fast))
                    best = min(best, out)
                return best
            slow_occ = occ if occ > 0.0 and 1 < P <= SLOW_PLACES + 1 else None
            links = None if exact is None else tuple(o for o, _h in exact)
            out = 0.0
            for mk, top, ssum in kinds:
                S, fill, tau_rest = replica_parts(mk, top, ssum, occ, slow_hop, n_slow, exact)
                out = max(out, S * fill + self._joint_cut(P, top, mk - S, tau_rest, ring_coef, exempt, slow_occ,
                                                           n_slow, ring_lat=ring_lat, fast=fast, links=links))
            return out

        def site_orders(mt: _Inside, y: int, desc: np.ndarray, floor: float) -> float:
            """Every ring inside a component of tier y (a site) that holds at most one
            ring: the P rings lie in P different sites, ring j in site sigma(j), and
            every replica's stage j in ring j, so every replica's link j joins
            sites sigma(j) and sigma(j+1) and is no better than their fastest link.
            The least over the orders sigma (at most SITE_ORDERS) of the joint cut
            with those links; ``floor`` as soon as an order shows nothing above it."""
            sizes, ib, hp, al = mt.site_links(y, a.inv_beta, a.alpha, A)
            cap = sizes // D
            if P < 2 or cap.max() > 1:
                return floor
            held = np.nonzero(cap == 1)[0]
            if len(held) < P or math.perm(len(held), P) > SITE_ORDERS:
                return floor
            best = INF
            for sigma in itertools.permutations(held.tolist(), P):
                exact = [(A * float(ib[u, v]), float(hp[u, v])) for u, v in zip(sigma[:-1], sigma[1:])]
                best = min(best, with_ring(desc, cring * b1, ring_lat1, exact=exact))
                if best <= floor:
                    return floor
            return best

        def replicas(occ: float, slow_hop: float = 0.0, desc: np.ndarray = self.speed_desc, n_slow: int = 1) -> float:
            # the busiest replica; and the one whose fastest device is slowest: the D
            # replicas' fastest devices are D different devices, so one runs at most s_D
            s_top, s_Dth, s_P = float(desc[0]), float(desc[D - 1]), float(desc[:P].sum())
            return max(replica(m, s_top, s_P, occ, slow_hop, n_slow),
                       replica(m_light, s_Dth, min(P * s_Dth, s_P), occ, slow_hop, n_slow))

        def work(desc: np.ndarray) -> float:
            """Work over the D P speeds ``desc`` (fastest first), with the bubble: replica
            k's T_k >= sum_j w_j/s_j + (m_k - 1) max_j w_j/s_j + 2 (P-1) h, so within
            T' = T - 2(P-1)h it runs m_k <= 1 + sum_j (T' s_j / W - 1)^+ micro-batches;
            summed over the replicas, M <= D + sum_i (T' s_i / W - 1)^+, i.e.
            T' >= min_u (M - D + u) W / (s_1 + ... + s_u)."""
            u = np.arange(1, D * P + 1)
            bubble = float(((M - D + u) * W / np.cumsum(desc[: D * P])).min()) + 2.0 * (P - 1) * hop
            return max(M * W / float(desc[: D * P].sum()), bubble)

        def split_work(desc: np.ndarray, k_max: int, f_s: float, occ_z: float) -> float:
            """Least T at which k <= k_max whole replicas (bubble capacity on the fastest
            k P speeds) and D - k split ones (fill >= f_s, period >= occ_z, so at most
            1 + (T - f_s) / occ_z micro-batches each) can run M micro-batches."""
            top = desc[: k_max * P]
            ks = np.arange(k_max + 1)
            two_h = 2.0 * (P - 1) * hop

            def capacity(T: float) -> float:
                pos = np.concatenate([[0.0], np.cumsum(np.maximum(0.0, (T - two_h) * top / W - 1.0))])
                g = 1.0 + (T - f_s) / max(occ_z, 1e-300)
                return float((ks + pos[ks * P] + (D - ks) * g).max())

            lo = f_s
            if capacity(lo) >= M:
                return lo
            hi = 2.0 * lo
            while capacity(hi) < M:
                hi *= 2.0
            for _ in range(40):          # capacity(lo) < M throughout: lo stays a valid bound
                mid = 0.5 * (lo + hi)
                if capacity(mid) >= M:
                    hi = mid
                else:
                    lo = mid
            return lo

        # ---- compute: work spread over the D P fastest devices; the replicas' periods
        compute = work(self.speed_desc)
        T_compute = max(compute, replicas(0.0))
        # ---- tiers: x = slowest pipeline link of some replica, y = slowest ring link of some ring
        tiers = self.tiers
        lv = tiers.levels
        cring = 2.0 * (D - 1) / D * a.grad_bytes
        N_big = self._heaviest(P)
        ring_lat = 2.0 * (D - 1) * self.alpha_min if D > 1 else 0.0
        xs = range(tiers.first_fit(P), len(lv)) if P > 1 else [None]
        ys = range(tiers.first_fit(D), len(lv)) if D > 1 else [None]
        T_tiers = INF
        for xi in xs:
            # x is the least, over replicas, of a replica's slowest link: every replica has one as slow
            pipe_x = max(compute, replicas(0.0, 0.0) if xi is None
                         else replicas(A * float(lv[xi]), self._slow_link(float(lv[xi]))[1]))
            for yi in ys:
                if pipe_x >= T_tiers:
                    break
                if xi is not None and yi is not None and not tiers.joint(xi, P, yi, D, D + P - 1):
                    continue
                ring = 0.0 if yi is None else (cring * N_big * float(lv[yi])
                                               + 2.0 * (D - 1) * self._slow_link(float(lv[yi]))[0])
                T_tiers = min(T_tiers, pipe_x + ring)
                break                       # higher y only costs more
        # ---- sorted tiers: the i best rings are i disjoint D-sets, so the i-th best
        # ring's slowest link is no faster than the tier where i such sets fit; with
        # R >= c N_j beta_j for every stage, R >= c N / sum_j 1/beta_j. Likewise the
        # replica with the slowest link: D disjoint P-sets must fit below it.
        T_sorted = 0.0
        if P > 1 or D > 1:
            pipe_s = 0.0
            if P > 1:
                bx = float(lv[min(tiers.nth_fit(P, D), len(lv) - 1)])
                pipe_s = replica(m_light, s_max, float(self.speed_pre[P]), A * bx, self._slow_link(bx)[1])
            ring_s = 0.0
            if D > 1:
                betas = [float(lv[min(tiers.nth_fit(D, i), len(lv) - 1)]) for i in range(1, P + 1)]
                # the slowest ring still carries a stage of at least one layer
                ring_s = cring * self._n_min * betas[-1] + 2.0 * (D - 1) * self._slow_link(betas[-1])[0]
                if min(betas) > 0:
                    ring_s = max(ring_s, cring * self.N_all / sum(1.0 / b for b in betas) + ring_lat)
            T_sorted = max(compute, replicas(0.0), pipe_s) + ring_s
        # ---- merge tier: the plan's D P devices are joined by its links, so they lie in
        # one component of the least tier t where some component holds them all. Below
        # t they span two components, and the links between those are no faster than
        # z = tier t. If every replica sits inside one of them, two replicas lie in
        # different ones and every ring (one device per replica) has such a link; if
        # every ring does, every replica has one; otherwise some replica and some ring
        # have one (that ring still carries a stage of at least one layer).
        R0 = b1 = ring_lat1 = 0.0
        if D > 1:
            b1 = float(lv[min(tiers.first_fit(D), len(lv) - 1)])
            ring_lat1 = 2.0 * (D - 1) * self._slow_link(b1)[0]
            R0 = max(ring_s, cring * N_big * b1 + ring_lat1)

        def penalties(kind: str, z: float) -> tuple[float, float, float, float]:
            """(occupancy, hop, ring with the heaviest stage, ring with one layer) of a
            link no better than z: z a bandwidth tier (1/beta), or a hop tier
            (alpha + A/beta; a ring pays 2(D-1) alpha + c N / beta >= k hop with
            k = min(2(D-1), c N / A))."""
            if kind == "bandwidth":
                alpha_z, hop_z = self._slow_link(z)
                lat = 2.0 * (D - 1) * alpha_z
                return A * z, hop_z, cring * N_big * z + lat, cring * self._n_min * z + lat
            k_big, k_one = min(2.0 * (D - 1), cring * N_big / A), min(2.0 * (D - 1), cring * self._n_min / A)
            return self.occ_min, z, k_big * z, k_one * z

        def split_sites(mt: _Tiers, t: int, desc: np.ndarray, z: float, occ_z: float, hop_z: float,
                        k_max: int, ring_big: float, floor: float) -> float:
            """The mixed case of the merge tier (some replica and some ring cross
            between the components, "sites", of tier t-1), split further. A ring
            inside a site holds one device of every replica. (a) Some replica is
            whole, in site C: every whole ring is in C too, and with k whole replicas
            C holds k P + r (D - k) devices for r whole rings, so r <= r1; the other
            rings cross. (b) No replica is whole: every replica has a slow link, and
            r whole rings spread over c sites make every replica cross c - 1 times.
            Each sub-case: one cut for the period and the crossing rings' heaviest
            stage, the whole rings' stages free (formulations/exact.md §8). Returns
            ``floor`` as soon as a sub-case shows it cannot do better than that."""
            coef, lat = cring * z, ring_big - cring * N_big * z
            sizes = np.sort(mt.sizes[t - 1])[::-1]
            # some ring crosses: r < P whole rings. If the plan takes every device of C and
            # every site holds a multiple of D devices, P-1 whole rings leave D devices
            # whose count per site is a multiple of D: one site, a whole ring: r < P-1
            r_top = P - 2 if (len(mt.members) == D * P and not (sizes % D).any()) else P - 1
            # the D P devices are pieces of replicas inside sites; with the fewest pieces
            # the sites allow, D replicas cross (pieces - D) times in all, so one replica
            # crosses at least the average (whatever the case)
            n_some = min(P - 1, max(1, -(-(_fewest_segments(sizes, D * P, P) - D) // D)))
            some = INF
            if k_max >= 1:
                big = int(sizes[0])
                r1 = max((big - k * P) // (D - k) for k in range(1, k_max + 1))
                r1 = min(r_top, max(0, r1))       # some ring crosses
                some = max(with_ring(desc, coef, lat, r1), with_ring(desc, coef, lat, r1, occ_z, hop_z, n_some, "some"))
                if some <= floor:
                    return floor
            hold = np.cumsum(sizes // D)
            one_ring = bool(sizes[0] < 2 * D)        # no site holds two whole rings
            none = INF
            room = np.cumsum(sizes)
            seen = -1
            for c in range(0, len(hold) + 1):       # in this case some ring crosses: r < P
                r = 0 if c == 0 else min(r_top, int(hold[c - 1]))
                if r == seen:         # more sites for as many rings only cost more crossings
                    continue
                seen = r
                cross = max(1, c - 1)
                if c >= 1:
                    # the fewest whole rings that need c sites leave too little room there
                    # for any replica to stay inside them: each also leaves them, c crossings
                    r_lo = (int(hold[c - 2]) if c >= 2 else 0) + 1
                    if int(room[c - 1]) - r_lo * D < P - r_lo:
                        cross = c
                case = with_ring(desc, coef, lat, r, occ_z, hop_z, min(P - 1, cross))
                if n_some > cross and case < none:
                    case = max(case, with_ring(desc, coef, lat, r, occ_z, hop_z, n_some, "some"))
                if r >= 1 and one_ring and case < none and math.comb(P, r) <= ISOLATED_SETS:
                    # each whole ring fills its own site but for `spare` devices: a replica
                    # with none of them has every neighbour of its whole-ring stages elsewhere
                    spare = int((sizes[:r] - D).sum())
                    if spare < D:
                        which = "every" if spare == 0 else "some"
                        case = max(case, with_ring(desc, coef, lat, r, occ_z, hop_z, which=which, isolated=True))
                        if case < none:
                            case = max(case, whole_sites(mt, t - 1, r, which, desc, coef, lat, case))
                none = min(none, case)
                if none <= floor:
                    return floor
                if r >= r_top:
                    break
            return min(some, none)

        def whole_sites(mt: _Inside, y: int, r: int, which: str, desc: np.ndarray, coef: float, lat: float,
                        floor: float) -> float:
            """The full-sites case with the whole rings' sites named: whole ring e
            (stage e of the positions E) fills site sigma(e), so the replica's link
            beside it leads to another site that no whole ring fills, or to
            sigma(e+1) when stage e+1 is whole too; each such link is no better than
            the fastest between those sites. With no spare device (``every``), each
            crossing ring spans two or more of the other sites, so the replicas'
            patterns (the site of each crossing stage) cover two sites per crossing
            stage: the plan is no faster than the least, over such sets of patterns,
            of their slowest one. The least over E and sigma (within SITE_WORK joint
            cuts); ``floor`` as soon as one shows nothing above it."""
            sizes, ib, hp, al = mt.site_links(y, a.inv_beta, a.alpha, A)
            held = np.nonzero(sizes >= D)[0].tolist()
            work = math.comb(P, r) * math.perm(len(held), r) * (1 + (len(sizes) - r) ** (P - r))
            if len(held) < r or work > SITE_WORK:
                return floor

            def links(site: dict[int, int]) -> list[tuple[float, float]]:
                out = []
                for i in range(P - 1):
                    u, v = site.get(i), site.get(i + 1)
                    if u is None or v is None:
                        out.append((0.0, hop))
                    else:
                        out.append((A * float(ib[u, v]), float(hp[u, v])))
                return out

            best = INF
            for ex in itertools.combinations(range(P), r):
                crossing = [j for j in range(P) if j not in ex]
                for sigma in itertools.permutations(held, r):
                    others = [u for u in range(len(sizes)) if u not in sigma]
                    if not others:
                        continue                # the crossing rings have no site left
                    site = dict(zip(ex, sigma))
                    # with no spare device, a crossing ring spans two of the other sites: it has
                    # a link between two of them
                    coef_x, lat_x = coef, lat
                    if which == "every" and len(others) >= 2:
                        pairs = list(itertools.combinations(others, 2))
                        coef_x = max(coef, cring * float(min(ib[u, v] for u, v in pairs)))
                        lat_x = max(lat, 2.0 * (D - 1) * float(min(al[u, v] for u, v in pairs)))
                    # beside a whole stage, the best of the other sites
                    exact = links(site)
                    for i in range(P - 1):
                        u, v = site.get(i), site.get(i + 1)
                        if (u is None) != (v is None):
                            w = u if u is not None else v
                            exact[i] = (A * float(ib[w, others].min()), float(hp[w, others].min()))
                    val = with_ring(desc, coef_x, lat_x, ex, which=which, exact=exact)
                    if which == "every" and len(others) >= 2 and val < best:
                        cost = []
                        for pat in itertools.product(others, repeat=len(crossing)):
                            exact_p = links(site | dict(zip(crossing, pat)))
                            if all(math.isfinite(h) for _o, h in exact_p):     # else two stages on one device
                                cost.append((with_ring(desc, coef_x, lat_x, ex, which="some", exact=exact_p), pat))
                        cost.sort()
                        seen: list[set[int]] = [set() for _ in crossing]
                        for c_pat, pat in cost:
                            for s_j, u in zip(seen, pat):
                                s_j.add(u)
                            if all(len(s_j) >= 2 for s_j in seen):
                                val = max(val, c_pat)
                                break
                    best = min(best, val)
                    if best <= floor:
                        return floor
            return best

        def rings_inside(mt: _Tiers, kind: str, t: int, desc: np.ndarray, base: float, occ_z: float,
                         hop_z: float) -> float:
            """Every ring inside one component of tier t-1, split by the least tier y
            whose components hold every ring: the rings lie in at least c_y of them
            (the fewest that hold P disjoint D-sets), so each replica, with a device in
            every ring, crosses c_y - 1 times between them, over links no faster than
            tier y+1 (components change only at the tiers); above the first tier that
            holds a ring, some ring has a link of tier y (every ring but the h that
            fit inside components of tier y-1). And the plan spans two components of
            tier t-1, so each replica also crosses tier t once."""
            lv = mt.levels
            one = max(base, replicas(occ_z, hop_z, desc, 1))
            y0 = mt.first_fit(D)
            out = INF
            for y in range(y0, t):
                hold_y = np.cumsum(np.sort(mt.sizes[y] // D)[::-1])
                c_y = int(np.searchsorted(hold_y, P)) + 1
                if c_y > len(hold_y):
                    continue
                rep = one
                if c_y >= 2:
                    occ_y, hop_y, _big, _small = penalties(kind, float(lv[y + 1]))
                    rep = max(rep, replicas(occ_y, hop_y, desc, min(P - 1, c_y - 1)))
                ring = R0 if y == y0 else max(R0, penalties(kind, float(lv[y]))[3])
                val = rep + ring
                if kind == "bandwidth" and val < out:
                    # one cut for the period (its slow links in the rows) and the rings,
                    # each at least as slow as the first tier that holds a ring
                    occ_n, hop_n = (occ_y, hop_y) if c_y >= 2 else (occ_z, hop_z)
                    n_cross = min(P - 1, max(1, c_y - 1))
                    val = max(val, with_ring(desc, cring * b1, ring_lat1, 0, occ_n, hop_n, n_cross))
                    if y > y0 and val < out:
                        # at most h rings fit inside components of tier y-1; every other
                        # ring has a link of tier y (and one cut places it)
                        h = min(P - 1, int((mt.sizes[y - 1] // D).sum()))
                        z_y = float(lv[y])
                        lat_y = penalties(kind, z_y)[2] - cring * N_big * z_y
                        val = max(val, with_ring(desc, cring * z_y, lat_y, h, occ_n, hop_n, n_cross))
                    if val < out:
                        val = site_orders(mt, y, desc, val)
                out = min(out, val)
            return out

        def merge(kind: str) -> float:
            mt = tiers if kind == "bandwidth" else self.hop_tiers
            todo = []
            for t in range(mt.first_fit(D * P), len(mt.levels)):
                for view in ([None] if t == 0 else merged_components(self.inst, mt, t)):
                    if view is None or len(view.members) >= D * P:
                        desc = self._profile(kind, mt, t, D * P) if view is None else view.desc[: D * P]
                        todo.append((max(work(desc), replicas(0.0, 0.0, desc)), t, view, desc))
            # the least optimistic values first: the others are then mostly cut short
            todo.sort(key=lambda x: (x[0], x[1]))
            T_merge = INF
            for base, t, view, desc in todo:
                if base + R0 >= T_merge:
                    break
                v = merge_in(kind, t, view, desc, base, T_merge)
                if view is not None and D * P > 1:
                    # the plan spans two components of every lower tier s inside C too: the
                    # same cases with those as sites, their links no faster than tier s+1
                    # (more crossings over faster links); only where C's components change
                    for s in range(min(t - 2, LOWER_SITES - 1), -1, -1):
                        if v >= T_merge:
                            break
                        if LOWER_SITES_MAX >= len(view.sizes[s]) > len(view.sizes[s + 1]):
                            v = max(v, merge_in(kind, s + 1, view, desc, base, T_merge))
                T_merge = min(T_merge, v)
            return T_merge

        def merge_in(kind: str, t: int, mt: "_Inside | None", desc: np.ndarray, base: float, T_merge: float) -> float:
            """The plans whose merge tier is t, inside the component ``mt`` of tier t
            (None: t = 0, every component), whose D P speeds are at most ``desc``
            (``base``: their work and replica bound)."""
            if D * P == 1:
                return base
            lv_k = (tiers if kind == "bandwidth" else self.hop_tiers).levels
            z = float(lv_k[t])
            occ_z, hop_z, ring_big, ring_small = penalties(kind, z)
            ring_one = max(R0, ring_small) if D > 1 else R0
            ring_all = max(R0, ring_big) if D > 1 else R0
            rep_one = max(base, replica(m_light, float(desc[0]), float(desc[:P].sum()), occ_z, hop_z)) if P > 1 else base
            rep_all = max(base, replicas(occ_z, hop_z, desc)) if P > 1 else base
            if t == 0:                      # every link is at least as slow as the lowest tier
                cases = [rep_all + ring_all]
            elif P == 1:
                cases = [base + ring_all]
            elif D == 1:
                cases = [rep_all]
            else:
                # every ring inside one component of tier t-1: the rings need c of them
                # (largest first), and every replica, visiting every ring, crosses c-1 times
                hold = np.cumsum(np.sort(mt.sizes[t - 1] // D)[::-1])
                c = int(np.searchsorted(hold, P)) + 1
                n_cross = min(P - 1, max(1, c - 1))
                rep_cross = (max(base, replicas(occ_z, hop_z, desc, n_cross)) + R0 if c <= len(hold) else INF)
                if mt.t > t and rep_cross < T_merge:
                    # likewise every replica visits every site that holds a ring: one of its
                    # links crosses C's own tier
                    o_c, h_c, _b, _s = penalties(kind, float(lv_k[mt.t]))
                    rep_cross = max(rep_cross, max(base, replicas(o_c, h_c, desc, 1)) + R0)
                if rep_cross < T_merge:
                    # the busiest replica runs at most the rings' speed slots
                    u = self._ring_slots(mt, t - 1, D, P)
                    S, fill, tau_rest = replica_parts(m, float(u[0]), float(u.sum()), occ_z, hop_z, n_cross)
                    rep_cross = max(rep_cross, self._slot_replica(u, S, m - S, fill - W / float(u[0]), tau_rest) + R0)
                if rep_cross < T_merge:
                    rep_cross = max(rep_cross, rings_inside(mt, kind, t, desc, base, occ_z, hop_z))
                # every replica inside one component of tier t-1: not if they cannot hold
                # D disjoint P-sets
                every_ring = INF
                if int((mt.sizes[t - 1] // P).sum()) >= D:
                    # every ring visits every site that holds a replica, and those hold every
                    # device of the plan: they span two components below C's own tier, and
                    # so does every ring (below, sites of a lower tier than C's)
                    z_r = float(lv_k[mt.t])
                    _o, _h, ring_r, _s = penalties(kind, z_r)
                    every_ring = base + max(R0, ring_r)
                    if kind == "bandwidth" and every_ring < T_merge:
                        # one cut sets both the replicas' period and the rings' heaviest stage
                        every_ring = max(every_ring, with_ring(desc, cring * z_r, ring_r - cring * N_big * z_r))
                cases = [rep_cross, every_ring]
                mixed = rep_one + ring_one
                big = int(mt.largest[t - 1])
                if P > big or D > big:
                    # no component of tier t-1 holds a whole replica (ring): every one crosses,
                    # a replica as often as the fewest pieces its P devices split into
                    n_rep = max(1, int(np.searchsorted(np.cumsum(np.sort(mt.sizes[t - 1])[::-1]), P)))
                    forced = ((max(base, replicas(occ_z, hop_z, desc, min(P - 1, n_rep))) if P > big else rep_one)
                              + (ring_all if D > big else ring_one))
                    if kind == "bandwidth" and P > big and D > big and forced < T_merge:
                        forced = max(forced, with_ring(desc, cring * z, ring_big - cring * N_big * z, 0, occ_z, hop_z,
                                                       min(P - 1, n_rep)))
                    mixed = max(mixed, forced)
                if kind == "bandwidth" and mixed < min(min(cases), T_merge):
                    # some replica is split but not every one: the whole ones all lie in
                    # one component of tier t-1 (two of them elsewhere would split every
                    # ring), so at most k_max of them; each split one pays its slow hop
                    k_max = min(D - 1, int(mt.largest[t - 1]) // P)
                    f_s = W / float(desc[0]) + 2.0 * (P - 2) * hop + 2.0 * hop_z
                    mixed = max(rep_one, split_work(desc, k_max, f_s, occ_z)) + ring_one
                    if mixed < min(min(cases), T_merge):
                        mixed = split_sites(mt, t, desc, z, occ_z, hop_z, k_max, ring_big, mixed)
                cases.append(mixed)
            return min(cases)

        T_merge = max(merge("bandwidth"), merge("hop"))
        T = max(T_compute, T_tiers, T_sorted, T_merge)
        by = ("compute" if T == T_compute else "tiers" if T == T_tiers
              else "sorted tiers" if T == T_sorted else "merge tier")
        if obj.max_time_s is not None and T > obj.max_time_s:
            return ShapeBound(D, P, INF, "limit", T, INF)
        E = M * self.W * self.j_per_flop + float(self.pw_pre[D * P]) * T
        if obj.max_energy_j is not None and E > obj.max_energy_j:
            return ShapeBound(D, P, INF, "limit", T, E)
        from .tariffs import priced_floors
        C, Q = priced_floors(self.inst, M * self.W, T, D * P)
        if (obj.max_cost_usd is not None and (C or 0.0) > obj.max_cost_usd) or \
                (obj.max_carbon_g is not None and (Q or 0.0) > obj.max_carbon_g):
            return ShapeBound(D, P, INF, "limit", T, E)
        return ShapeBound(D, P, float(objmod.primary(obj, T, E, C, Q)), by, T, E)


def shape_bounds(inst: "Instance", shapes: list[tuple[int, int]] | None = None,
                 stop: Callable[[], bool] | None = None) -> dict[tuple[int, int], ShapeBound]:
    """The bound of every shape (default: every feasible shape of the instance).
    ``stop()`` true: the shapes not reached yet get the trivial bound 0 ("not
    computed"; at thousands of GPUs every shape's bound takes longer than a short
    time limit), and nothing is kept for the next call."""
    from .construct import feasible_shapes
    # once per instance: the exact driver, ``solve`` and ``verify`` all ask for them
    every = inst._cache.get("shape_bounds")
    if every is None and stop is not None:
        sb = ShapeBounds(inst)
        out = {}
        for s in dict.fromkeys(feasible_shapes(inst) + list(shapes or [])):
            out[s] = ShapeBound(*s, 0.0, "not computed", 0.0, 0.0) if stop() else sb(*s)
        if all(b.by != "not computed" for b in out.values()):
            inst._cache["shape_bounds"] = dict(out)
        return dict(out) if shapes is None else {s: out[s] for s in shapes}
    if every is None:
        sb = ShapeBounds(inst)
        every = inst._cache["shape_bounds"] = {s: sb(*s) for s in feasible_shapes(inst)}
    if shapes is None:
        return dict(every)
    missing = [s for s in shapes if s not in every]
    out = {s: every[s] for s in shapes if s in every}
    if missing:
        sb = ShapeBounds(inst)
        out.update({s: sb(*s) for s in missing})
    return out


def instance_bound(inst: "Instance") -> tuple[float, dict[str, int]]:
    """(a lower bound on the primary objective of every plan, how many shapes each
    bound decided). inf when no shape admits a plan. With micro-batch size or
    recomputation to choose (model.md §11): the least over the choices."""
    if inst.has_choices:
        value, by = INF, {}
        for b, r in inst.model.choices():
            v, n = instance_bound(inst.variant(b, r))
            value = min(value, v)
            for k, c in n.items():
                by[k] = by.get(k, 0) + c
        return value, by
    bounds = shape_bounds(inst)
    by: dict[str, int] = {}
    for b in bounds.values():
        by[b.by] = by.get(b.by, 0) + 1
    return min((b.value for b in bounds.values()), default=INF), by


def attach_bound(inst: "Instance", res) -> None:
    """Give a result the instance's certified lower bound: ``stats["lower_bound"]``
    (value, seconds, how many shapes each bound decided) and ``best_bound`` (the
    larger of the solver's own and this one), so ``res.gap`` says how far at most
    the plan is from optimal, for any solver."""
    import time
    t = time.perf_counter()
    value, by = instance_bound(inst)
    res.stats["lower_bound"] = {"value": value if value < INF else None, "seconds": round(time.perf_counter() - t, 3),
                                "shapes_by": by}
    if value < INF and res.objective_value is not None:
        # a bound above the plan is a wrong bound: kept as it is, so that the verifier sees it
        if value <= res.objective_value * (1 + 1e-9):
            value = min(value, res.objective_value)
        res.best_bound = value if res.best_bound is None else max(res.best_bound, value)
