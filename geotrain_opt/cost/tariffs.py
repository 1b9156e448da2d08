"""Cost and carbon as priced sums (formulations/model.md §9), the shape energy has.

Energy, dollars and grams are all "a rate per device while it computes, a rate
per device while it waits, a rate per byte a link carries": a device costs its
price per second busy or not, and emits its energy times its region's intensity;
a link costs egress per byte that leaves a region, and emits its network energy at
the mean intensity of its two regions. One :class:`Tariff` states the three rates
of a metric, so the batched evaluator (and any model that can charge energy) charges
cost and carbon the way it charges energy. The reference evaluator does not use
this module: it restates §9 literally and is the oracle this is tested against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from geotrain_opt.problem.instance import Instance

J_PER_KWH = 3.6e6
S_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Tariff:
    busy: np.ndarray     # (n,) per second of a device's compute (at its full clock)
    wait: np.ndarray     # (n,) per second of a selected device's waiting
    link: np.ndarray     # (n, n) per byte sent from u to v
    per_watt: np.ndarray | None = None   # (n,) the busy rate per watt drawn, where it follows power (carbon)


def tariffs(inst: Instance) -> dict[str, Tariff]:
    """The instance's priced metrics: "cost_usd" and "carbon_g" (zero rates when unpriced)."""
    got = inst._cache.get("tariffs")
    if got is None:
        a = inst.arrays
        price = np.array([d.price_per_hour for d in inst.devices]) / S_PER_HOUR
        # no egress prices: zeros that take no memory (n x n would be 134 MB at 4,096 GPUs)
        zeros = np.broadcast_to(0.0, (inst.n, inst.n))
        egress = inst.egress_usd_per_byte if inst.egress_usd_per_byte is not None else zeros
        g_per_j = np.array([inst.carbon_region.get(d.region, 0.0) for d in inst.devices]) / J_PER_KWH
        net = zeros if a.net_j_per_byte == 0 or not g_per_j.any() else _carbon_links(inst, a.net_j_per_byte, g_per_j)
        got = inst._cache["tariffs"] = {
            "cost_usd": Tariff(price, price, egress),
            "carbon_g": Tariff(a.p_busy * g_per_j, a.p_wait * g_per_j, net, g_per_j),
        }
    return got


def _carbon_links(inst: Instance, net_j_per_byte: float, g_per_j: np.ndarray) -> np.ndarray:
    """Grams per byte sent from u to v (network energy at the mean intensity of the two
    regions), shared by the instances of one network (its micro-batch variants)."""
    from geotrain_opt.problem.instance.arrays import network_shared
    shared = network_shared(inst)
    key = ("carbon_links", net_j_per_byte, g_per_j.tobytes())
    if key not in shared:
        a = inst.arrays
        links = a.net_j_per_byte * a.cross * (g_per_j[:, None] + g_per_j[None, :]) / 2.0
        links.setflags(write=False)
        shared[key] = links
    return shared[key]


def charge(tf: Tariff, grid: np.ndarray, U: np.ndarray, T: np.ndarray, mb: np.ndarray, A: float,
           ring_bytes: np.ndarray | None, p_busy: np.ndarray | None = None) -> np.ndarray:
    """A metric of a batch of plans of one shape: ``grid`` (n, D, P), busy seconds
    ``U`` (n, D, P), ``T`` (n,), micro-batches ``mb`` (n, D) as floats, boundary
    message ``A`` bytes, ``ring_bytes`` (n, P) sent along each directed ring edge
    of a stage (None when D = 1); ``p_busy`` (n, D, P): each slot's busy power at its
    clock (§10), which a power-following rate (carbon) charges instead of ``busy``."""
    busy = tf.busy[grid] if tf.per_watt is None or p_busy is None else tf.per_watt[grid] * p_busy
    devices = (busy * U + tf.wait[grid] * (T[:, None, None] - U)).sum(axis=(1, 2))
    u, v = grid[:, :, :-1], grid[:, :, 1:]
    # m_k activations forward and m_k gradients back per pipeline link
    pipe = ((tf.link[u, v] + tf.link[v, u]) * (A * mb)[:, :, None]).sum(axis=(1, 2))
    ring = 0.0
    if ring_bytes is not None:
        nxt = np.roll(grid, -1, axis=1)
        ring = (tf.link[grid, nxt].sum(axis=1) * ring_bytes).sum(axis=1)
    return devices + pipe + ring


def floor(inst: Instance, name: str, work: float, T: float, n_dev: int) -> float:
    """A lower bound on metric ``name`` of every plan of ``n_dev`` devices whose time
    is at least ``T`` and whose devices do ``work`` FLOP in all: the metric is
    sum (busy - wait) U_g + sum wait_g T + links, U_g sums to the work at speeds
    sigma_g, busy >= wait and links cost >= 0."""
    tf, a = tariffs(inst)[name], inst.arrays
    if tf.per_watt is None:
        per_flop = float(((tf.busy - tf.wait) / a.speed).min())
    else:       # power-following rates: at any clock of §10
        per_flop = float((tf.per_watt[:, None] * (a.clock_busy - a.p_wait[:, None])
                          / (a.clock_frac * a.speed[:, None])).min())
    waits = np.sort(tf.wait)[:n_dev].sum()
    return per_flop * work + float(waits) * T


def priced_floors(inst: Instance, work: float, T: float, n_dev: int) -> tuple[float | None, float | None]:
    """(C, Q) lower bounds (:func:`floor`) where the instance prices them, else None."""
    return (floor(inst, "cost_usd", work, T, n_dev) if inst.priced else None,
            floor(inst, "carbon_g", work, T, n_dev) if inst.carbon_priced else None)
