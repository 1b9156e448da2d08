"""The tensor-parallel degree (formulations/model.md §14) as a decision: a plan's
slots are single GPUs or groups of t GPUs of one type on one node. Each case (a
degree for every GPU type, or each type at its own) is a whole instance of its own (the instance of its aligned
groups, ``problem/instance/tensor.py``), so it is enumerated outside every solver
(``solvers/choices.py``, ``over_degrees``) and outside the bounds, as (D, P) is
outside the exact model: a degree changes every stage's speed, memory and links.
The plans a solver returns at degree t name groups by their instance ids; these
helpers translate between that and the plan file's lists of GPUs."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance
    from geotrain_opt.problem.plan import Plan


def at_degrees(inst: "Instance") -> list[tuple["int | dict[str, int]", "Instance"]]:
    """Every degree (or per-type degrees) the instance lets the solvers search at
    which some group exists and the device limit allows one, with the instance of
    its groups; fewest units first: they solve sooner, and a solver's time left
    passes on to the cases of many small units, which need it most."""
    from geotrain_opt.problem.instance import tensor
    out = []
    for t in tensor.cases(inst):
        if not tensor.aligned_groups(inst, t):
            continue
        at = tensor.at_degree(inst, t)
        if at.slot_limit is None or at.slot_limit >= 1:
            out.append((t, at))
    return sorted(out, key=lambda c: c[1].n)


def members(inst: "Instance") -> dict[str, tuple[str, ...]]:
    """A group instance's device id -> its GPUs' ids."""
    phys = inst.physical
    return {d.id: tuple(phys.ids[i] for i in g) for d, g in zip(inst.devices, inst.groups)}


def ungroup(inst: "Instance", plan: "Plan | None") -> "Plan | None":
    """A plan of group instance ``inst`` as a plan of its GPUs (slots as groups);
    itself where ``inst`` is not a group instance."""
    if plan is None or inst.physical is None:
        return plan
    names = {k: v if len(v) > 1 else v[0] for k, v in members(inst).items()}
    return replace(plan, grid=tuple(tuple(names[g] for g in row) for row in plan.grid))


def as_groups(inst: "Instance", plan: "Plan | None") -> "Plan | None":
    """A plan of the GPUs as a plan of group instance ``inst`` (a hint at its degree),
    or None where its slots are not ``inst``'s groups."""
    if plan is None:
        return None
    if inst.physical is None:
        return plan if not plan.groups else None
    ids = {v: k for k, v in members(inst).items()}
    slots = [(g,) if isinstance(g, str) else g for row in plan.grid for g in row]
    if any(g not in ids for g in slots):
        return None
    return replace(plan, grid=tuple(tuple(ids[(g,) if isinstance(g, str) else g] for g in row) for row in plan.grid))
