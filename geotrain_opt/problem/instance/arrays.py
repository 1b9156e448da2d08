"""Per-instance constants in SI units, shaped for vectorised evaluation: the
evaluator that reads them is the hot loop of every solver."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geotrain_opt.problem.instance.network import _codes, nic_inv_share

if TYPE_CHECKING:
    from geotrain_opt.problem.instance.records import Instance


@dataclass(frozen=True)
class InstanceArrays:
    """Per-instance constants in SI units, shaped for vectorised evaluation."""

    speed: np.ndarray        # (n,) FLOP/s
    mem_cap: np.ndarray      # (n,) usable bytes = headroom * mem
    act_scale: np.ndarray    # (n,) activation bytes per the model's (§14: groups without sequence parallelism)
    p_busy: np.ndarray       # (n,) W, times PUE
    p_wait: np.ndarray       # (n,) W, times PUE
    region: np.ndarray       # (n,) int region index
    alpha: np.ndarray        # (n, n)
    inv_beta: np.ndarray     # (n, n) s/byte of the effective bandwidth (NIC share included), diagonal 0
    cross: np.ndarray        # (n, n) bool, True where regions differ
    w_prefix: np.ndarray     # (L+1,) cumulative work per micro-batch
    par_prefix: np.ndarray   # (L+1,) cumulative parameters
    act_prefix: np.ndarray   # (L+1,) cumulative activation bytes per micro-batch
    head_work: float
    fwd_share: float         # the forward's share of a layer's work (1/3; 1/4 with full recomputation)
    emb_params: float
    head_params: float
    logits: float
    A: float                 # stage-boundary message, bytes
    state_bytes: float
    grad_bytes: float
    sharded_bytes: float     # §15: bytes of state_bytes divided over the D replicas of a stage (ZeRO)
    ring_bytes: float        # §15: bytes per parameter of each of a ring's two passes (grad_bytes; ZeRO: their mean)
    M: int
    L: int
    gpipe: bool
    uniform: bool
    net_j_per_byte: float
    kappa: float             # exposed pipeline communication
    mu: float                # A / gamma: a message's time in the hosts' network stacks between nodes, s
    exposed: "ExposedLinks"  # (n, n) exposed time of one message u -> v: kappa A / beta + mu [nodes differ]
    inv_cap: np.ndarray      # (R, R) s/byte of the shared capacity from region r to r' (0: none, §3.2)
    cap_alpha: np.ndarray    # (R, R) the least latency from region r to r' where inv_cap > 0
    steps: int               # accumulation steps S
    logits_per_inflight: bool  # recompute none: logits of every in-flight micro-batch are kept
    # §10 clocks: per device and level (0 = full clock), padded with level 0
    clock_frac: np.ndarray     # (n, levels) fraction of the speed
    clock_busy: np.ndarray     # (n, levels) busy power at that clock, W, times PUE
    n_levels: np.ndarray       # (n,) levels of each device
    has_clocks: bool

    @property
    def shared_wan(self) -> bool:
        """Whether a region pair's capacity is shared by the plan's traffic (§3.2)."""
        return bool(self.inv_cap.any())

    @staticmethod
    def build(inst: Instance) -> "InstanceArrays":
        m = inst.model
        L = m.layers
        scale = np.ones((L, 3))
        for i, row in enumerate(m.layer_scale):
            scale[i] = row
        w = m.layer_work_flop() * scale[:, 0]
        par = m.layer_params() * scale[:, 1]
        act = m.layer_act_bytes() * scale[:, 2]
        pre = lambda v: np.concatenate([[0.0], np.cumsum(v)])  # noqa: E731
        pue = np.array([inst.pue_region.get(d.region, 1.0) for d in inst.devices])
        regions = {r: i for i, r in enumerate(inst.regions)}
        reg = np.array([regions[d.region] for d in inst.devices], dtype=np.int64)
        # n x n arrays are built in place, each term only where the instance has it: at
        # 10,000 devices one such array is 800 MB (issue 39)
        inv_cap, cap_alpha = _inv_capacity(inst, regions, reg)
        net = network_shared(inst)
        if "inv_beta" not in net:
            inv_beta = 1.0 / inst.beta                      # 1 / inf = 0 on the diagonal
            if any(d.nic_bps for d in inst.devices):
                np.maximum(inv_beta, nic_inv_share(inst), out=inv_beta)
            if inv_cap.any():
                np.maximum(inv_beta, inv_cap[reg[:, None], reg[None, :]], out=inv_beta)   # no message outruns its pair
            np.fill_diagonal(inv_beta, 0.0)
            inv_beta.setflags(write=False)
            net["inv_beta"] = inv_beta
            # bool, an eighth of a float array (0.25 s to allocate at 4,096 GPUs): as a
            # factor it is 0.0 or 1.0 exactly
            net["cross"] = np.not_equal(reg[:, None], reg[None, :])
            net["cross"].setflags(write=False)
        inv_beta = net["inv_beta"]
        mu = m.boundary_bytes() * inst.options.stack_s_per_byte       # A / gamma
        if mu > 0 and "node_cross" not in net:
            node = _codes([d.node for d in inst.devices])
            net["node_cross"] = np.not_equal(node[:, None], node[None, :])
            net["node_cross"].setflags(write=False)
        exposed = ExposedLinks(inv_beta, inst.options.exposed_comm * m.boundary_bytes(), mu, inst.streams,
                               net.get("node_cross"))
        alpha = inst.alpha.view()                      # read-only below, the instance's stays writable
        arrs = InstanceArrays(
            speed=np.array([d.speed_at(m.micro_batch * m.seq_len) for d in inst.devices]),
            mem_cap=np.array([d.mem_bytes for d in inst.devices]) * inst.options.memory_headroom,
            act_scale=np.array([d.act_scale for d in inst.devices], dtype=float),
            p_busy=np.array([d.busy_w for d in inst.devices]) * pue,
            p_wait=np.array([d.wait_w for d in inst.devices]) * pue,
            region=reg,
            alpha=alpha,
            inv_beta=inv_beta,
            cross=net["cross"],
            w_prefix=pre(w), par_prefix=pre(par), act_prefix=pre(act),
            head_work=m.head_work_flop(), fwd_share=m.layer_forward_flop() / m.layer_work_flop(), emb_params=m.embedding_params(),
            head_params=m.head_params(), logits=m.logits_bytes(), A=m.boundary_bytes(),
            state_bytes=m.state_bytes, grad_bytes=m.grad_bytes, **_zero(inst), M=m.num_micro_batches, L=L,
            gpipe=inst.options.schedule == "gpipe", uniform=inst.options.batch_split == "uniform",
            net_j_per_byte=inst.net_j_per_byte,
            kappa=inst.options.exposed_comm, mu=mu, exposed=exposed, inv_cap=inv_cap, cap_alpha=cap_alpha, steps=inst.options.accumulation_steps,
            logits_per_inflight=m.recompute != "full",
            **_clock_tables(inst, pue),
        )
        for a in (arrs.speed, arrs.mem_cap, arrs.act_scale, arrs.p_busy, arrs.p_wait, arrs.alpha, arrs.inv_beta,
                  arrs.inv_cap, arrs.cap_alpha, arrs.cross, arrs.w_prefix, arrs.par_prefix, arrs.act_prefix, arrs.clock_frac, arrs.clock_busy):
            a.setflags(write=False)
        return arrs


class ExposedLinks:
    """The (n, n) exposed time of one stage-boundary message u -> v (model.md §3),
    kappa A / beta_uv + A / gamma [nodes of u and v differ], computed where indexed;
    the host stack's share A / gamma over the pair's parallel streams (§14), if given.

    A (the message) differs between the micro-batch variants of §11 while the links
    are shared: held whole, each variant's array cost 0.3 s to allocate at 4,096 GPUs
    and 134 MB (issue 39). Indexing gives exactly the values the whole array held:
    ``inv_beta[k] * c + d[k] * cross[k]`` (d * 1.0 = d, and x * c + 0.0 = x * c for x >= 0)."""

    def __init__(self, inv_beta: np.ndarray, c: float, mu: float, streams: np.ndarray | None,
                 node_cross: np.ndarray | None) -> None:
        self.inv_beta, self.c, self.mu = inv_beta, float(c), float(mu)
        self.streams, self.node_cross = streams, node_cross
        self.shape = inv_beta.shape
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key):
        out = self.inv_beta[key] * self.c
        if self.mu > 0:
            d = self.mu if self.streams is None else self.mu / self.streams[key]
            out = out + d * self.node_cross[key]
        return out

    def diagonal(self) -> np.ndarray:
        i = np.arange(self.shape[0])
        return self[i, i]

    def max(self) -> float:
        """The largest entry, a block of rows at a time (no n x n temporary)."""
        n = self.shape[0]
        return max((float(self[s:s + 256].max()) for s in range(0, n, 256)), default=0.0)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self[:, :], dtype=dtype)


# products of the network alone, shared by the instances that hold the same links: the
# micro-batch variants of §11 differ in their model only, and at 4,096 GPUs each n x n
# product costs 0.3 s to allocate (eight variants: seconds before a search starts)
_SHARED: dict[tuple, tuple[weakref.ref, dict]] = {}


def network_shared(inst: Instance) -> dict:
    """A dict for products of ``inst``'s network (its link arrays, NICs, parallel streams,
    shared capacities and regions), the same dict for every instance with the same ones."""
    key = (id(inst.beta), id(inst.alpha), id(inst.streams), tuple(sorted(inst.wan_capacity.items())),
           tuple((d.nic_bps, d.region, d.node) for d in inst.devices))
    got = _SHARED.get(key)
    if got is not None and got[0]() is inst.beta:
        return got[1]

    def gone(ref: weakref.ref, key: tuple = key) -> None:
        if _SHARED.get(key, (None,))[0] is ref:
            del _SHARED[key]
    d: dict = {}
    _SHARED[key] = (weakref.ref(inst.beta, gone), d)
    return d


def _zero(inst: Instance) -> dict:
    """ZeRO (model.md §15): stage 1 divides the optimizer state (the training state
    less the weights and gradients) over the replicas, stage 2 the gradients too; both
    reduce-scatter the gradients and all-gather the weights instead of an all-reduce."""
    m, z = inst.model, inst.options.zero_stage
    opt = m.state_bytes - m.precision_bytes - m.grad_bytes
    sharded = 0.0 if z == 0 else opt if z == 1 else opt + m.grad_bytes
    return {"sharded_bytes": float(sharded),
            # reduce-scatter of the gradients, all-gather of the weights (ZeRO) or of the
            # summed gradients (an all-reduce): each pass moves (D-1)/D of its bytes
            "ring_bytes": float(m.grad_bytes) if z == 0 else (m.grad_bytes + m.precision_bytes) / 2.0}


def _inv_capacity(inst: Instance, regions: dict[str, int], reg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, R) seconds per byte of each region pair's shared capacity (0 where none) and
    the least latency of a link from r to r' (where a capacity is given)."""
    R = len(regions)
    inv, lat = np.zeros((R, R)), np.zeros((R, R))
    # the least latency is the physical GPUs' (§14: a group instance's own links are its members')
    src = inst.physical if inst.physical is not None else inst
    sreg = np.array([regions.get(d.region, -1) for d in src.devices], dtype=np.int64)
    for (ra, rb), bps in inst.wan_capacity.items():
        if ra not in regions or rb not in regions:
            continue            # a group instance may hold no group of a region
        i, j = regions[ra], regions[rb]
        inv[i, j] = 1.0 / bps
        lat[i, j] = float(src.alpha[np.ix_(sreg == i, sreg == j)].min())
    return inv, lat


def _clock_tables(inst: Instance, pue: np.ndarray) -> dict:
    levels = [d.levels for d in inst.devices]
    width = max(len(lv) for lv in levels)
    frac = np.ones((len(levels), width))
    busy = np.array([[d.busy_w] * width for d in inst.devices], dtype=float)
    for g, lv in enumerate(levels):
        for i, (f, p) in enumerate(lv):
            frac[g, i], busy[g, i] = f, p
    return {"clock_frac": frac, "clock_busy": busy * pue[:, None],
            "n_levels": np.array([len(lv) for lv in levels], dtype=np.int64), "has_clocks": width > 1}
