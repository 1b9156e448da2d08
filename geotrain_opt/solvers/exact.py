"""The driver both model-based exact solvers share: enumerate (D, P), solve, prove.

(D, P) is enumerated outside the model (formulations/exact.md §4): each shape's
model is small and tight, and the best plan so far becomes a cutoff for the next
shape, so most shapes are proven useless in a fraction of a second. The optimum
over all shapes is optimal for the instance; the reported bound is the smallest
bound over the shapes left open.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from .. import objective as objmod
from ..bounds import shape_bounds
from ..construct import feasible_shapes, smallest_feasible_plan
from ..evaluator import BatchEvaluator, evaluate
from ..tariffs import priced_floors
from ..instance import Instance
from ..plan import Plan
from ..result import SolverResult
from . import class_grid, formulation
from .base import Deadline, Incumbent, SolveOptions, finish
from .choices import tag

# The CP-SAT model counts time in units of T_ref * 2^-RES_BITS (likewise energy):
# with activities below 2^40 this balances the resolution of a time (2^-20) against
# that of a product of a time and a coefficient (formulations/exact.md §5).
RES_BITS = 20
# Constructive plans that set the exact solvers' warm start, units and shape order.
# Deliberately not every constructor: with the site-structured ones added, the
# incumbent's units and the shape order changed and HiGHS stalled on one shape of
# the 10- and 12-GPU scaling instances (8 s -> 120 s, measured); these three are
# the measured configuration of formulations/exact.md §6.
EXACT_SEEDS = ("fastest-first", "region-packed", "memory-aware")
# Share of an open shape's time slice for the class-grid relaxation (CP-SAT only,
# formulations/exact.md §9); the shape's own model gets the rest.
GRID_SHARE = 0.75


class ShapeOutcome:
    def __init__(self, status: str, plan: Plan | None, bound: float | None) -> None:
        self.status, self.plan, self.bound = status, plan, bound


# A back end runs one model: (inst, D, P, formulation.BuildSpec, seconds, opts, hint)
Runner = Callable[..., ShapeOutcome]


def lower_bound(inst: Instance) -> float:
    """A bound on the primary objective of every plan, for shapes never reached.

    Every selected device is busy at most T (T_k >= m_k t_kj), and the busy
    time weighted by speed adds up to M * W_total, so T >= M W / sum(speeds);
    likewise E >= busy energy >= min_g(P_busy/speed) * M W."""
    a = inst.arrays
    work = a.M * float(a.w_prefix[-1] + a.head_work)
    T_lb = work / float(a.speed.sum())
    E_lb = work * float((a.clock_busy / (a.clock_frac * a.speed[:, None])).min())     # any clock (§10)
    return float(objmod.primary(inst.objective, T_lb, E_lb, *priced_floors(inst, work, T_lb, 1)))



def reference_units(ref: Any, **spec: Any) -> formulation.BuildSpec:
    """Units of a model from a reference plan's evaluation (None: none known): one
    unit of each quantity is 2^-RES_BITS of the plan's (formulations/exact.md §5)."""
    def ref_of(value: float | None, default: float) -> float:
        return value if value is not None and value > 0 else default
    T_ref = ref_of(ref.time_s if ref else None, 1.0)
    E_ref = ref_of(ref.energy_j if ref else None, 1000.0)
    C_ref = ref_of(ref.cost_usd if ref else None, 1.0)
    Q_ref = ref_of(ref.carbon_g if ref else None, 1.0)
    r = 2.0 ** -RES_BITS
    return formulation.BuildSpec(t_unit=T_ref * r, e_unit=E_ref * r, c_unit=C_ref * r, q_unit=Q_ref * r, **spec)


def model_kind(inst: Instance, kind: str = "auto") -> str:
    """"devices" (x per device) or "classes" (x per class of interchangeable devices,
    formulations/exact.md §3.7); "auto" takes the class model where it has fewer
    units than devices."""
    if kind == "auto":
        kind = "classes" if len(formulation.device_classes(inst)) < inst.n else "devices"
    return kind


