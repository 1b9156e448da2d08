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

from geotrain_opt.cost import objective as objmod
from geotrain_opt.bounds import shape_bounds
from geotrain_opt.construct.pieces import feasible_shapes, smallest_feasible_plan
from geotrain_opt.cost.evaluator import BatchEvaluator, evaluate
from geotrain_opt.cost.tariffs import priced_floors
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.exact import class_grid, formulation
from geotrain_opt.solvers.base import Deadline, Incumbent, SolveOptions, finish
from geotrain_opt.decisions.choices import tag, variants
from geotrain_opt.solvers.result import Status
from geotrain_opt.problem.tiers import Stopped
from geotrain_opt.problem.tolerances import OPTIMUM_RTOL, PROOF_RTOL
from geotrain_opt.solvers.budget import BOUNDS_SHARE, CONSTRUCTIVE_SHARE, GRID_SHARE, POLISH_SHARE

# The CP-SAT model counts time in units of T_ref * 2^-RES_BITS (likewise energy):
# with activities below 2^40 this balances the resolution of a time (2^-20) against
# that of a product of a time and a coefficient (formulations/exact.md §5).
RES_BITS = 20
# Constructive plans that set the exact solvers' warm start, units and shape order.
# Deliberately not every constructor: with the site-structured ones added, the
# incumbent's units and the shape order changed and HiGHS stalled on one shape of
# the 10- and 12-GPU scaling instances (8 s -> 120 s, measured); these three are
# the measured configuration of formulations/campaigns.md §6.
EXACT_SEEDS = ("fastest-first", "region-packed", "memory-aware")


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


def model_kind(inst: Instance, kind: str = "auto", stop: Callable[[], bool] | None = None) -> str:
    """"devices" (x per device) or "classes" (x per class of interchangeable devices,
    formulations/exact.md §3.7); "auto" takes the class model where it has fewer
    units than devices."""
    if kind == "auto":
        kind = "classes" if len(formulation.device_classes(inst, stop)) < inst.n else "devices"
    return kind


