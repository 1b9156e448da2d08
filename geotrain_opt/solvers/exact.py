"""The driver both model-based exact solvers share: enumerate (D, P), solve, prove.

(D, P) is enumerated outside the model (formulations/exact.md §4): each shape's
model is small and tight, and the best plan so far becomes a cutoff for the next
shape, so most shapes are proven useless in a fraction of a second. The optimum
over all shapes is optimal for the instance; the reported bound is the smallest
bound over the shapes left open.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import objective as objmod
from ..construct import feasible_shapes, smallest_feasible_plan
from ..evaluator import evaluate
from ..instance import Instance
from ..plan import Plan
from ..result import SolverResult
from . import formulation
from .base import Deadline, Incumbent, SolveOptions, finish

# The CP-SAT model counts time in units of T_ref * 2^-RES_BITS (likewise energy);
# formulations/exact.md §5 bounds the resulting rounding error.
RES_BITS = 32


class ShapeOutcome:
    def __init__(self, status: str, plan: Plan | None, bound: float | None) -> None:
        self.status, self.plan, self.bound = status, plan, bound


# A back end runs one model: (inst, D, P, kwargs for formulation.build, seconds, opts, hint)
Runner = Callable[..., ShapeOutcome]


def rounding_error_units(inst: Instance, P: int) -> int:
    """Upper bound, in model units, on how far the integer model over-estimates T."""
    L, M = inst.model.layers, inst.model.num_micro_batches
    return (M + 2) * (L + P + 2) + 4 * P


def solve_exact(name: str, inst: Instance, opts: SolveOptions, run: Runner) -> SolverResult:
    deadline = Deadline(opts.time_limit_s)
    inc = Incumbent(inst)
    start_plans = [p for p in (opts.hint, smallest_feasible_plan(inst)) if p is not None]
    for p in start_plans:
        ev = evaluate(inst, p)
        if ev.acceptable:
            inc.offer(p, ev.time_s, ev.energy_j)
    ref = evaluate(inst, start_plans[-1]) if start_plans else None
    T_ref = ref.time_s if ref else 1.0
    E_ref = ref.energy_j if ref else 1000.0
    units = dict(t_unit=T_ref * 2.0 ** -RES_BITS, e_unit=E_ref * 2.0 ** -RES_BITS)
    obj = inst.objective
    shapes = feasible_shapes(inst)
    status = "optimal"
    open_bounds: list[float] = []
    shape_values: dict[tuple[int, int], float] = {}
    log = []
    for D, P in shapes:
        if deadline.expired:
            status = "time_limit"
            open_bounds.append(float("-inf"))
            continue
        cutoff = inc.key[0] * (1 + 1e-9) if inc.key else None
        out = run(inst, D, P, dict(units, cutoff=cutoff), deadline.remaining, opts, inc.plan)
        log.append({"D": D, "P": P, "status": out.status})
        if out.plan is not None:
            ev = evaluate(inst, out.plan)
            if ev.acceptable:
                inc.offer(out.plan, ev.time_s, ev.energy_j)
                shape_values[(D, P)] = float(objmod.primary(obj, ev.time_s, ev.energy_j))
        if out.status in ("feasible", "unknown"):
            status = "time_limit"
            open_bounds.append(out.bound if out.bound is not None else float("-inf"))
    # Tie-break (time: least E among fastest plans; energy: least T among cheapest).
    if inc.key and obj.kind in ("time", "energy") and status == "optimal":
        tie_kind = "energy" if obj.kind == "time" else "time"
        for (D, P), v in shape_values.items():
            if deadline.expired or v > inc.key[0] * (1 + 1e-6):
                continue
            cap = dict(units, objective=tie_kind)
            if obj.kind == "time":
                cap["time_cap"] = inc.key[0] * (1 + 1e-7)
            else:
                cap["energy_cap"] = inc.key[0] * (1 + 1e-7)
            out = run(inst, D, P, cap, deadline.remaining, opts, inc.plan)
            if out.plan is not None:
                ev = evaluate(inst, out.plan)
                if ev.acceptable:
                    inc.offer(out.plan, ev.time_s, ev.energy_j)
    if inc.plan is None:
        status = "infeasible" if status == "optimal" else "unknown"
    value = inc.key[0] if inc.key else None
    if status == "optimal":
        bound = value
    else:
        bound = min(open_bounds + ([value] if value is not None else [])) if open_bounds else None
        if bound is not None and bound == float("-inf"):
            bound = None
    return finish(name, inst, opts, inc.plan, status, deadline, best_bound=bound,
                  stats={"shapes": len(shapes), "shape_log": log})


def run_model(make_backend: Callable[[], Any], inst: Instance, D: int, P: int, kw: dict) -> tuple[Any, formulation.Shape]:
    kw = dict(kw)
    energy_cap = kw.pop("energy_cap", None)
    src = inst
    if energy_cap is not None:
        src = inst.with_options(max_energy_j=min(energy_cap, inst.objective.max_energy_j or energy_cap))
    be = make_backend()
    shape = formulation.build(src, D, P, be, **kw)
    return be, shape