def _constructive(inst: Instance, shapes, deadline: Deadline) -> tuple[dict, list[tuple[float, Plan]]]:
    """Best constructive plan per shape: warm start, cutoff, and the order of shapes.
    Evaluated in batches, and on at most a fifth of the time limit."""
    from ..heuristics import CONSTRUCTORS
    ev = BatchEvaluator(inst)
    best: dict[tuple[int, int], float] = {}
    plans = []
    share = 0.2 * deadline.seconds
    for D, P in shapes:
        if deadline.elapsed > share:
            break
        built = [CONSTRUCTORS[name](inst, D, P) for name in EXACT_SEEDS]
        res = ev(np.stack([b[0] for b in built]), np.stack([b[1] for b in built]), np.stack([b[2] for b in built]))
        for i, (grid, cuts, mb) in enumerate(built):
            if res.acceptable[i]:
                v = float(objmod.of(inst.objective, res)[0][i])
                best[(D, P)] = min(best.get((D, P), float("inf")), v)
                plans.append((v, Plan.from_indices(inst.ids, grid, cuts, mb)))
    return best, plans


def _polished(inst: Instance, shapes, deadline: Deadline, share: float) -> list[tuple[float, tuple[int, int], Plan]]:
    """Every constructor's plan of each shape (promising shapes first), its cuts
    hill-climbed (heuristics.polish_cuts), on at most ``share`` of the time limit.
    A better incumbent closes more shapes by their bound: on DT-FM Case 2 the
    node-mixed plan with polished cuts reaches its shape's bound (exact.md §8);
    with the layouts by site (``site_plans``: a ring per site, stages of close
    sites paired, and a replica per site) Case 5's and 5-2's incumbents start at
    30.8735 s and 31.2459 s (the class grid then finds the optima, 30.7864 s and
    31.2140 s).
    Only the incumbent takes them: units and shape order stay those of EXACT_SEEDS."""
    from ..heuristics import CONSTRUCTORS, polish_cuts
    from ..site_layouts import site_plans
    out = []
    end = deadline.elapsed + share * deadline.seconds
    for D, P in shapes:
        ev = BatchEvaluator(inst)
        for build in CONSTRUCTORS.values():
            if deadline.elapsed > end:
                return out
            grid, cuts, mb = build(inst, D, P)
            cuts, v = polish_cuts(inst, ev, grid, cuts, mb)
            if v < float("inf"):
                out.append((v, (D, P), Plan.from_indices(inst.ids, grid, cuts, mb)))
    for v, i, (grid, cuts, mb) in site_plans([(inst, D, P) for D, P in shapes], stop=lambda: deadline.elapsed > end):
        if v < float("inf"):
            out.append((v, shapes[i], Plan.from_indices(inst.ids, grid, cuts, mb)))
    return out


def _run_bounded(run: Runner, inst: Instance, D: int, P: int, spec: formulation.BuildSpec, seconds: float,
                 opts: SolveOptions, hint: Plan | None) -> ShapeOutcome:
    """One model run whose building, too, ends with its slice of time: at
    thousands of devices the model alone would take minutes to state."""
    end = time.perf_counter() + seconds
    try:
        return run(inst, D, P, spec.but(stop=lambda: time.perf_counter() > end), seconds, opts, hint)
    except formulation.BuildTimeout:
        return ShapeOutcome("unknown", None, None)


