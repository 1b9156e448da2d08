"""Constructive pieces shared by describe, the solvers' seeding and the baselines."""
from __future__ import annotations

import math

import numpy as np

from geotrain_opt.cost import stagecost as sc
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.problem.plan import split_micro_batches  # noqa: F401  (the even split, used here and re-exported)


def stage_memory(inst: Instance, P: int, j: int, lo: int, hi: int, m: int, D: int, scale: float = 1.0) -> float:
    """Bytes a device needs to hold stage ``j`` = layers [lo, hi) of a P-stage
    pipeline of D replicas whose replica runs ``m`` micro-batches (``scale``: the
    device's activation scale, §14)."""
    a = inst.arrays
    _S, q = sc.flushes(a, max(int(m), 1))
    return sc.stage_memory_of(a, P, j, lo, hi, int(q), D, scale)


def greedy_memory_cuts(inst: Instance, caps: list[float], m: int, D: int,
                       scales: list[float] | None = None) -> list[int] | None:
    """Cut vector under which stage j fits in ``caps[j]``, or None.

    Each stage takes as many layers as fit; since memory grows with a stage's
    layers, taking more early never hurts later stages, so this finds a feasible
    cut vector whenever one exists for these capacities.
    """
    P, L = len(caps), inst.model.layers
    sc_ = scales or [1.0] * P           # each stage's largest activation scale (§14)
    cuts, lo = [0], 0
    for j in range(P - 1):
        hi = lo
        while hi + 1 <= L - (P - 1 - j) and stage_memory(inst, P, j, lo, hi + 1, m, D, sc_[j]) <= caps[j]:
            hi += 1
        if hi == lo:
            return None
        cuts.append(hi)
        lo = hi
    if stage_memory(inst, P, P - 1, lo, L, m, D, sc_[-1]) > caps[-1]:
        return None
    cuts.append(L)
    return cuts


def uniform_cuts(L: int, P: int) -> list[int]:
    return [round(j * L / P) for j in range(P + 1)]


def even_last_cuts(L: int, P: int) -> np.ndarray:
    """Sailor's even split (``get_stages``): L // P layers a stage, one more on each of
    the last L mod P stages (``[0, 3, 6, 10, 14]`` for 14 layers on 4 stages): the
    early stages hold the most in-flight activations under 1F1B."""
    size = [L // P + (j >= P - L % P) for j in range(P)]
    return np.concatenate([[0], np.cumsum(size)]).astype(np.int64)


def shape_ok(inst: Instance, D: int, P: int) -> bool:
    """Can plans of shape (D, P) exist at all (devices, layers, micro-batches, split)?"""
    n = inst.n if inst.slot_limit is None else min(inst.n, inst.slot_limit)
    M = inst.model.num_micro_batches
    if D < 1 or P < 1 or D * P > n or P > inst.model.layers or D > M:
        return False
    return inst.options.batch_split == "free" or M % D == 0


def feasible_shapes(inst: Instance, max_devices: int | None = None) -> list[tuple[int, int]]:
    """All (D, P) a plan may take: D*P <= devices, P <= layers, D admissible for the split."""
    n = inst.n if max_devices is None else min(inst.n, max_devices)
    if inst.slot_limit is not None:          # GPUs over the group size (model.md §14)
        n = min(n, inst.slot_limit)
    M, L = inst.model.num_micro_batches, inst.model.layers
    out = []
    for D in range(1, n + 1):
        if D > M or (inst.options.batch_split == "uniform" and M % D):
            continue
        for P in range(1, min(L, n // D) + 1):
            out.append((D, P))
    return out


def smallest_feasible_plan(inst: Instance) -> Plan | None:
    """A memory-feasible plan on as few devices as the greedy check finds.

    Largest-memory devices first; stage j gets D devices and the capacity of the
    smallest of them. Tried in order of D*P, so the result bounds from above the
    fewest devices any plan needs.
    """
    a = inst.arrays
    order = list(np.argsort(-a.mem_cap, kind="stable"))
    ev = BatchEvaluator(inst)
    for D, P in sorted(feasible_shapes(inst), key=lambda s: (s[0] * s[1], s[0])):
        mbs = split_micro_batches(inst.model.num_micro_batches, D)
        chosen = order[: D * P]
        groups = [chosen[j * D:(j + 1) * D] for j in range(P)]
        for arrangement in (groups, groups[1:] + groups[:1], groups[::-1]):
            caps = [float(min(a.mem_cap[g] for g in grp)) for grp in arrangement]
            cuts = greedy_memory_cuts(inst, caps, max(mbs), D)
            if cuts is None:
                continue
            grid = np.array([[arrangement[j][k] for j in range(P)] for k in range(D)])
            res = ev(grid[None], np.array([cuts]), np.array([mbs]))
            if res.feasible[0]:
                return Plan.from_indices(inst.ids, grid, cuts, mbs)
    return None


def plan_count(inst: Instance) -> int:
    """How many plans brute force would evaluate (every shape, device arrangement up to
    ring rotation, cut and split): generators size their instances with it."""
    total = 0
    n, L, M = inst.n, inst.model.layers, inst.model.num_micro_batches
    free = inst.options.batch_split == "free"
    # with clocks (§10) every slot may take each of the most levels a device has: an upper
    # bound on the arrangements, which is what brute force walks (it skips the invalid ones)
    levels = max(len(d.levels) for d in inst.devices)
    for D, P in feasible_shapes(inst):
        s = math.comb(M - 1, D - 1) if free else 1
        total += math.perm(n, D * P) // D * math.comb(L - 1, P - 1) * s * levels ** (D * P)
    return total
