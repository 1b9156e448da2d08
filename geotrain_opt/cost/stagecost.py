"""The stage arithmetic of the cost model, written once (formulations/model.md §3).

Stage totals (work, parameters, activations and logits), flush counts under
gradient accumulation, in-flight micro-batches, stage memory, hop times and the
replica pipeline time are used by the batched evaluator, the constructive
heuristics, the simulator, the instance fit check, the exact formulation,
``describe`` and the plots. They all call these functions, with scalars or
numpy arrays alike. The reference evaluator (``evaluator.evaluate``) does *not*:
it restates the model literally and is the oracle the others are tested against.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import InstanceArrays

Num = Any    # float or numpy array


def stage_work(a: "InstanceArrays", lo: Num, hi: Num, last: Num) -> Num:
    """FLOP per micro-batch of the stage holding layers [lo, hi) (+ LM head if last)."""
    return a.w_prefix[hi] - a.w_prefix[lo] + np.where(last, a.head_work, 0.0)


def stage_forward(a: "InstanceArrays", lo: Num, hi: Num, last: Num) -> Num:
    """FLOP of the stage's forward per micro-batch: the layers' forward share and a
    third of the LM head (its backward is twice its forward; it is never recomputed)."""
    return (a.w_prefix[hi] - a.w_prefix[lo]) * a.fwd_share + np.where(last, a.head_work / 3.0, 0.0)


def stage_params(a: "InstanceArrays", lo: Num, hi: Num, first: Num, last: Num) -> Num:
    return (a.par_prefix[hi] - a.par_prefix[lo] + np.where(first, a.emb_params, 0.0)
            + np.where(last, a.head_params, 0.0))


def stage_act(a: "InstanceArrays", lo: Num, hi: Num) -> Num:
    """Activation bytes kept per in-flight micro-batch by the stage's layers (no logits)."""
    return a.act_prefix[hi] - a.act_prefix[lo]


