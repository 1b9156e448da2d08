"""Plans a training framework runs (issue 40): ``solve --exportable megatron``.

What each framework takes of a plan (the checks of ``io/export_plan.py``):

- **torch** (``torch.distributed.pipelining``): any plan of one tensor-parallel degree;
- **deepspeed**: also the same number of micro-batches in every replica (one
  ``gradient_accumulation_steps``), and ZeRO stage 1 at most with pipelines;
- **megatron**: also even inner stages (the first and last may differ:
  ``--decoder-first/last-pipeline-num-layers``).

The solver's plan is *projected* onto that set: its grid and degree kept, the batch
split made equal, and (Megatron-LM) the best of every cut vector Megatron can run, each
evaluated by the reference evaluator; the constructive heuristics' grids over a spread
of shapes, each with every such cut vector, compete with it (the solver's grid may
admit none: its stages needed uneven cuts to fit). That is not a search restricted to
the set, so a changed plan is a heuristic result; its cost against the unrestricted
plan, and the lower bound (valid for the restricted problem too), are reported.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult, Status

FRAMEWORKS = ("megatron", "deepspeed", "torch")


def megatron_cuts(L: int, P: int) -> list[tuple[int, ...]]:
    """Every cut vector Megatron-LM runs: P - 2 inner stages of u layers, first and
    last stages of any size a, c >= 1 (P <= 2: any cuts)."""
    if P == 1:
        return [(0, L)]
    if P == 2:
        return [(0, a, L) for a in range(1, L)]
    out = []
    for u in range(1, (L - 2) // (P - 2) + 1):
        for a in range(1, L - (P - 2) * u):
            out.append((0, *(a + i * u for i in range(P - 1)), L))
    return out


def refusal(inst: Instance, plan: Plan, framework: str) -> str | None:
    """Why ``framework`` cannot run ``plan`` (None: it can)."""
    if len({len(g) if not isinstance(g, str) else 1 for row in plan.grid for g in row}) > 1:
        return "its slots differ in tensor-parallel degree"
    if framework == "torch":
        return None
    if inst.options.zero_stage > 1 and plan.stages > 1 and framework == "deepspeed":
        return "DeepSpeed's pipeline engine runs ZeRO stage 1 at most"
    if len(set(plan.micro_batches)) > 1:
        return "its replicas run different numbers of micro-batches"
    sizes = [b - a for a, b in zip(plan.cuts, plan.cuts[1:])]
    if framework == "megatron" and len(set(sizes[1:-1])) > 1:
        return f"its inner stages differ in layers ({sizes})"
    return None


def project(inst: Instance, plan: Plan, framework: str) -> tuple[Plan | None, str | None]:
    """The best plan ``framework`` runs with ``plan``'s grid (and why none, if none)."""
    why = refusal(inst, plan, framework)
    if why is None:
        return plan, None
    if why.startswith(("its slots", "DeepSpeed")):
        return None, why
    M, D = sum(plan.micro_batches), plan.replicas
    if M % D:
        return None, f"{M} micro-batches do not split evenly over {D} replicas"
    mb = tuple([M // D] * D)
    cuts = [tuple(plan.cuts)] if framework != "megatron" else megatron_cuts(inst.model.layers, plan.stages)
    best, best_key = None, None
    for c in cuts:
        cand = replace(plan, cuts=tuple(c), micro_batches=mb)
        ev = evaluate(inst, cand)
        if ev.acceptable:
            k = tuple(float(v) for v in objmod.of(inst.objective, ev))
            if best_key is None or k < best_key:
                best, best_key = cand, k
    return best, None if best is not None else f"no {framework} plan on this grid fits or meets the limits"


def constructed(inst: Instance, framework: str, until: float) -> Plan | None:
    """The best plan ``framework`` runs among the constructive heuristics' grids over a
    spread of shapes, at every uniform tensor-parallel degree, each grid with every cut
    vector the framework takes (Megatron-LM) in one batched evaluation: where the
    solver's grid admits none (its stages need uneven cuts to fit), another grid may."""
    import time

    import numpy as np

    from geotrain_opt.construct.heuristics import CONSTRUCTORS, seed_shapes
    from geotrain_opt.cost.evaluator import BatchEvaluator
    from geotrain_opt.decisions.tensor import at_degrees, ungroup
    best, best_key = None, None
    for t, at in (at_degrees(inst) or [(1, inst)]):
        if not isinstance(t, int):
            continue                              # per-type degrees: no framework runs them
        ev, L, M = BatchEvaluator(at), at.model.layers, at.model.num_micro_batches
        for D, P in seed_shapes(at, limit=30):
            if framework != "torch" and M % D:
                continue
            for build in CONSTRUCTORS.values():
                if time.perf_counter() > until:
                    return best
                grid, cuts, _ = build(at, D, P)
                cand = np.array(megatron_cuts(L, P) if framework == "megatron" else [cuts], dtype=np.int64)
                k = len(cand)
                r = ev(np.repeat(np.asarray(grid)[None], k, 0), cand, np.full((k, D), M // D, dtype=np.int64))
                keys = objmod.of(at.objective, r)
                for i in np.flatnonzero(r.acceptable):
                    key = (float(keys[0][i]), float(keys[1][i]))
                    if best_key is None or key < best_key:
                        best_key = key
                        best = ungroup(at, Plan.from_indices(at.ids, grid, cand[i], [M // D] * D))
    return best


def restrict(inst: Instance, res: SolverResult, framework: str, until: float) -> SolverResult:
    """``res`` with its plan projected onto what ``framework`` runs, or the best plan it
    runs among the constructive grids (``constructed``, until ``until``) where that is
    better; the plan found without the restriction, and what the restriction costs,
    in ``stats["exportable"]``."""
    if framework not in FRAMEWORKS:
        from geotrain_opt.errors import SolverError
        raise SolverError(f"--exportable: one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    if res.plan is None:
        return res
    plan, why = project(inst, res.plan, framework)
    if plan != res.plan:
        other = constructed(inst, framework, until)
        if other is not None and (plan is None or objmod.of(inst.objective, evaluate(inst, other))
                                  < objmod.of(inst.objective, evaluate(inst, plan))):
            plan, why = other, None
        elif plan is None:
            why = f"{why}, nor on the constructive heuristics' grids"
    info: dict[str, Any] = {"framework": framework, "unrestricted_plan": res.plan.to_dict(),
                            "unrestricted_value": res.objective_value, "changed": plan != res.plan}
    stats = {**res.stats, "exportable": info}
    if plan is None:
        info["reason"] = why
        return replace(res, plan=None, evaluation=None, objective_value=None, status=Status.UNKNOWN, stats=stats)
    if plan == res.plan:
        return replace(res, stats=stats)
    ev = evaluate(inst, plan)
    value = float(objmod.of(inst.objective, ev)[0])
    info["cost"] = value / res.objective_value - 1 if res.objective_value else None
    return replace(res, plan=plan, evaluation=ev, objective_value=value, stats=stats,
                   status=Status.HEURISTIC if res.status == Status.OPTIMAL else res.status)
