"""Tensor parallelism (formulations/model.md §14): a group of t GPUs of one type on
one node that runs a stage together, Megatron-LM style with sequence parallelism.

A group is costed as one device of an instance of its own (:func:`group_instance`):
t times the memory, the power and the price of one GPU, the speed of t GPUs on
1/t of the work less the group's per-layer collectives, and links of t parallel
streams (each GPU sends its shard to its peer). Every formula of §3 then holds as
written, so the evaluators, the simulator and every solver cost a tensor-parallel
plan by costing the group instance: nothing below the instance knows about TP.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance.records import Device, Instance

SEP = "+"          # a group's device id in its instance: its members' ids joined


def group_id(members: Sequence[str]) -> str:
    return SEP.join(members)


def collectives_per_layer(recompute: str) -> int:
    """All-gathers and reduce-scatters of a layer's activation per micro-batch (§14):
    two of each in the forward (before and after attention and the MLP, sequence
    parallelism), their conjugates in the backward, and the forward's again under
    full recomputation (selective recomputation repeats only the attention core,
    which runs inside the group without communication)."""
    return 12 if recompute == "full" else 8


def layer_comm_s(inst: "Instance", members: Sequence[int]) -> float:
    """Seconds of a group's collectives per layer and micro-batch: ring all-gathers and
    reduce-scatters of the b s h p-byte activation, (t - 1) steps of A / t each, over
    the slowest link of the ring through its members (in their listed order)."""
    t = len(members)
    if t == 1:
        return 0.0
    a = inst.arrays
    ring = list(zip(members, list(members[1:]) + [members[0]]))
    lat = max(max(a.alpha[u, v], a.alpha[v, u]) for u, v in ring)
    inv = max(max(a.inv_beta[u, v], a.inv_beta[v, u]) for u, v in ring)
    return collectives_per_layer(inst.model.recompute) * (t - 1) * (lat + a.A / t * inv)


def group_device(inst: "Instance", members: Sequence[int]) -> "Device":
    """The group as one device (§14): speed sigma_G = w / (w / (t sigma_1) + c) with
    sigma_1 a member's speed on a micro-batch of n / t tokens and c the collectives of
    one layer; t times a member's memory, and the members' powers and prices summed."""
    devs = [inst.devices[i] for i in members]
    t, m = len(devs), inst.model
    if t == 1:      # a GPU beside groups: itself, its NIC share already in the links
        return replace(devs[0], nic_bps=None)
    w = m.layer_work_flop()
    one = min(d.speed_at(m.micro_batch * m.seq_len / t) for d in devs)
    speed = w / (w / (t * one) + layer_comm_s(inst, members))
    d0 = devs[0]
    return replace(d0, id=group_id([d.id for d in devs]), peak_flops=speed, efficiency=1.0, half_tokens=0.0,
                   mem_bytes=t * min(d.mem_bytes for d in devs), busy_w=sum(d.busy_w for d in devs),
                   act_scale=1.0 if inst.options.sequence_parallel else 1.0 + (t - 1) * m.replicated_act_share(),
                   wait_w=sum(d.wait_w for d in devs), nic_bps=None, clocks=(),
                   price_per_hour=sum(d.price_per_hour for d in devs))


def group_instance(inst: "Instance", groups: list[tuple[int, ...]]) -> "Instance":
    """The instance whose devices are ``groups`` (rows of ``inst``'s GPUs; a group of
    one is that GPU): between two groups of t and t' GPUs, min(t, t') parallel streams
    (the i-th GPU of one talks to the i-th of the other), so the pair's bandwidth is
    that many times its slowest stream's and a message's host-stack time is divided by
    it; ``max_devices`` still counts GPUs (``Instance.slot_limit`` turns it into slots)."""
    G = len(groups)
    size = np.array([len(g) for g in groups], dtype=np.int64)
    idx = np.full((G, int(size.max())), -1, dtype=np.int64)
    for r, g in enumerate(groups):
        idx[r, :len(g)] = g
    a = inst.arrays
    alpha = np.zeros((G, G))
    inv = np.zeros_like(alpha)
    for i in range(idx.shape[1]):
        on = np.flatnonzero(size > i)              # the groups with an i-th GPU
        pick = np.ix_(idx[on, i], idx[on, i])
        block = np.ix_(on, on)
        alpha[block] = np.maximum(alpha[block], inst.alpha[pick])
        inv[block] = np.maximum(inv[block], a.inv_beta[pick])  # NIC shares and capacities folded in already
    streams = np.minimum(size[:, None], size[None, :]).astype(float)
    with np.errstate(divide="ignore"):
        beta = np.where(inv > 0, streams / np.where(inv > 0, inv, 1.0), np.inf)
    np.fill_diagonal(alpha, 0.0)
    np.fill_diagonal(beta, np.inf)
    egress = inst.egress_usd_per_byte
    return replace(inst, name=f"{inst.name} (TP {'/'.join(map(str, sorted(set(size.tolist()))))})",
                   devices=[group_device(inst, g) for g in groups], alpha=alpha, beta=beta,
                   options=replace(inst.options, tensor_parallel=(1,)), physical=inst,
                   groups=tuple(map(tuple, groups)), tp=int(size.max()), streams=streams,
                   egress_usd_per_byte=None if egress is None else egress[idx[:, 0][:, None], idx[:, 0][None, :]],
                   _cache={})


def aligned_groups(inst: "Instance", t: "int | dict[str, int]") -> list[tuple[int, ...]]:
    """Every node's GPUs of each type in consecutive blocks of t (or of its type's
    degree, for a dict type -> degree; a type it omits is left out), in the listed
    order (the GPUs of a node past the last whole block are left out): the groups the
    solvers choose from (GPUs of one type on one node are alike, so which of them
    form a group does not change a cost, model.md §14)."""
    by: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(inst.devices):
        by.setdefault((d.node, d.type), []).append(i)
    out = []
    for (_node, typ), rows in by.items():
        k = t if isinstance(t, int) else t.get(typ, 0)
        if k:
            out += [tuple(rows[s:s + k]) for s in range(0, len(rows) - k + 1, k)]
    return out


def largest_group(inst: "Instance", typ: str | None = None) -> int:
    """The most GPUs of one type (of ``typ``) on one node: the largest degree possible."""
    count: dict[tuple[str, str], int] = {}
    for d in inst.devices:
        if typ is None or d.type == typ:
            count[(d.node, d.type)] = count.get((d.node, d.type), 0) + 1
    return max(count.values(), default=0)


def degrees(inst: "Instance") -> tuple[int, ...]:
    """The degrees the solvers search (1 alone: no tensor parallelism)."""
    return inst.options.tensor_parallel


def at_degree(inst: "Instance", t: "int | dict[str, int]") -> "Instance":
    """The instance of the aligned groups of degree t, or of each type's degree for a
    dict type -> degree (``inst`` itself at t = 1)."""
    if t == 1:
        return inst if inst.options.tensor_parallel == (1,) else replace(
            inst, options=replace(inst.options, tensor_parallel=(1,)), _cache={})
    key = t if isinstance(t, int) else tuple(sorted(t.items()))
    cache = inst._cache.setdefault("tp", {})
    if key not in cache:
        cache[key] = group_instance(inst, aligned_groups(inst, t))
    return cache[key]


MAX_MIXED = 8      # per-type degree combinations searched besides the uniform degrees


def cases(inst: "Instance") -> list["int | dict[str, int]"]:
    """What the solvers search (§14): every degree the instance lists, one for all types
    (a type that cannot form a group of it sits out), and, where the instance holds
    several GPU types and without ``max_devices``, each type at its own degree, as
    long as that makes at most ``MAX_MIXED`` further combinations."""
    out: list = [t for t in degrees(inst)]
    types = sorted({d.type for d in inst.devices})
    if len(types) < 2 or inst.options.max_devices is not None:
        return out
    each = [[t for t in degrees(inst) if t <= largest_group(inst, typ)] for typ in types]
    combos = [dict(zip(types, c)) for c in itertools.product(*each) if len(set(c)) > 1]
    return out + combos if len(combos) <= MAX_MIXED else out
