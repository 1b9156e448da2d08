"""The network as tiers: connected components of the graph of links no slower than
each distinct bandwidth (or hop time), and the components of lower tiers inside one
component of a higher tier. The bounds and the constructive seeds inside fast
components both read them (formulations/proofs.md §8)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

INF = float("inf")

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance


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


class Stopped(Exception):
    """The caller's time ran out in the middle of a per-instance precomputation (at
    thousands of GPUs one takes seconds): nothing partial is kept."""


def _check(stop: "Callable[[], bool] | None") -> None:
    if stop is not None and stop():
        raise Stopped


def _distinct_links(m: np.ndarray, stop: "Callable[[], bool] | None" = None) -> np.ndarray:
    """The distinct off-diagonal entries of ``m``, ascending (``np.unique`` of them):
    each row sorted and its repeats dropped first, then the few left made unique (one
    sort of all 16.7 M links took 0.5-1 s at 4,096 GPUs, the rows 0.1 s)."""
    rows = np.array(m, dtype=float)
    np.fill_diagonal(rows, np.nan)                 # sorted last, and dropped
    _check(stop)
    rows.sort(axis=1)
    new = np.ones(rows.shape, dtype=bool)
    np.not_equal(rows[:, 1:], rows[:, :-1], out=new[:, 1:])
    new &= ~np.isnan(rows)
    return np.unique(rows[new])


class _Tiers:
    """Connected components of the graph of links with weight <= b, per tier b
    (weight: 1/beta, or alpha + A/beta)."""

    def __init__(self, inv_beta: np.ndarray, stop: "Callable[[], bool] | None" = None) -> None:
        n = inv_beta.shape[0]
        self.levels = _distinct_links(inv_beta, stop) if n > 1 else np.zeros(1)
        self.labels = []
        keep = []
        comp_of = np.arange(n)           # device -> its component at the current tier
        mat = np.asarray(inv_beta)       # slowest-needed link between two current components: the fastest pair
        for b in self.levels:
            _check(stop)
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
        self._base: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def base_links(self, inv_beta: np.ndarray, alpha: np.ndarray,
                   A: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(least 1/beta, least alpha + A/beta, least alpha) between each pair of tier-0
        components, indexed by their labels (on the diagonal: between two devices
        inside one, inf for a single device); computed once, a whole pass over the
        links (site_links reads blocks of it)."""
        key = (id(inv_beta), id(alpha), A)
        got = self._base.get(key)
        if got is None:
            lab = self.labels[0]
            order = np.argsort(lab, kind="stable")
            starts = np.concatenate([[0], np.nonzero(np.diff(lab[order]))[0] + 1])
            ends = np.append(starts[1:], len(lab))
            if not np.array_equal(order, np.arange(len(lab))):      # devices not listed by component
                inv_beta, alpha = inv_beta[np.ix_(order, order)], alpha[np.ix_(order, order)]
            hop = np.multiply(inv_beta, A)
            hop += alpha
            out = []
            for m in (inv_beta, hop, alpha):
                # between two components no device meets itself; inside one (the
                # diagonal), the least over its own block without its diagonal
                least = np.minimum.reduceat(np.minimum.reduceat(m, starts, axis=0), starts, axis=1)
                for k, (i, j) in enumerate(zip(starts, ends)):
                    block = np.array(m[i:j, i:j], dtype=float)
                    np.fill_diagonal(block, INF)          # a link joins two devices
                    least[k, k] = block.min()
                out.append(least)
            got = self._base[key] = tuple(out)
        return got

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
        self._tiers = tiers
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

    def has_base(self, inv_beta: np.ndarray, alpha: np.ndarray, A: float) -> bool:
        """Whether the tier-0 least links of these links are computed already."""
        return (id(inv_beta), id(alpha), A) in self._tiers._base

    def site_links(self, y: int, inv_beta: np.ndarray, alpha: np.ndarray,
                   A: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sizes, least 1/beta, least alpha + A/beta, least alpha) of the components
        of tier y < t inside C and of the links between each pair of them (on the
        diagonal, inside one): a link between their devices is no better. From the
        least links between the tier-0 components (computed once per instance: tiers
        nest, so a component of tier y is a union of tier-0 ones, and a least over
        the union is the least of the parts' leasts)."""
        got = self._pairs.get(y)
        if got is None:
            base = self._tiers.base_links(inv_beta, alpha, A)
            comps0, first = np.unique(self._labels[0], return_index=True)    # C's tier-0 components
            lab = self._labels[y][first]                                     # and their tier-y ones
            order = np.argsort(lab, kind="stable")
            starts = np.concatenate([[0], np.nonzero(np.diff(lab[order]))[0] + 1])
            idx = comps0[order]
            sizes = np.unique(self._labels[y], return_counts=True)[1]        # devices, in label order
            got = self._pairs[y] = (sizes,) + tuple(
                np.minimum.reduceat(np.minimum.reduceat(m[np.ix_(idx, idx)], starts, axis=0), starts, axis=1)
                for m in base)
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


def link_tiers(inst: "Instance", weight: str = "bandwidth", stop: "Callable[[], bool] | None" = None,
               weights: np.ndarray | None = None) -> _Tiers:
    """The instance's tier components by 1/beta (``bandwidth``) or by alpha + A/beta
    (``hop``), computed once: the bounds and the constructive seeds inside fast
    components both use them. ``stop()`` true on the way: :class:`Stopped`.
    ``weights``: the caller's array of those weights, where it has one."""
    key = f"link_tiers_{weight}"
    t = inst._cache.get(key)
    if t is None:
        a = inst.arrays
        _check(stop)
        if weights is None:
            weights = a.inv_beta if weight == "bandwidth" else a.alpha + a.A * a.inv_beta
        t = _Tiers(weights, stop)
        inst._cache[key] = t
    return t

