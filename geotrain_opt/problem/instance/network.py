"""The network section: links by node, region, region pair, device pair or a full
matrix, resolved (vectorised) into the alpha and beta matrices; node NIC shares."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from geotrain_opt.problem import units
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance.fields import _LINK, LIMITS, _Reader

if TYPE_CHECKING:
    from geotrain_opt.problem.instance.records import Device, Instance


def nic_inv_share(inst: Instance) -> np.ndarray:
    """(n, n) seconds per byte that the node NICs impose on a cross-node pair:
    max(n(u)/nic(u), n(v)/nic(v)), 0 within a node or where no NIC is given
    (beta_eff = min(beta, nic(u)/n(u), nic(v)/n(v)), formulations/model.md)."""
    nodes: dict[str, int] = {}
    node_of = np.array([nodes.setdefault(d.node, len(nodes)) for d in inst.devices], dtype=np.int64)
    size = np.bincount(node_of)
    nic = np.array([d.nic_bps if d.nic_bps else np.inf for d in inst.devices])
    share = size[node_of] / nic                          # s/byte of one device's NIC share
    out = np.maximum(share[:, None], share[None, :])
    out[node_of[:, None] == node_of[None, :]] = 0.0
    return out


def _read_link(raw: Any, path: str, extra: set[str] = frozenset()) -> tuple[Any, float, float]:
    r = _Reader(raw, path)
    r.unknown_keys(_LINK | set(extra))
    lat = r.number("latency_ms", required=True, nonneg=True)
    bw = r.number("bandwidth_gbps", required=True, positive=True)
    return r, units.ms_to_s(lat), units.gbps_to_bytes_per_s(bw)


def _read_network(r: _Reader, devices: list[Device]) -> tuple[np.ndarray, np.ndarray]:
    r.unknown_keys({"intra_node", "intra_node_by_type", "intra_region", "inter_region", "pairs", "matrix"})
    n = len(devices)
    idx = {d.id: i for i, d in enumerate(devices)}
    regions = {d.region for d in devices}

    def directed(entries: Any, path: str, names: set[str], what: str,
                 allowed: set[str] = frozenset()) -> dict[tuple[str, str], tuple[float, float]]:
        # {a, b} covers both directions unless {b, a} is listed too (formulations/model.md §1).
        if not isinstance(entries, list):
            raise InstanceError(path, "expected a list of {a, b, latency_ms, bandwidth_gbps}")
        explicit: dict[tuple[str, str], tuple[float, float]] = {}
        for i, e in enumerate(entries):
            er, lat, bw = _read_link(e, f"{path}[{i}]", {"a", "b"} | set(allowed))
            a, b = er.string("a"), er.string("b")
            for key, v in (("a", a), ("b", b)):
                if v not in names:
                    raise InstanceError(er.sub(key), f"unknown {what} {v!r}")
            if a == b:
                raise InstanceError(er.sub("b"), f"a link needs two different {what}s, got {a!r} twice")
            if (a, b) in explicit:
                raise InstanceError(er.sub("b"), f"duplicate link {a!r} -> {b!r}")
            explicit[(a, b)] = (lat, bw)
        out = dict(explicit)
        for (a, b), v in explicit.items():
            out.setdefault((b, a), v)
        return out

    inter = directed(r.get("inter_region", []), r.sub("inter_region"), regions, "region", {EGRESS, CAPACITY})
    pairs = directed(r.get("pairs", []), r.sub("pairs"), set(idx), "device")
    tiers = {}
    for key in ("intra_node", "intra_region"):
        if r.has(key):
            _, lat, bw = _read_link(r.get(key), r.sub(key))
            tiers[key] = (lat, bw)
    # the n x n arrays only once the entries are read: a bad entry of an instance of
    # 10,000 devices is an error at once, not after 1.6 GB were filled (issue 39)
    alpha = np.full((n, n), np.nan)
    beta = np.full((n, n), np.nan)
    if r.has("matrix"):
        mr = _Reader(r.get("matrix"), r.sub("matrix"))
        mr.unknown_keys({"order", "latency_ms", "bandwidth_gbps"})
        order = mr.req("order")
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(idx):
            raise InstanceError(mr.sub("order"), "must list every device id exactly once")
        for key in ("latency_ms", "bandwidth_gbps"):
            mat = mr.req(key)
            try:
                arr = np.array(mat, dtype=float)
            except (TypeError, ValueError):
                raise InstanceError(mr.sub(key), "expected a square matrix of numbers") from None
            if arr.shape != (n, n):
                raise InstanceError(mr.sub(key), f"expected a {n}x{n} matrix, got shape {arr.shape}")
            off = ~np.eye(n, dtype=bool)
            if not np.isfinite(arr[off]).all():
                raise InstanceError(mr.sub(key), "entries must be finite numbers")
            if (arr[off] > LIMITS[key]).any():
                raise InstanceError(mr.sub(key), f"entries must be at most {LIMITS[key]:g}")
            if key == "latency_ms" and (arr[off] < 0).any():
                raise InstanceError(mr.sub(key), "latencies must not be negative")
            if key == "bandwidth_gbps" and (arr[off] <= 0).any():
                raise InstanceError(mr.sub(key), "bandwidths must be positive")
            perm = np.array([idx[str(o)] for o in order], dtype=np.int64)
            target = alpha if key == "latency_ms" else beta
            conv = units.ms_to_s if key == "latency_ms" else units.gbps_to_bytes_per_s
            target[np.ix_(perm, perm)] = np.where(off, conv(arr), np.nan)
    # tiers fill what the matrix left open (vectorised: instances reach thousands of devices)
    node_of = _codes([d.node for d in devices])
    reg_names = sorted(regions)
    reg_of = _codes([d.region for d in devices], reg_names)
    same_node = node_of[:, None] == node_of[None, :]
    same_reg = reg_of[:, None] == reg_of[None, :]
    open_ = np.isnan(alpha)
    np.fill_diagonal(open_, False)
    for a_id, b_id in pairs:
        open_[idx[a_id], idx[b_id]] = False
    by_type = _by_type(r, devices)
    if by_type is not None:        # a node's own GPUs' links (NVLink generations differ), before the default
        la, lb = by_type
        m = open_ & same_node & ~np.isnan(la)
        alpha[m], beta[m] = la[m], lb[m]
        open_ &= ~m
    if "intra_node" in tiers:
        m = open_ & same_node
        alpha[m], beta[m] = tiers["intra_node"]
        open_ &= ~same_node
    m = open_ & same_reg
    if m.any():
        if "intra_region" not in tiers:
            i, j = map(int, np.argwhere(m)[0])
            u, v = devices[i], devices[j]
            detail = (f"devices {u.id!r} and {v.id!r} share region {u.region!r} but not a node"
                      if "intra_node" in tiers else f"needed for {u.id!r} -> {v.id!r} in region {u.region!r}")
            raise InstanceError(r.sub("intra_region"), f"missing: {detail}")
        alpha[m], beta[m] = tiers["intra_region"]
    _fill_inter_region(r, devices, alpha, beta, open_ & ~same_reg, reg_of, reg_names, inter)
    for (a_id, b_id), (lat, bw) in pairs.items():      # device pairs override everything
        alpha[idx[a_id], idx[b_id]], beta[idx[a_id], idx[b_id]] = lat, bw
    np.fill_diagonal(alpha, 0.0)
    np.fill_diagonal(beta, np.inf)
    return alpha, beta


def _fill_inter_region(r: _Reader, devices: list[Device], alpha: np.ndarray, beta: np.ndarray, m: np.ndarray,
                       reg_of: np.ndarray, reg_names: list[str], inter: dict) -> None:
    """The ``inter_region`` entries into the open pairs ``m`` of two regions, block by
    block of region pairs: n x n temporaries would be 800 MB each at 10,000 devices."""
    rows = [np.flatnonzero(reg_of == k) for k in range(len(reg_names))]
    for x, ix in enumerate(rows):
        for y, iy in enumerate(rows):
            if x == y or not len(ix) or not len(iy):
                continue
            block = np.ix_(ix, iy)
            mm = m[block]
            if not mm.any():
                continue
            link = inter.get((reg_names[x], reg_names[y]))
            if link is None:
                i, j = map(int, np.argwhere(mm)[0])
                raise InstanceError(r.sub("inter_region"), f"no entry for regions {devices[ix[i]].region!r} -> "
                                                           f"{devices[iy[j]].region!r}")
            for target, value in zip((alpha, beta), link):
                sub = target[block]
                sub[mm] = value
                target[block] = sub


def _by_type(r: _Reader, devices: list[Device]) -> tuple[np.ndarray, np.ndarray] | None:
    """``intra_node_by_type``: [{type, latency_ms, bandwidth_gbps}], the link between two
    GPUs of a node by their type; for two listed types the slower of the two entries
    (NaN where a type is not listed: the ``intra_node`` tier applies)."""
    raw = r.get("intra_node_by_type")
    if raw is None:
        return None
    path = r.sub("intra_node_by_type")
    if not isinstance(raw, list):
        raise InstanceError(path, "expected a list of {type, latency_ms, bandwidth_gbps}")
    types = {d.type for d in devices}
    entry: dict[str, tuple[float, float]] = {}
    for i, e in enumerate(raw):
        er, lat, bw = _read_link(e, f"{path}[{i}]", {"type"})
        t = er.string("type")
        if t not in types:
            raise InstanceError(er.sub("type"), f"no device of type {t!r}")
        if t in entry:
            raise InstanceError(er.sub("type"), f"{t!r} listed twice")
        entry[t] = (lat, bw)
    lat_of = np.array([entry.get(d.type, (np.nan, np.nan))[0] for d in devices])
    bw_of = np.array([entry.get(d.type, (np.nan, np.nan))[1] for d in devices])
    # np.maximum / np.minimum keep a NaN: a pair with an unlisted type stays open
    return np.maximum(lat_of[:, None], lat_of[None, :]), np.minimum(bw_of[:, None], bw_of[None, :])


EGRESS = "egress_usd_per_gb"
CAPACITY = "capacity_gbps"
MIN_CAPACITY_GBPS = 1e-6


def read_capacity(r: _Reader) -> dict[tuple[str, str], float]:
    """Bytes/s that all of a plan's traffic from region a to region b shares, from the
    ``capacity_gbps`` of the ``inter_region`` entries ({a, b} covers both directions
    unless {b, a} is listed too, as for links); empty when no entry gives one
    (formulations/model.md §3.2). Call after :func:`_read_network` checked the entries."""
    entries = r.get("inter_region", []) if r.has("inter_region") else []
    explicit: dict[tuple[str, str], float] = {}
    listed = set()
    for i, e in enumerate(entries):
        er = _Reader(e, f"{r.sub('inter_region')}[{i}]")
        listed.add((er.string("a"), er.string("b")))
        if er.has(CAPACITY):
            gbps = er.number(CAPACITY, positive=True, maximum=LIMITS[CAPACITY])
            if gbps < MIN_CAPACITY_GBPS:      # below it a message would take longer than any limit
                raise InstanceError(er.sub(CAPACITY), f"must be at least {MIN_CAPACITY_GBPS:g}, got {gbps!r}")
            explicit[(er.string("a"), er.string("b"))] = units.gbps_to_bytes_per_s(gbps)
    out = dict(explicit)
    for (a, b), v in explicit.items():
        if (b, a) not in listed:
            out[b, a] = v
    return out


def read_egress(r: _Reader, devices: list[Device]) -> np.ndarray | None:
    """USD per byte sent from u to v, (n, n), from the ``egress_usd_per_gb`` of the
    ``inter_region`` entries (an entry {a, b} prices both directions unless {b, a} is
    listed too, as for links); None when no entry prices egress. Call after
    :func:`_read_network` has checked the entries."""
    entries = r.get("inter_region", []) if r.has("inter_region") else []
    explicit: dict[tuple[str, str], float] = {}
    for i, e in enumerate(entries):
        er = _Reader(e, f"{r.sub('inter_region')}[{i}]")
        explicit[(er.string("a"), er.string("b"))] = er.number(EGRESS, 0.0, nonneg=True)
    if not any(v > 0 for v in explicit.values()):
        return None
    price = dict(explicit)
    for (a, b), v in explicit.items():
        price.setdefault((b, a), v)
    names = sorted({d.region for d in devices})
    reg_of = _codes([d.region for d in devices], names)
    R = np.zeros((len(names), len(names)))
    pos = {name: i for i, name in enumerate(names)}
    for (a, b), v in price.items():
        R[pos[a], pos[b]] = v / 1e9                   # GB = 1e9 bytes, as cloud price lists count
    out = R[reg_of[:, None], reg_of[None, :]]
    out[reg_of[:, None] == reg_of[None, :]] = 0.0      # egress is what leaves a region
    out.setflags(write=False)
    return out


def _codes(names: list[str], order: list[str] | None = None) -> np.ndarray:
    pos = {n: i for i, n in enumerate(order)} if order is not None else {}
    if order is None:
        for n in names:
            pos.setdefault(n, len(pos))
    return np.array([pos[n] for n in names], dtype=np.int64)
