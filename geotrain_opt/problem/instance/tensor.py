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
    w = m.layer_work_flop()
    one = min(d.speed_at(m.micro_batch * m.seq_len / t) for d in devs)
    speed = w / (w / (t * one) + layer_comm_s(inst, members))
    d0 = devs[0]
    return replace(d0, id=group_id([d.id for d in devs]), peak_flops=speed, efficiency=1.0, half_tokens=0.0,
                   mem_bytes=t * min(d.mem_bytes for d in devs), busy_w=sum(d.busy_w for d in devs),
                   wait_w=sum(d.wait_w for d in devs), nic_bps=None, clocks=(),
                   price_per_hour=sum(d.price_per_hour for d in devs))


def group_instance(inst: "Instance", groups: list[tuple[int, ...]]) -> "Instance":
    """The instance whose devices are ``groups`` (rows of ``inst``'s GPUs, each of the
    same size t): links of t streams, the host stack's share of a message 1/t, the
    device limit counted in groups. A group's i-th GPU talks to the i-th of another."""
    t = len(groups[0])
    idx = np.array(groups, dtype=np.int64).reshape(len(groups), t)
    a = inst.arrays
    alpha = np.zeros((len(groups), len(groups)))
    inv = np.zeros_like(alpha)
    for i in range(t):
        pick = np.ix_(idx[:, i], idx[:, i])
        alpha = np.maximum(alpha, inst.alpha[pick])
        inv = np.maximum(inv, a.inv_beta[pick])      # NIC shares and capacities folded in already
    with np.errstate(divide="ignore"):
        beta = np.where(inv > 0, t / np.where(inv > 0, inv, 1.0), np.inf)
    np.fill_diagonal(alpha, 0.0)
    np.fill_diagonal(beta, np.inf)
    egress = inst.egress_usd_per_byte
    o = inst.options
    opts = replace(o, stack_s_per_byte=o.stack_s_per_byte / t, tensor_parallel=(1,),
                   max_devices=None if o.max_devices is None else o.max_devices // t)
    return replace(inst, name=f"{inst.name} (TP {t})", devices=[group_device(inst, g) for g in groups],
                   alpha=alpha, beta=beta, options=opts, physical=inst, groups=tuple(map(tuple, groups)), tp=t,
                   egress_usd_per_byte=None if egress is None else egress[idx[:, 0][:, None], idx[:, 0][None, :]],
                   _cache={})


def aligned_groups(inst: "Instance", t: int) -> list[tuple[int, ...]]:
    """Every node's GPUs of each type in consecutive blocks of t, in the listed order
    (the GPUs of a node past the last whole block are left out): the groups the
    solvers choose from at degree t (GPUs of one type on one node are alike, so
    which t of them form a group does not change a cost, model.md §14)."""
    by: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(inst.devices):
        by.setdefault((d.node, d.type), []).append(i)
    return [tuple(rows[s:s + t]) for rows in by.values() for s in range(0, len(rows) - t + 1, t)]


def largest_group(inst: "Instance") -> int:
    """The most GPUs of one type on one node (the largest degree possible)."""
    count: dict[tuple[str, str], int] = {}
    for d in inst.devices:
        count[(d.node, d.type)] = count.get((d.node, d.type), 0) + 1
    return max(count.values())


def degrees(inst: "Instance") -> tuple[int, ...]:
    """The degrees the solvers search (1 alone: no tensor parallelism)."""
    return inst.options.tensor_parallel


def at_degree(inst: "Instance", t: int) -> "Instance":
    """The instance of the aligned groups of degree t (``inst`` itself at t = 1)."""
    if t == 1:
        return inst if inst.options.tensor_parallel == (1,) else replace(
            inst, options=replace(inst.options, tensor_parallel=(1,)), _cache={})
    cache = inst._cache.setdefault("tp", {})
    if t not in cache:
        cache[t] = group_instance(inst, aligned_groups(inst, t))
    return cache[t]
