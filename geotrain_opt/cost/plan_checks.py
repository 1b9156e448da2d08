"""Whether a plan is a plan of the instance at all (formulations/model.md §2, §8 item 4),
and the instance as the plan runs it (§11): shared by the evaluators, the simulator,
the exports and warm starts."""
from __future__ import annotations

from geotrain_opt.errors import PlanError
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan, slot_id


def plan_errors(inst: Instance, plan: Plan) -> list[str]:
    """What makes ``plan`` not a plan of ``inst`` at all (formulations/model.md §2):
    unknown or repeated devices, cuts that are not 0 = c_0 < ... < c_P = L, a split
    that is not positive integers summing to M (equal ones under a uniform split)."""
    errors: list[str] = []
    L, M = inst.model.layers, inst.model.num_micro_batches
    unknown = [g for g in plan.devices if g not in inst.index]
    if unknown:
        errors.append(f"grid: unknown device id {unknown[0]!r}")
    else:
        errors += group_errors(inst, plan)
    seen: set[str] = set()
    dup = sorted({g for g in plan.devices if g in seen or seen.add(g)})
    if dup:
        errors.append(f"grid: device(s) used twice: {', '.join(dup[:5])}{' ...' if len(dup) > 5 else ''}")
    c = plan.cuts
    if c[0] != 0 or c[-1] != L or any(c[j + 1] <= c[j] for j in range(len(c) - 1)):
        errors.append(f"cuts: need 0 = c_0 < c_1 < ... < c_P = {L}, got {list(c)[:12]}")
    mk = plan.micro_batches
    if any(x < 1 for x in mk):
        errors.append(f"micro_batches: need positive integers, got {list(mk)[:12]}")
    elif sum(mk) != M:
        errors.append(f"micro_batches: need positive integers summing to M = {M}, got {list(mk)[:12]}")
    elif inst.options.batch_split == "uniform" and len(set(mk)) > 1:
        errors.append(f"micro_batches: batch_split is uniform, every replica needs M/D = {M / len(mk):g}")
    used = set(plan.devices)
    grouped = {d for grp in plan.groups for d in grp}
    for g, f in plan.clocks:
        if g in grouped:
            errors.append(f"clocks: device {g!r} is in a tensor-parallel group, which runs at its full clock")
        elif g not in used:
            errors.append(f"clocks: device {g!r} is not in the grid")
        elif g in inst.index:
            fracs = [lv[0] for lv in inst.devices[inst.index[g]].levels]
            if f not in fracs:
                errors.append(f"clocks: device {g!r} has no clock {f:g} (its clocks: {', '.join(f'{x:g}' for x in fracs)})")
    return errors


def group_errors(inst: Instance, plan: Plan) -> list[str]:
    """What makes a plan's tensor-parallel groups not groups (model.md §14): GPUs of
    one type on one node, each GPU once."""
    errors = []
    for grp in plan.groups:
        devs = [inst.devices[inst.index[d]] for d in grp]
        if len({d.node for d in devs}) > 1 or len({d.type for d in devs}) > 1:
            errors.append(f"grid: tensor-parallel group {list(grp)} must be GPUs of one type on one node")
            break
        if len(set(grp)) < len(grp):
            errors.append(f"grid: tensor-parallel group {list(grp)} names a GPU twice")
            break
    return errors


def check_plan(inst: Instance, plan: Plan, what: str = "plan", costable: bool = False) -> list[str]:
    """Raise one PlanError naming the structural faults (shared by evaluate,
    simulate and warm starts). With ``costable`` only the faults that leave no
    cost to compute (unknown devices, cuts) raise, and the rest (a repeated
    device, a wrong split) are returned for ``evaluate`` to report as infeasible."""
    inst = plan_instance(inst, plan)
    errors = plan_errors(inst, plan)
    # a replica without a positive micro-batch count has no time to report (negative
    # times and energies), so that is a fault like bad cuts, not an infeasible plan
    fatal = ("cuts", "grid: unknown", "grid: tensor", "clocks",
             "micro_batches: need positive integers, got")
    rest_ok = [e for e in errors if not e.startswith(fatal)] if costable else []
    errors = [e for e in errors if e not in rest_ok]
    if errors:
        field, _, msg = errors[0].partition(": ")
        rest = "; ".join(errors[1:])
        raise PlanError(field if what == "plan" else f"{what}.{field}", msg + (f"; {rest}" if rest else ""))
    return rest_ok


def plan_instance(inst: Instance, plan: Plan) -> Instance:
    """The instance as the plan runs it: its micro-batch size and recomputation (§11)
    fixed; the instance itself when the plan and the model choose nothing."""
    if inst.has_choices or plan.micro_batch is not None or plan.recompute is not None:
        return inst.variant(plan.micro_batch, plan.recompute)
    return inst


def resolve(inst: Instance, plan: Plan) -> tuple[Instance, Plan]:
    """The instance and plan as costed: the plan's choice (§11), and where it has
    tensor-parallel groups (§14) the instance of its groups with each slot named by its
    group's id. Checked plans only (``check_plan``)."""
    inst = plan_instance(inst, plan)
    if not plan.groups:
        return inst, plan
    from dataclasses import replace

    from geotrain_opt.problem.instance.tensor import group_instance
    slots = [(g,) if isinstance(g, str) else g for row in plan.grid for g in row]
    key = tuple(sorted(set(slots)))
    cache = inst._cache.setdefault("tp_plans", {})
    if key not in cache:
        if len(cache) >= 64:
            cache.clear()          # verify and bench cost many plans: keep the last few
        cache[key] = group_instance(inst, [tuple(inst.index[d] for d in g) for g in key])
    return cache[key], replace(plan, grid=tuple(tuple(slot_id(g) for g in row) for row in plan.grid))
