"""CP-SAT (OR-Tools) back end for the exact model of formulations/exact.md."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from typing import Any

from ortools.sat.python import cp_model

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import clock_levels, evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.exact import formulation
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.options import CpsatOptions
from geotrain_opt.solvers.exact.driver import ShapeOutcome, run_model, solve_exact
from geotrain_opt.solvers.exact.formulation import BuildSpec
from geotrain_opt.solvers.exact.numerics import ACTIVITY_BITS, CLOSE_RTOL, SCALE_BITS
from geotrain_opt.solvers.result import Status

_EPS = 1e-9

# At most this many plans are excluded one by one before a shape is left open (the
# time limit usually ends it first): many plans can lie within the model's rounding
# of the optimum (40 left a 6-GPU energy model of the differential campaign open).
MAX_EXCLUSIONS = 1000


def _ceil(x: float) -> int:
    return math.ceil(x - _EPS * max(1.0, abs(x)))


def _floor(x: float) -> int:
    return math.floor(x + _EPS * max(1.0, abs(x)))


class CpSatBackend:
    """Integer model: a real quantity q with unit u is the integer q/u.

    The integer model is a *relaxation* of the exact one: coefficients are rounded
    down, right-hand sides of limits up, and each lower-bound row leaves its
    variable free to take the floor of its true value. So every plan keeps a
    model cost at most its true cost: model bounds are valid lower bounds and a
    cutoff never removes a better plan. A plan the model ranks first is then
    re-evaluated exactly, and the driver closes a shape only when nothing better
    remains (formulations/exact.md §5).
    """

    def __init__(self) -> None:
        self.m = cp_model.CpModel()
        self.unit: dict[int, float] = {}
        self.ub: dict[int, int] = {}

    def _u(self, v: Any) -> float:
        return self.unit.get(v.index, 1.0)

    def boolean(self, name: str) -> Any:
        v = self.m.new_bool_var(name)
        self.ub[v.index] = 1
        return v

    def integer(self, name: str, lo: int, hi: int) -> Any:
        v = self.m.new_int_var(lo, hi, name)
        self.ub[v.index] = hi
        return v

    def real(self, name: str, ub: float, unit: float) -> Any:
        hi = _ceil(ub / unit * (1 + 1e-6)) + 1024
        if not math.isfinite(ub / unit) or hi >= 2 ** ACTIVITY_BITS:
            hi = 2 ** ACTIVITY_BITS - 1
        v = self.m.new_int_var(0, hi, name)
        self.unit[v.index] = unit
        self.ub[v.index] = hi
        return v

    def _scaled(self, terms, unit: float, extra: float = 0.0,
                negative: bool = False) -> tuple[int, list[tuple[int, Any]], bool]:
        """(S, integer coefficients, exact): the smallest power of two S that makes
        every ratio integral, else the largest the activity limit allows, with the
        coefficients rounded down. ``negative``: the caller (``ge``) pays for
        negative coefficients on real variables."""
        ratios = [(c * self._u(v) / unit, v) for c, v in terms if c != 0]
        for r, v in ratios:
            if r < 0 and v.index in self.unit and not negative:
                raise ValueError("cpsat: negative coefficient on a real variable breaks the relaxation")
        size = extra + sum(abs(r) * self.ub[v.index] for r, v in ratios)
        S = 1
        while True:
            if all(float(S * r).is_integer() for r, _ in ratios):
                return S, [(int(S * r), v) for r, v in ratios], True
            if S >= 2 ** SCALE_BITS or (size + 1) * S * 2 >= 2.0 ** ACTIVITY_BITS:
                break
            S *= 2
        return S, [(math.floor(S * r), v) for r, v in ratios], False

    def ge(self, lhs: Any, terms, const: float = 0.0, enforce: tuple = ()) -> None:
        # S*lhs >= sum floor(S r) v + floor(S c) - (S - 1) admits lhs = floor(true value).
        # A real variable v at floor(V/u) > V/u - 1 under a negative c = floor(S r) adds
        # at most |c| above S r V/u, so the row gives that back (the sync's drain, §3.10).
        ul = self._u(lhs)
        S, coefs, _ = self._scaled(terms, ul, extra=self.ub[lhs.index] + abs(const / ul), negative=True)
        give = sum(-c for c, v in coefs if c < 0 and v.index in self.unit)
        ct = self.m.add(S * lhs >= sum(c * v for c, v in coefs) + math.floor(S * const / ul) - (S - 1) - give)
        if enforce:
            ct.only_enforce_if(list(enforce))

    def le(self, terms, rhs: float, unit: float, enforce: tuple = ()) -> None:
        S, coefs, exact = self._scaled(terms, unit, extra=abs(rhs / unit))
        # exact integer rows are stated exactly; rounded ones are relaxed
        bound = _floor(S * rhs / unit) if exact else math.ceil(S * rhs / unit)
        ct = self.m.add(sum(c * v for c, v in coefs) <= bound)
        if enforce:
            ct.only_enforce_if(list(enforce))

    def eq_int(self, terms, rhs: int) -> None:
        self.m.add(sum(int(c) * v for c, v in terms) == rhs)

    def minimize(self, terms, unit: float) -> None:
        # An integer objective in model units (a float objective is rescaled by
        # CP-SAT with its own precision, and ended searches early on these models).
        S, coefs, _ = self._scaled(terms, unit)
        self.obj_unit = unit / S
        self.obj_coefs = coefs
        self.m.minimize(sum(c * v for c, v in coefs))

    def cap_objective(self, value: float) -> None:
        """Only plans whose true objective is below ``value`` are wanted (relaxed row)."""
        self.m.add(sum(c * v for c, v in self.obj_coefs) <= math.ceil(value / self.obj_unit))

    def exclude(self, literals_true: list[Any], ints: list[tuple[Any, int]]) -> None:
        """Forbid one assignment: not all of these literals true and integers at these values."""
        clause = [b.Not() for b in literals_true]
        for var, val in ints:
            e = self.m.new_bool_var("")
            self.m.add(var == val).only_enforce_if(e)
            self.m.add(var != val).only_enforce_if(e.Not())
            clause.append(e.Not())
        self.m.add_bool_or(clause)

    def hint(self, var: Any, value: float) -> None:
        self.m.add_hint(var, int(round(value)))


def _hint(be: CpSatBackend, inst: Instance, shape: formulation.Shape, plan: Plan | None) -> None:
    if plan is None or plan.replicas != shape.D or plan.stages != shape.P:
        return
    for var, value in formulation.hint_values(inst, shape, plan.grid_indices(inst.index), clock_levels(inst, plan)):
        be.hint(var, value)
    if shape.n_layers is not None:
        for j, var in enumerate(shape.n_layers):
            be.hint(var, plan.cuts[j + 1] - plan.cuts[j])


def _configured_solver(opts: SolveOptions, seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    if opts.typed(CpsatOptions, "cpsat").cpsat_search == "fixed":
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = max(1, opts.workers)
    solver.parameters.random_seed = opts.seed
    if opts.verbose:            # the search log, on stderr: stdout stays the result's
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = lambda line: print(line, file=sys.stderr, flush=True)
    # CP-SAT 9.15 derives wrong bounds from its "greater than at least one of"
    # detection on these rows (S * t >= c * n if x_g, one x_g per slot): it proved
    # sub-optimal plans optimal and feasible models infeasible on generated 12-GPU
    # instances. Off, the results match the MILP and brute force.
    solver.parameters.auto_detect_greater_than_at_least_one_of = False
    # CP-SAT 9.15's inclusion-detection presolve removes optimal solutions of some
    # of these models: the differential campaign found a 12-GPU instance "proved"
    # 1.4% above the optimum (google/or-tools#5293, open; seed 31 in
    # tests/test_exact_differential.py). Off, the rest of presolve stays on.
    solver.parameters.presolve_inclusion_work_limit = 0
    solver.parameters.relative_gap_limit = 0.0
    solver.parameters.absolute_gap_limit = 0.0
    return solver


def run_shape(inst: Instance, D: int, P: int, spec: BuildSpec, seconds: float, opts: SolveOptions,
              hint: Plan | None) -> ShapeOutcome:
    t_end = time.perf_counter() + seconds        # building the model spends the slice too
    be, shape, src = run_model(CpSatBackend, inst, D, P, spec)
    _hint(be, inst, shape, hint)
    # Branch on the plan (assignment, layers, split) before the derived times: the
    # default portfolio branches on huge integer time domains and can stall for
    # seconds on a 4-GPU model that the fixed search closes in milliseconds.
    decisions = list(shape.x.values())
    decisions += list(shape.n_layers) if shape.n_layers is not None else list(shape.y.values())
    decisions += [b for row in (shape.mb or []) for b in row]
    be.m.add_decision_strategy(decisions, cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    kind = spec.objective or inst.objective.kind
    obj = replace(src.objective, kind=kind)
    time_cap = spec.time_cap
    best: Plan | None = None
    best_val = math.inf
    status, bound = Status.UNKNOWN, None
    for _ in range(MAX_EXCLUSIONS + 1):
        left = t_end - time.perf_counter()
        if left <= 0:
            status = Status.FEASIBLE if best is not None else Status.UNKNOWN
            break
        solver = _configured_solver(opts, left)
        st = solver.solve(be.m)
        if st == cp_model.INFEASIBLE:
            # nothing (left) whose true value beats the cutoff or the best plan: closed
            status = Status.OPTIMAL if best is not None else Status.INFEASIBLE
            bound = best_val if best is not None else None
            break
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            status = Status.FEASIBLE if best is not None else Status.UNKNOWN
            break
        model_bound = solver.best_objective_bound * be.obj_unit
        plan = formulation.read_solution(inst, shape, solver.value)
        ev = evaluate(src, plan)
        ok = ev.acceptable and (time_cap is None or ev.time_s <= time_cap)
        val = float(objmod.of(obj, ev)[0]) if ok else math.inf
        if val < best_val:
            best, best_val = plan, val
        bound = min(model_bound, best_val)
        if st == cp_model.OPTIMAL and model_bound >= best_val * (1 - CLOSE_RTOL):
            status = Status.OPTIMAL
            break
        if st == cp_model.FEASIBLE:          # stopped by the time limit
            status = Status.FEASIBLE if best is not None else Status.UNKNOWN
            break
        # the model ranks this plan first only up to its rounding: forbid it and ask
        # for a plan whose true value beats the best one
        ones = [v for v in shape.x.values() if solver.value(v)]
        ones += [v for v in (shape.y or {}).values() if solver.value(v)]
        ones += [b for row in (shape.mb or []) for b in row if solver.value(b)]
        ints = [(v, solver.value(v)) for v in shape.n_layers] if shape.n_layers is not None else []
        be.exclude(ones, ints)
        if best is not None:
            be.cap_objective(best_val * (1 - CLOSE_RTOL))
        be.m.clear_hints()
    else:
        status = Status.FEASIBLE if best is not None else Status.UNKNOWN
    return ShapeOutcome(status, best, bound)


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    return solve_exact("cpsat", inst, opts, run_shape)