def flushes(a: "InstanceArrays", m: Num) -> tuple[Num, Num]:
    """(S_k, q_k): pipeline flushes of a replica with m micro-batches, and the most
    micro-batches in one flush (S_k = min(S, m_k), q_k = ceil(m_k / S_k))."""
    S = np.minimum(a.steps, m)
    q = -(-np.asarray(m) // S)
    return S, q


def inflight(a: "InstanceArrays", P: int, j: Num, q: Num) -> Num:
    """Micro-batches whose activations stage j holds at once (q: micro-batches per flush)."""
    return q if a.gpipe else np.minimum(P - np.asarray(j), q)


def logits_inflight(a: "InstanceArrays", infl: Num) -> Num:
    """How many micro-batches' logits the last stage holds: all in flight without
    recomputation, one (a transient of the micro-batch being computed) with it."""
    return infl if a.logits_per_inflight else np.ones_like(infl)


def state_per_param(a: "InstanceArrays", D: Num) -> Num:
    """Training-state bytes a device holds per parameter of its stage with D replicas
    (model.md §15: ZeRO divides ``sharded_bytes`` of them over the replicas)."""
    return a.state_bytes - a.sharded_bytes + a.sharded_bytes / D if a.sharded_bytes else a.state_bytes


def stage_memory(a: "InstanceArrays", N: Num, act: Num, last: Num, infl: Num, D: Num, scale: Num = 1.0) -> Num:
    """Bytes a device of the stage needs: training state, activations (times the
    device's ``act_scale``, §14), logits."""
    return state_per_param(a, D) * N + act * scale * infl + np.where(last, a.logits * logits_inflight(a, infl), 0.0)


def stage_memory_of(a: "InstanceArrays", P: int, j: int, lo: int, hi: int, q: int, D: int,
                    scale: float = 1.0) -> float:
    """Memory of stage j = layers [lo, hi) of a P-stage pipeline, q micro-batches per
    flush, D replicas, on a device whose activations are ``scale`` times the model's."""
    first, last = j == 0, j == P - 1
    return float(stage_memory(a, stage_params(a, lo, hi, first, last), stage_act(a, lo, hi), last,
                              inflight(a, P, j, q), D, scale))


def occupancy(a: "InstanceArrays", u: Num, v: Num) -> Num:
    """Serialisation time A/beta of one stage-boundary message on link u -> v."""
    return a.A * a.inv_beta[u, v]


def hop(a: "InstanceArrays", u: Num, v: Num) -> Num:
    """Latency plus transfer of one stage-boundary message on link u -> v."""
    return a.alpha[u, v] + a.A * a.inv_beta[u, v]


def exposed(a: "InstanceArrays", u: Num, v: Num) -> Num:
    """Exposed time e = kappa A/beta + A/gamma [nodes differ] (a.mu = A/gamma) of one message on link u -> v."""
    return a.exposed[u, v]


def replica_time(a: "InstanceArrays", t: np.ndarray, occ: np.ndarray, lat: np.ndarray, m: Num,
                 ex: np.ndarray, floor: Num = 0.0, fwd: np.ndarray | None = None) -> Num:
    """T_k over the last axis: t (..., P) stage times, occ/lat/ex (..., P-1) link
    occupancy, latency and exposed time, m micro-batches (broadcast against t[..., 0]),
    ``floor`` the period that shared WAN capacity imposes (:func:`wan_periods`), ``fwd``
    (..., P) the forward part of t (needed under GPipe).

    T_k = S_k (sum r + 2 sum x) + (m_k - S_k) tau_k, r_j = t_j + 2 (e_{j-1} + e_j);
    1F1B: tau_k = max(max_j r_j, max_j o_j, floor); GPipe: tau_k = tau_F + tau_B, each
    phase's own bottleneck, tau_F = max(max_j f_j + e_{j-1} + e_j, max_j o_j, floor)."""
    pad = np.zeros(t.shape[:-1] + (1,))
    around = np.concatenate([pad, ex], axis=-1) + np.concatenate([ex, pad], axis=-1)
    o_max = occ.max(axis=-1) if occ.shape[-1] else np.zeros(t.shape[:-1])
    o_max = np.maximum(o_max, floor)
    if a.gpipe:
        tau = (np.maximum((fwd + around).max(axis=-1), o_max)
               + np.maximum((t - fwd + around).max(axis=-1), o_max))
    else:
        tau = np.maximum((t + 2.0 * around).max(axis=-1), o_max)
    m = np.asarray(m, dtype=float)
    S, _q = flushes(a, m)
    # the fill: one micro-batch through every stage's row (its exposed time included) and back
    fill = (t + 2.0 * around).sum(axis=-1) + 2.0 * (occ + lat).sum(axis=-1)
    T = S * fill + (m - S) * tau
    if a.gpipe:
        return T
    # a drained stage's micro-batches (the blocks' tail): its backward and its two
    # messages' exposed time, or the occupancy of its link down (§3.1)
    tail = np.maximum((1.0 - a.fwd_share) * t + around, np.concatenate([occ, pad], axis=-1))
    return np.maximum(T, window_time(t + 2.0 * around, occ + lat, tau, fill, m, S, tail))


def drains(a: "InstanceArrays", t: np.ndarray, occ: np.ndarray, lat: np.ndarray, ex: np.ndarray) -> np.ndarray:
    """(..., P): d_j, the time from stage j's last backward to stage 0's (formulations/
    model.md §3.3), d_0 = 0, d_j = sum_{i<j} (t_i - f_i + e_{i-1} + e_i) + alpha_i + o_i:
    each stage's backward with its messages' exposed time, then the hop down. Stages
    i < P-1 carry no LM head, so t_i - f_i = (1 - rho) t_i."""
    pad = np.zeros(t.shape[:-1] + (1,))
    step = (1.0 - a.fwd_share) * t[..., :-1] + np.concatenate([pad, ex[..., :-1]], axis=-1) + ex + occ + lat
    return np.concatenate([pad, np.cumsum(step, axis=-1)], axis=-1)


def iteration_time(Tk: np.ndarray, drain: np.ndarray, R: np.ndarray, wan: Num = 0.0) -> np.ndarray:
    """T from Tk (..., D), drains (..., D, P), rings R (..., P) and the shared WAN floor
    (...,) (§3.3): stage j's ring starts at s_j = max_k (T_k - d_kj), once every replica's
    stage j is done, so T = max(max_k T_k, max_j s_j + R_j, s_{P-1} + wan)."""
    start = (Tk[..., None] - drain).max(axis=-2)
    return np.maximum(np.maximum(Tk.max(axis=-1), (start + R).max(axis=-1)), start[..., -1] + wan)


def window_time(row: np.ndarray, x: np.ndarray, tau: np.ndarray, fill: np.ndarray, m: np.ndarray,
                S: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """1F1B's window over the last axis (formulations/model.md §3.1; the reference is
    ``cost/window.py``): stage j holds at most W = P - j micro-batches of a
    flush, so a flush of q > W waits (floor((q-1)/W) + 1) round trips from j to the
    last stage and back; a block j..l inside it adds its cycle every w = l - j + 1
    micro-batches while stage j still has forwards to run, then ``tail`` (..., P) per
    micro-batch. ``row`` (..., P) the stages' rows, ``x`` (..., P-1) the hops."""
    P = row.shape[-1]
    pad = np.zeros(row.shape[:-1] + (1,))
    hops = 2.0 * np.concatenate([x, pad], axis=-1)                  # 2 x_j, x_{P-1} = 0
    # around[j] = sum_{l>=j} row_l + 2 x_l; before[j] = sum_{l<j} row_l + 2 x_l
    around = np.cumsum((row + hops)[..., ::-1], axis=-1)[..., ::-1]
    before = np.concatenate([pad, np.cumsum(row + hops, axis=-1)[..., :-1]], axis=-1)
    W = np.arange(P, 0, -1, dtype=float)                              # P - j
    m, S = np.maximum(np.asarray(m, dtype=float), 1.0), np.maximum(np.asarray(S, dtype=float), 1.0)
    base = np.floor(m / S)
    extra = m - S * base
    total = np.zeros(row.shape)
    # the two flush sizes (``extra`` flushes of base + 1, the rest of base); a size no
    # replica of the batch has is skipped (the even split mostly has one)
    sizes = [(q, count) for q, count in ((base + 1.0, extra), (base, S - extra)) if np.any(count)]
    for q, count in sizes:
        q, count = q[..., None], count[..., None]
        win = (np.floor((q - 1.0) / W) + 1.0) * around + np.mod(q - 1.0, W) * tau[..., None] + before
        total += count * np.where(W < q, win, fill[..., None] + (q - 1.0) * tau[..., None])
    out = total.max(axis=-1)
    if P > 2:
        out = np.maximum(out, _blocks(row, hops, W, tail, fill, around, sizes))
    return out


def _blocks(row: np.ndarray, hops: np.ndarray, W: np.ndarray, tail: np.ndarray, fill: np.ndarray,
            around: np.ndarray, sizes: list) -> np.ndarray:
    """Blocks j..l inside the pipeline (2 <= w = l - j + 1, l < P - 1; model.md §3.1):
    B(i, j) -> F(i + W_j, j) -> ... -> B(i + w, j), one cycle each while i + W_j < q,
    then the block's slowest drained stage, or the cycles then a round trip from j and
    the slowest drained stage below the last: the larger, summed over the flush sizes."""
    P = row.shape[-1]
    cum = np.concatenate([np.zeros(row.shape[:-1] + (1,)), np.cumsum(row + hops, axis=-1)], axis=-1)
    cumh = cum[..., 1:P] - hops[..., :P - 1]            # cum[l+1] - 2 x_l: cycle = cumh[l] - cum[j]
    jj, ll = np.triu_indices(P - 1, k=1)                 # j < l <= P-2
    w, Wj = (ll - jj + 1).astype(float), W[jj]
    # span[..., j, l] = max(tail[j..l]): stages before j masked out, then a running max
    below = np.arange(P - 1)[None, :] < np.arange(P - 1)[:, None]              # s < j
    span = np.maximum.accumulate(np.where(below, -np.inf, tail[..., None, :P - 1]), axis=-1)
    if len(sizes) == 1 and np.ptp(sizes[0][0]) == 0:
        # one flush size for the whole batch (the even split, the common case): the counts
        # are vectors over the blocks, a block whose cycle never closes adds nothing to
        # the fill, and the flush count and fill factor out of the maximum
        q, count = float(sizes[0][0].flat[0]), sizes[0][1]
        keep = q > Wj
        if not keep.any():
            return np.zeros(fill.shape)
        jj, ll, w, Wj = jj[keep], ll[keep], w[keep], Wj[keep]
        loops = np.floor((q - 1.0 - Wj) / w) + 1.0
        rest = q - 1.0 - loops * w
        cycle = cumh[..., ll] - cum[..., jj]
        cycles = loops * cycle + rest * span[..., jj, ll]
        ends = (loops - 1.0) * cycle + around[..., jj] + (rest + w - Wj) * span[..., jj, P - 2]
        return count * (fill + np.maximum(cycles, ends).max(axis=-1))
    cycle = cumh[..., ll] - cum[..., jj]
    drain, drain_all = span[..., jj, ll], span[..., jj, P - 2]
    block, rounds = np.zeros(cycle.shape), np.zeros(cycle.shape)
    for q, count in sizes:
        q, count = q[..., None], count[..., None]
        closes = q > Wj
        loops = np.where(closes, np.floor((q - 1.0 - Wj) / w) + 1.0, 0.0)
        rest = np.where(closes, q - 1.0 - loops * w, 0.0)
        filled = fill[..., None] + loops * cycle
        block += count * (filled + rest * drain)
        ends = filled - cycle + around[..., jj] + (rest + w - Wj) * drain_all
        rounds += count * np.where(closes, ends, fill[..., None])
    return np.maximum(block, rounds).max(axis=-1)


def wan_periods(a: "InstanceArrays", g: np.ndarray) -> np.ndarray:
    """Shared WAN capacity (formulations/model.md §3.2), pipelines: the period floor of
    every replica, (..., D) from grids g (..., D, P) of device indices. A region pair
    {r, r'} with a capacity carries, per period, one message each way for every hop of
    the plan between r and r' (activations one way, gradients the other), so a replica
    with such a hop has tau_k >= n_{rr'} A max(1/C(r->r'), 1/C(r'->r))."""
    g = np.asarray(g)
    out = np.zeros(g.shape[:-1])
    if g.shape[-1] < 2 or not a.shared_wan:
        return out
    R = a.inv_cap.shape[0]
    ru, rv = a.region[g[..., :-1]], a.region[g[..., 1:]]           # (..., D, P-1)
    per_msg = a.A * np.maximum(a.inv_cap[ru, rv], a.inv_cap[rv, ru])
    pid = np.minimum(ru, rv) * R + np.maximum(ru, rv)              # the unordered pair
    lead = int(np.prod(g.shape[:-2], dtype=np.int64))
    flat = pid.reshape(lead, -1) + (np.arange(lead) * R * R)[:, None]
    hit = per_msg.reshape(lead, -1) > 0
    counts = np.bincount(flat[hit], minlength=lead * R * R).astype(float)
    load = np.where(hit, counts[flat] * per_msg.reshape(lead, -1), 0.0).reshape(per_msg.shape)
    return load.max(axis=-1)


def wan_sync(a: "InstanceArrays", g: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Shared WAN capacity (§3.2), data parallelism: the sync floor (...,) from grids g
    (..., D, P) and stage parameters N (..., P). Every stage's ring runs at once, so the
    ring edges from region r to r' of all stages share C(r->r'): the sync takes at least
    sum_j 2 (D-1)/D grad_bytes N_j #{edges of ring j from r to r'} / C(r->r'), and the
    last of those bytes one latency more (the least from r to r', a.cap_alpha)."""
    g = np.asarray(g)
    D = g.shape[-2]
    lead_shape = g.shape[:-2]
    if D < 2 or not a.shared_wan:
        return np.zeros(lead_shape)
    R = a.inv_cap.shape[0]
    ru, rv = a.region[g], a.region[np.roll(g, -1, axis=-2)]        # edge k -> k+1 mod D
    nbytes = 2.0 * (D - 1) / D * a.ring_bytes * np.broadcast_to(np.asarray(N, dtype=float)[..., None, :], g.shape)
    lead = int(np.prod(lead_shape, dtype=np.int64))
    flat = (ru * R + rv).reshape(lead, -1) + (np.arange(lead) * R * R)[:, None]
    hit = (a.inv_cap[ru, rv] > 0).reshape(lead, -1)
    total = np.bincount(flat[hit], weights=nbytes.reshape(lead, -1)[hit], minlength=lead * R * R)
    total = total.reshape(lead, R * R)
    floor = total * a.inv_cap.reshape(-1) + np.where(total > 0, a.cap_alpha.reshape(-1), 0.0)
    return floor.max(axis=-1).reshape(lead_shape)


def ring_time(a: "InstanceArrays", D: int, N: Num, inv_beta_max: Num, alpha_max: Num) -> Num:
    """R_j of a D-replica ring for a stage of N parameters."""
    if D == 1:
        return np.zeros_like(np.asarray(N, dtype=float))
    return 2.0 * (D - 1) / D * a.ring_bytes * N * inv_beta_max + 2.0 * (D - 1) * alpha_max