def solve_exact(name: str, inst: Instance, opts: SolveOptions, run: Runner) -> SolverResult:
    from . import spec      # the engine's own options class (CpsatOptions, MilpOptions): checked here
    options = spec(name).options.parse(name, opts.extra)
    if inst.has_choices and options.choice_search == "separate":
        # one whole solve per (micro_batch, recompute) on a share of the time (to compare)
        from .choices import over_choices
        return over_choices(lambda v, o: solve_exact(name, v, o, run))(inst, opts)
    deadline = Deadline(opts.time_limit_s)
    inc = Incumbent(inst)
    # The micro-batch size and recomputation (§11) are enumerated with the shapes: a
    # "shape" is (c, D, P) for choice c of the model (0 only, its own, where it offers
    # none), each a model of the instance at that choice, and one incumbent's cutoff
    # prunes the shapes of every choice (formulations/exact.md §4).
    chosen = inst.model.choices() if inst.has_choices else [(inst.model.micro_batch, inst.model.recompute)]
    at = [inst.variant(b, r) if inst.has_choices else inst for b, r in chosen]

    def tagged(c: int, plan: Plan | None) -> Plan | None:
        return tag(inst, plan, *chosen[c]) if inst.has_choices else plan

    def own(c: int, plan: Plan | None) -> Plan | None:
        """``plan`` as a plan of choice c's instance (a hint), if it is at that choice."""
        if plan is None or not inst.has_choices:
            return plan
        m = inst.model
        if (plan.micro_batch or m.micro_batch, plan.recompute or m.recompute) != chosen[c]:
            return None
        return replace(plan, micro_batch=None, recompute=None)

    def where(c: int) -> dict:
        return {"micro_batch": chosen[c][0], "recompute": chosen[c][1]} if inst.has_choices else {}

    shapes = [(c, D, P) for c, v in enumerate(at) for D, P in feasible_shapes(v)]
    # shapes whose bound already rules out every plan (memory, an ε-limit) need no model
    sbound = {}

    def late() -> bool:
        # on at most a quarter of the time limit: past it, shapes keep the trivial bound 0
        return deadline.elapsed > 0.25 * deadline.seconds
    for c, v in enumerate(at):
        mine = [sh[1:] for sh in shapes if sh[0] == c]
        sbound.update({(c, *sh): b for sh, b in shape_bounds(v, mine, stop=late).items()})
    floors = [lower_bound(v) for v in at]
    log = [{**where(c), "D": D, "P": P, "status": "closed", "by": b.by, "bound": None, "seconds": 0.0}
           for (c, D, P), b in sbound.items() if b.value == float("inf")]
    n_shapes = len(shapes)
    shapes = [s for s in shapes if sbound[s].value < float("inf")]
    shape_guess: dict[tuple[int, int, int], float] = {}
    seeds: list[tuple[float, Plan]] = []
    for c, v in enumerate(at):
        guess, built = _constructive(v, [sh[1:] for sh in shapes if sh[0] == c], deadline)
        shape_guess.update({(c, *sh): g for sh, g in guess.items()})
        seeds += [(val, tagged(c, p)) for val, p in built]
    smallest = next((tagged(c, p) for c, v in enumerate(at) if (p := smallest_feasible_plan(v)) is not None), None)
    start_plans = [p for p in (opts.hint, smallest) if p is not None]
    start_plans += [p for _, p in sorted(seeds, key=lambda vp: vp[0])[:1]]
    for p in start_plans:
        ev = evaluate(inst, p)
        if ev.acceptable:
            inc.offer(p, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g)
    ref = evaluate(inst, inc.plan) if inc.plan is not None else (evaluate(inst, start_plans[0]) if start_plans else None)
    model = model_kind(inst, options.exact_model)
    units = reference_units(ref, classes=model == "classes")
    obj = inst.objective
    # promising shapes first: their optima become cutoffs that prune the rest
    shapes.sort(key=lambda s: (shape_guess.get(s, float("inf")), s[1] * s[2], s[0]))
    open_shapes: dict[tuple[int, int, int], float] = {}
    # the best plan found in each shape: where the optimum lies (the tie-break refines
    # those shapes, even when their bound closed them before any model ran)
    shape_values: dict[tuple[int, int, int], float] = {}
    for c, v in enumerate(at):
        for _val, (D, P), p in _polished(v, [sh[1:] for sh in shapes if sh[0] == c], deadline, 0.1 / len(at)):
            p = tagged(c, p)
            ev = evaluate(inst, p)
            if ev.acceptable:
                inc.offer(p, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g)
                val = float(objmod.of(obj, ev)[0])
                shape_values[c, D, P] = min(shape_values.get((c, D, P), val), val)

    grid_on = getattr(options, "class_grid", "off") == "auto"
    if grid_on:
        # the class grid finds plans of a shape as it closes it: the shape of the best
        # plan known first, so that a better plan there is the cutoff of the others
        shapes.sort(key=lambda s: (min(shape_values.get(s, float("inf")), shape_guess.get(s, float("inf"))),
                                   s[1] * s[2], s[0]))
    grid_skip: dict[int, str] = {}                       # choice -> why the class grid does not apply
    grid_bound: dict[tuple[int, int, int], float] = {}

    def shape_floor(sh: tuple[int, int, int]) -> float:
        return max(sbound[sh].value, floors[sh[0]])

    def reached(sh: tuple[int, int, int]) -> bool:
        """The shape's bound is at the incumbent (to 1e-9): none of its plans is better.
        An exact bound (the joint cut of §8 is exact for some plans) closes its shape."""
        return bool(inc.key) and max(sbound[sh].value, grid_bound.get(sh, 0.0)) >= inc.key[0] * (1 - 1e-9)

    def offer(sh: tuple[int, int, int], plan: Plan) -> None:
        plan = tagged(sh[0], plan)
        ev = evaluate(inst, plan)
        if ev.acceptable:
            inc.offer(plan, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g)
            val = float(objmod.of(obj, ev)[0])
            shape_values[sh] = min(shape_values.get(sh, val), val)

    def relaxed(sh: tuple[int, int, int], seconds: float) -> bool:
        """The class-grid relaxation of the shape (formulations/exact.md §9): its plans
        become incumbents, and it closes the shape when no plan of it beats the best."""
        c, D, P = sh
        if not grid_on or not inc.key or grid_skip.get(c) or seconds < 1.0:
            return False
        why = class_grid.not_applicable(at[c], D)
        if why is not None:
            grid_skip[c] = why
            return False
        t0 = time.perf_counter()
        g = class_grid.solve_shape(at[c], D, P, inc.key[0], seconds, opts.workers, opts.seed)
        if g.plan is not None:
            offer(sh, g.plan)
        log.append({**where(c), "D": D, "P": P, "status": g.status, "by": "class grid",
                    "seconds": round(time.perf_counter() - t0, 3), "budget_s": round(seconds, 2),
                    "bound": g.bound, "solutions": g.solutions})
        if opts.progress:
            print(f"{name}: shape {D}x{P}: class grid {g.status} ({g.solutions} relaxed solutions, "
                  f"{deadline.elapsed:.1f} s, best {inc.key[0]:.6g})", file=sys.stderr, flush=True)
        if g.status == "closed":
            open_shapes.pop(sh, None)
            return True
        if g.bound is not None:
            grid_bound[sh] = max(grid_bound.get(sh, 0.0), g.bound)
        return False

    def attempt(sh: tuple[int, int, int], seconds: float) -> None:
        c, D, P = sh
        if reached(sh):
            # its bound reaches the best plan: no plan of it is better, no model needed
            # (formulations/exact.md §8)
            by_grid = grid_bound.get(sh, 0.0) > sbound[sh].value
            log.append({**where(c), "D": D, "P": P, "status": "closed",
                        "by": "class grid" if by_grid else sbound[sh].by,
                        "bound": grid_bound[sh] if by_grid else sbound[sh].value, "seconds": 0.0})
            open_shapes.pop(sh, None)
            return
        t_grid = time.perf_counter()
        if relaxed(sh, GRID_SHARE * seconds):
            return
        seconds = max(0.0, seconds - (time.perf_counter() - t_grid))
        cutoff = inc.key[0] * (1 + 1e-9) if inc.key else None
        t0 = time.perf_counter()
        out = _run_bounded(run, at[c], D, P, units.but(cutoff=cutoff), seconds, opts, own(c, inc.plan))
        log.append({**where(c), "D": D, "P": P, "status": out.status, "seconds": round(time.perf_counter() - t0, 3),
                    "budget_s": round(seconds, 2), "bound": sbound[sh].value})
        if opts.progress:      # one line per shape on stderr: long proofs show where they are
            best = f"{inc.key[0]:.6g}" if inc.key else "-"
            what = "no better plan" if out.status == "infeasible" and cutoff is not None else out.status
            at_c = f" at b={chosen[c][0]}, {chosen[c][1]}" if inst.has_choices else ""
            print(f"{name}: shape {D}x{P}{at_c}: {what} ({len(log)} solved, {deadline.elapsed:.1f} s, best {best})",
                  file=sys.stderr, flush=True)
        if out.plan is not None:
            offer(sh, out.plan)
        if out.status in ("feasible", "unknown"):
            # the model's bound, but never below the shape's own bound (bounds.py) or the
            # class grid's
            floor = max(shape_floor(sh), grid_bound.get(sh, 0.0))
            open_shapes[sh] = max(out.bound, floor) if out.bound is not None else floor
        else:
            open_shapes.pop(sh, None)

    # pass 1: every shape gets a fair slice, so one hard shape cannot starve the others
    for i, sh in enumerate(shapes):
        if deadline.expired:
            open_shapes[sh] = shape_floor(sh)
            continue
        # shared among the shapes that still need a model (those the incumbent has
        # reached close at once)
        need = sum(1 for s in shapes[i:] if not reached(s)) or 1
        slice_s = max(1.0, 2.0 * deadline.remaining / need)
        attempt(sh, min(slice_s, deadline.remaining))
    # pass 2: the remaining time for the shapes still open, best bound first. Shapes
    # the incumbent has overtaken close by their bound at once, so they are dropped
    # before the time is shared out (else their share went unused); a shape that
    # returns early leaves its time to a further round.
    for _round in range(3):
        for sh in [sh for sh in open_shapes if reached(sh)]:
            attempt(sh, 0.0)
        todo = sorted(open_shapes, key=open_shapes.get)
        if not todo or deadline.expired:
            break
        for i, sh in enumerate(todo):
            if deadline.expired:
                break
            if sh in open_shapes:
                attempt(sh, max(1.0, deadline.remaining / (len(todo) - i)))
    # shapes left open before the limit ran out (a model whose rounding ranks many
    # near-equal plans first, §5): "feasible", not a time limit that was not reached
    ran_out = deadline.remaining <= max(0.5, 0.01 * deadline.seconds)
    status = ("time_limit" if ran_out else "feasible") if open_shapes else "optimal"
    # tie-break (time: least E among fastest plans; energy: least T among cheapest).
    # It refines a proven optimum, so it gets at most half the time the proof took
    # (and what is left): a hard secondary problem must not eat the whole budget.
    tie_break = "not needed"
    if inc.key and obj.kind in ("time", "energy", "cost", "carbon") and status == "optimal":
        tie_kind = "energy" if obj.kind == "time" else "time"
        tie_end = deadline.elapsed + max(2.0, 0.5 * deadline.elapsed)
        tie_break = "done"
        for (c, D, P), v in shape_values.items():
            if v > inc.key[0] * (1 + 1e-6):
                continue
            budget = min(deadline.remaining, tie_end - deadline.elapsed)
            if budget <= 0:
                tie_break = "time limit"
                break
            # the cap must admit the optimal plan despite the integer model's over-estimate
            tie_inst = at[c]
            if obj.kind == "time":
                cap = units.but(objective=tie_kind, time_cap=inc.key[0] * (1 + 1e-9))
            elif obj.kind == "energy":
                cap = units.but(objective=tie_kind, energy_cap=inc.key[0] * (1 + 1e-6))
            else:       # dollars or grams capped at the optimum as the instance's own limit
                cap = units.but(objective=tie_kind)
                limit = "max_cost_usd" if obj.kind == "cost" else "max_carbon_g"
                tie_inst = tie_inst.with_options(**{limit: min(inc.key[0] * (1 + 1e-6),
                                                               getattr(obj, limit) or float("inf"))})
            # no hint: a hint the capped model rejects slows CP-SAT down by orders of magnitude
            out = _run_bounded(run, tie_inst, D, P, cap, budget, opts, None)
            if out.status not in ("optimal", "infeasible"):
                tie_break = "time limit"
            if out.plan is not None:
                plan = tagged(c, out.plan)
                ev = evaluate(inst, plan)
                if ev.acceptable:
                    inc.offer(plan, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g)
    if inc.plan is None:
        status = "infeasible" if status == "optimal" else "unknown"
    value = inc.key[0] if inc.key else None
    if status in ("optimal", "infeasible"):
        bound = value
    else:
        bound = min(list(open_shapes.values()) + ([value] if value is not None else []), default=None)
    stats = {"shapes": n_shapes, "shape_log": log, "tie_break": tie_break, "model": model,
             "class_grid": ("off" if not grid_on else
                            "; ".join(sorted(set(grid_skip.values()))) if grid_skip and len(grid_skip) == len(at)
                            else "on"),
             "units": len(formulation.device_classes(inst)) if model == "classes" else inst.n}
    if inst.has_choices:
        # per choice: the best plan found there, by a model or a polished constructive
        # plan (None: it fits nowhere, or the cutoff closed every shape of it) and
        # whether shapes of it were left open
        stats["choices"] = [
            {**where(c), "objective_value": min((v for sh, v in shape_values.items() if sh[0] == c), default=None),
             "open": sum(1 for sh in open_shapes if sh[0] == c)} for c in range(len(chosen))]
    return finish(name, inst, opts, inc.plan, status, deadline, best_bound=bound, stats=stats)


def run_model(make_backend: Callable[[], Any], inst: Instance, D: int, P: int,
              spec: formulation.BuildSpec) -> tuple[Any, formulation.Shape, Instance]:
    """Build the (D, P) model of ``spec`` on a new back end; returns the back end,
    the model's variables and the instance it was stated for (the energy cap, if
    any, becomes that instance's energy limit)."""
    src = inst
    if spec.energy_cap is not None:
        cap = spec.energy_cap
        src = inst.with_options(max_energy_j=min(cap, inst.objective.max_energy_j or cap))
    be = make_backend()
    shape = formulation.build(src, D, P, be, spec)
    return be, shape, src