def _constructive(inst: Instance, shapes, deadline: Deadline) -> tuple[dict, list[tuple[float, Plan]]]:
    """Best constructive plan per shape: warm start, cutoff, and the order of shapes.
    Evaluated in batches, and on at most a fifth of the time limit."""
    from geotrain_opt.construct.heuristics import CONSTRUCTORS
    ev = BatchEvaluator(inst)
    best: dict[tuple[int, int], float] = {}
    plans = []
    share = CONSTRUCTIVE_SHARE * deadline.seconds
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
    node-mixed plan with polished cuts reaches its shape's bound (proofs.md §8);
    with the layouts by site (``site_plans``: a ring per site, stages of close
    sites paired, and a replica per site) Case 5's and 5-2's incumbents start at
    30.8735 s and 31.2459 s (the class grid then finds the optima, 30.7864 s and
    31.2140 s).
    Only the incumbent takes them: units and shape order stay those of EXACT_SEEDS."""
    from geotrain_opt.construct.heuristics import CONSTRUCTORS, polish_cuts
    from geotrain_opt.construct.site_layouts import site_plans
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
    """Prove the optimum over every shape with back end ``run`` (CP-SAT or the MILP)."""
    from geotrain_opt.solvers import spec  # the engine's own options class (CpsatOptions, MilpOptions): checked here
    options = opts.typed(spec(name).options, name)
    if inst.has_choices and options.choice_search == "separate":
        # one whole solve per (micro_batch, recompute) on a share of the time (to compare)
        from geotrain_opt.solvers.choices import over_choices
        return over_choices(lambda v, o: solve_exact(name, v, o, run))(inst, opts)
    return ExactDriver(name, inst, opts, run, options).solve()


Shape3 = tuple[int, int, int]          # (choice, D, P)


class ExactDriver:
    """One exact solve: bound the shapes, seed an incumbent, attempt each shape
    (class grid, then the model), give the open ones the time left, tie-break.

    The micro-batch size and recomputation (§11) are enumerated with the shapes: a
    "shape" is (c, D, P) for choice c of the model (0 only, its own, where it offers
    none), each a model of the instance at that choice, and one incumbent's cutoff
    prunes the shapes of every choice (formulations/exact.md §4)."""

    def __init__(self, name: str, inst: Instance, opts: SolveOptions, run: Runner, options: Any) -> None:
        self.name, self.inst, self.opts, self.run, self.options = name, inst, opts, run, options
        self.deadline = Deadline(opts.time_limit_s)
        self.inc = Incumbent(inst)
        self.obj = inst.objective
        self.chosen, self.at = variants(inst)
        self.log: list[dict] = []
        self.open_shapes: dict[Shape3, float] = {}
        # the best plan found in each shape: where the optimum lies (the tie-break refines
        # those shapes, even when their bound closed them before any model ran)
        self.shape_values: dict[Shape3, float] = {}
        self.shape_guess: dict[Shape3, float] = {}
        self.grid_on = getattr(options, "class_grid", "off") == "auto"
        self.grid_skip: dict[int, str] = {}                       # choice -> why the class grid does not apply
        self.grid_bound: dict[Shape3, float] = {}
        self.n_shapes, self.model, self.ref = 0, None, None      # until bound_shapes and seed say (an early Ctrl-C)

    # ---- the solve, step by step
    def solve(self) -> SolverResult:
        try:
            self.bound_shapes()
            self.seed()
            self.passes()
        except KeyboardInterrupt:       # Ctrl-C: the best plan known, a constructive one at least
            return self.interrupted()
        # shapes left open before the limit ran out (a model whose rounding ranks many
        # near-equal plans first, §5): "feasible", not a time limit that was not reached
        ran_out = self.deadline.remaining <= max(0.5, 0.01 * self.deadline.seconds)
        status = (Status.TIME_LIMIT if ran_out else Status.FEASIBLE) if self.open_shapes else Status.OPTIMAL
        tie_break = self.tie_break() if status == Status.OPTIMAL else "not needed"
        return self.result(status, tie_break)

    def interrupted(self) -> SolverResult:
        """The result of a solve stopped by Ctrl-C: every shape not closed stays open."""
        if self.inc.plan is None:
            for c, v in enumerate(self.at):
                if (p := smallest_feasible_plan(v)) is not None:
                    self.inc.offer_plan(self.tagged(c, p))
                    break
        if not hasattr(self, "floors"):          # stopped before the shapes had bounds: none known
            self.open_shapes[(0, 0, 0)] = 0.0
        closed = {(e.get("D"), e.get("P")) for e in self.log if e.get("status") == "closed"}
        for sh in getattr(self, "shapes", []):
            if sh[1:] not in closed:
                self.open_shapes.setdefault(sh, self.shape_floor(sh))
        out = self.result(Status.FEASIBLE, "interrupted")
        out.stats["interrupted"] = True
        return out

    def bound_shapes(self) -> None:
        """Every shape's bound (on at most a quarter of the time limit: past it, shapes
        keep the trivial bound 0); shapes it rules out (memory, an ε-limit) need no model."""
        shapes = [(c, D, P) for c, v in enumerate(self.at) for D, P in feasible_shapes(v)]
        self.sbound = {}

        def late() -> bool:
            return self.deadline.elapsed > BOUNDS_SHARE * self.deadline.seconds
        for c, v in enumerate(self.at):
            mine = [sh[1:] for sh in shapes if sh[0] == c]
            self.sbound.update({(c, *sh): b for sh, b in shape_bounds(v, mine, stop=late).items()})
        self.floors = [lower_bound(v) for v in self.at]
        self.log += [{**self.where(c), "D": D, "P": P, "status": "closed", "by": b.by, "bound": None, "seconds": 0.0}
                     for (c, D, P), b in self.sbound.items() if b.value == float("inf")]
        self.n_shapes = len(shapes)
        self.shapes = [s for s in shapes if self.sbound[s].value < float("inf")]

    def seed(self) -> None:
        """The incumbent, the model's units and the order of shapes from constructive
        plans; then polished constructive plans (the incumbent only)."""
        inst, inc, deadline, shapes = self.inst, self.inc, self.deadline, self.shapes
        seeds: list[tuple[float, Plan]] = []
        for c, v in enumerate(self.at):
            guess, built = _constructive(v, [sh[1:] for sh in shapes if sh[0] == c], deadline)
            self.shape_guess.update({(c, *sh): g for sh, g in guess.items()})
            seeds += [(val, self.tagged(c, p)) for val, p in built]
        smallest = next((self.tagged(c, p) for c, v in enumerate(self.at)
                         if (p := smallest_feasible_plan(v)) is not None), None)
        start_plans = [p for p in (self.opts.hint, smallest) if p is not None]
        start_plans += [p for _, p in sorted(seeds, key=lambda vp: vp[0])[:1]]
        for p in start_plans:
            inc.offer_plan(p)
        ref = evaluate(inst, inc.plan) if inc.plan is not None else (evaluate(inst, start_plans[0])
                                                                      if start_plans else None)
        self.ref = ref
        try:                           # else built when a model is (the device classes: 1 s at 4,096 GPUs)
            if not deadline.expired:
                self.build_units()
        except Stopped:
            pass
        # promising shapes first: their optima become cutoffs that prune the rest
        shapes.sort(key=lambda s: (self.shape_guess.get(s, float("inf")), s[1] * s[2], s[0]))
        for c, v in enumerate(self.at):
            for _val, (D, P), p in _polished(v, [sh[1:] for sh in shapes if sh[0] == c], deadline, POLISH_SHARE / len(self.at)):
                self.offer((c, D, P), p)
        if self.grid_on:
            # the class grid finds plans of a shape as it closes it: the shape of the best
            # plan known first, so that a better plan there is the cutoff of the others
            shapes.sort(key=lambda s: (min(self.shape_values.get(s, float("inf")),
                                           self.shape_guess.get(s, float("inf"))), s[1] * s[2], s[0]))

    def build_units(self) -> formulation.BuildSpec:
        """The model kind (devices or classes) and its units, once, before the first model."""
        if self.model is None:          # Stopped past the limit (the device classes poll it)
            self.model = model_kind(self.inst, self.options.exact_model, lambda: self.deadline.expired)
            self.units = reference_units(self.ref, classes=self.model == "classes")
        return self.units

    def passes(self) -> None:
        """Pass 1: every shape gets a fair slice, so one hard shape cannot starve the
        others. Pass 2: the remaining time for the shapes still open, best bound first."""
        deadline, shapes = self.deadline, self.shapes
        for i, sh in enumerate(shapes):
            if deadline.expired:
                self.open_shapes[sh] = self.shape_floor(sh)
                continue
            # shared among the shapes that still need a model (those the incumbent has
            # reached close at once)
            need = sum(1 for s in shapes[i:] if not self.reached(s)) or 1
            slice_s = max(1.0, 2.0 * deadline.remaining / need)
            self.attempt(sh, min(slice_s, deadline.remaining))
        # Shapes the incumbent has overtaken close by their bound at once, so they are
        # dropped before the time is shared out (else their share went unused); a shape
        # that returns early leaves its time to a further round.
        for _round in range(3):
            for sh in [sh for sh in self.open_shapes if self.reached(sh)]:
                self.attempt(sh, 0.0)
            todo = sorted(self.open_shapes, key=self.open_shapes.get)
            if not todo or deadline.expired:
                break
            for i, sh in enumerate(todo):
                if deadline.expired:
                    break
                if sh in self.open_shapes:
                    self.attempt(sh, min(deadline.remaining, max(1.0, deadline.remaining / (len(todo) - i))))

    # ---- one shape
    def attempt(self, sh: Shape3, seconds: float) -> None:
        """Close the shape by its bound, else by the class grid, else by its model."""
        c, D, P = sh
        if self.reached(sh):
            # its bound reaches the best plan: no plan of it is better, no model needed
            # (formulations/proofs.md §8)
            by_grid = self.grid_bound.get(sh, 0.0) > self.sbound[sh].value
            self.log.append({**self.where(c), "D": D, "P": P, "status": "closed",
                             "by": "class grid" if by_grid else self.sbound[sh].by,
                             "bound": self.grid_bound[sh] if by_grid else self.sbound[sh].value, "seconds": 0.0})
            self.open_shapes.pop(sh, None)
            return
        t_grid = time.perf_counter()
        if self.relax(sh, GRID_SHARE * seconds):
            return
        seconds = max(0.0, seconds - (time.perf_counter() - t_grid))
        inc = self.inc
        try:
            units = self.build_units()
        except Stopped:                 # the limit ran out before the model's units were known
            self.open_shapes[sh] = max(self.shape_floor(sh), self.grid_bound.get(sh, 0.0))
            return
        cutoff = inc.key[0] * (1 + PROOF_RTOL) if inc.key else None
        t0 = time.perf_counter()
        out = _run_bounded(self.run, self.at[c], D, P, units.but(cutoff=cutoff), seconds, self.opts,
                           self.own(c, inc.plan))
        self.log.append({**self.where(c), "D": D, "P": P, "status": out.status,
                         "seconds": round(time.perf_counter() - t0, 3), "budget_s": round(seconds, 2),
                         "bound": self.sbound[sh].value})
        if self.opts.progress:      # one line per shape on stderr: long proofs show where they are
            best = f"{inc.key[0]:.6g}" if inc.key else "-"
            what = "no better plan" if out.status == Status.INFEASIBLE and cutoff is not None else out.status
            at_c = f" at b={self.chosen[c][0]}, {self.chosen[c][1]}" if self.inst.has_choices else ""
            print(f"{self.name}: shape {D}x{P}{at_c}: {what} ({len(self.log)} solved, "
                  f"{self.deadline.elapsed:.1f} s, best {best})", file=sys.stderr, flush=True)
        if out.plan is not None:
            self.offer(sh, out.plan)
        if out.status in (Status.FEASIBLE, Status.UNKNOWN):
            # the model's bound, but never below the shape's own bound (bounds) or the
            # class grid's
            floor = max(self.shape_floor(sh), self.grid_bound.get(sh, 0.0))
            self.open_shapes[sh] = max(out.bound, floor) if out.bound is not None else floor
        else:
            self.open_shapes.pop(sh, None)

    def relax(self, sh: Shape3, seconds: float) -> bool:
        """The class-grid relaxation of the shape (formulations/proofs.md §9): its plans
        become incumbents, and it closes the shape when no plan of it beats the best."""
        c, D, P = sh
        inc = self.inc
        if not self.grid_on or not inc.key or self.grid_skip.get(c) or seconds < 1.0:
            return False
        why = class_grid.not_applicable(self.at[c], D)
        if why is not None:
            self.grid_skip[c] = why
            return False
        t0 = time.perf_counter()
        g = class_grid.solve_shape(self.at[c], D, P, inc.key[0], seconds, self.opts.workers, self.opts.seed)
        if g.plan is not None:
            self.offer(sh, g.plan)
        self.log.append({**self.where(c), "D": D, "P": P, "status": g.status, "by": "class grid",
                         "seconds": round(time.perf_counter() - t0, 3), "budget_s": round(seconds, 2),
                         "bound": g.bound, "solutions": g.solutions})
        if self.opts.progress:
            print(f"{self.name}: shape {D}x{P}: class grid {g.status} ({g.solutions} relaxed solutions, "
                  f"{self.deadline.elapsed:.1f} s, best {inc.key[0]:.6g})", file=sys.stderr, flush=True)
        if g.status == "closed":
            self.open_shapes.pop(sh, None)
            return True
        if g.bound is not None:
            self.grid_bound[sh] = max(self.grid_bound.get(sh, 0.0), g.bound)
        return False

    def tie_break(self) -> str:
        """Time: least E among the fastest plans; energy: least T among the cheapest.
        It refines a proven optimum, so it gets at most half the time the proof took
        (and what is left): a hard secondary problem must not eat the whole budget."""
        inc, obj, deadline = self.inc, self.obj, self.deadline
        if not inc.key or obj.kind not in ("time", "energy", "cost", "carbon"):
            return "not needed"
        try:
            units = self.build_units()
        except Stopped:
            return "time limit"
        tie_kind = "energy" if obj.kind == "time" else "time"
        tie_end = deadline.elapsed + max(2.0, 0.5 * deadline.elapsed)
        tie_break = "done"
        for (c, D, P), v in self.shape_values.items():
            if v > inc.key[0] * (1 + OPTIMUM_RTOL):
                continue
            budget = min(deadline.remaining, tie_end - deadline.elapsed)
            if budget <= 0:
                return "time limit"
            # the cap must admit the optimal plan despite the integer model's over-estimate
            tie_inst = self.at[c]
            if obj.kind == "time":
                cap = units.but(objective=tie_kind, time_cap=inc.key[0] * (1 + PROOF_RTOL))
            elif obj.kind == "energy":
                cap = units.but(objective=tie_kind, energy_cap=inc.key[0] * (1 + OPTIMUM_RTOL))
            else:       # dollars or grams capped at the optimum as the instance's own limit
                cap = units.but(objective=tie_kind)
                limit = "max_cost_usd" if obj.kind == "cost" else "max_carbon_g"
                tie_inst = tie_inst.with_options(**{limit: min(inc.key[0] * (1 + OPTIMUM_RTOL),
                                                               getattr(obj, limit) or float("inf"))})
            # no hint: a hint the capped model rejects slows CP-SAT down by orders of magnitude
            out = _run_bounded(self.run, tie_inst, D, P, cap, budget, self.opts, None)
            if out.status not in (Status.OPTIMAL, Status.INFEASIBLE):
                tie_break = "time limit"
            if out.plan is not None:
                inc.offer_plan(self.tagged(c, out.plan))
        return tie_break

    def result(self, status: str, tie_break: str) -> SolverResult:
        inst, inc = self.inst, self.inc
        if inc.plan is None:
            status = Status.INFEASIBLE if status == Status.OPTIMAL else Status.UNKNOWN
        value = inc.key[0] if inc.key else None
        if status in (Status.OPTIMAL, Status.INFEASIBLE):
            bound = value
        else:
            bound = min(list(self.open_shapes.values()) + ([value] if value is not None else []), default=None)
        grid_skip = self.grid_skip
        # model None: the limit ran out before any model was built
        stats = {"shapes": self.n_shapes, "shape_log": self.log, "tie_break": tie_break, "model": self.model,
                 "class_grid": ("off" if not self.grid_on else
                                "; ".join(sorted(set(grid_skip.values()))) if grid_skip and len(grid_skip) == len(self.at)
                                else "on"),
                 "units": len(formulation.device_classes(inst)) if self.model == "classes" else inst.n}
        if inst.has_choices:
            # per choice: the best plan found there, by a model or a polished constructive
            # plan (None: it fits nowhere, or the cutoff closed every shape of it) and
            # whether shapes of it were left open
            stats["choices"] = [
                {**self.where(c), "objective_value": min((v for sh, v in self.shape_values.items() if sh[0] == c),
                                                         default=None),
                 "open": sum(1 for sh in self.open_shapes if sh[0] == c)} for c in range(len(self.chosen))]
        return finish(self.name, inst, self.opts, inc.plan, status, self.deadline, best_bound=bound, stats=stats)

    # ---- helpers
    def tagged(self, c: int, plan: Plan | None) -> Plan | None:
        return tag(self.inst, plan, *self.chosen[c]) if self.inst.has_choices else plan

    def own(self, c: int, plan: Plan | None) -> Plan | None:
        """``plan`` as a plan of choice c's instance (a hint), if it is at that choice."""
        if plan is None or not self.inst.has_choices:
            return plan
        m = self.inst.model
        if (plan.micro_batch or m.micro_batch, plan.recompute or m.recompute) != self.chosen[c]:
            return None
        return replace(plan, micro_batch=None, recompute=None)

    def where(self, c: int) -> dict:
        return {"micro_batch": self.chosen[c][0], "recompute": self.chosen[c][1]} if self.inst.has_choices else {}

    def shape_floor(self, sh: Shape3) -> float:
        return max(self.sbound[sh].value, self.floors[sh[0]])

    def reached(self, sh: Shape3) -> bool:
        """The shape's bound is at the incumbent (to PROOF_RTOL): none of its plans is better.
        An exact bound (the joint cut of §8 is exact for some plans) closes its shape."""
        inc = self.inc
        return bool(inc.key) and max(self.sbound[sh].value, self.grid_bound.get(sh, 0.0)) >= inc.key[0] * (1 - PROOF_RTOL)

    def offer(self, sh: Shape3, plan: Plan) -> None:
        """A plan of shape ``sh`` (at its choice's instance) to the incumbent."""
        plan = self.tagged(sh[0], plan)
        ev = self.inc.offer_plan(plan)
        if ev.acceptable:
            val = float(objmod.of(self.obj, ev)[0])
            self.shape_values[sh] = min(self.shape_values.get(sh, val), val)


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
