"""CP-SAT (OR-Tools) back end for the exact model of formulations/exact.md."""
from __future__ import annotations

import math
from typing import Any

from ortools.sat.python import cp_model

from ..instance import Instance
from ..plan import Plan
from ..result import SolverResult
from . import formulation
from .base import SolveOptions
from .exact import ShapeOutcome, rounding_error_units, run_model, solve_exact

_EPS = 1e-9


def _ceil(x: float) -> int:
    return math.ceil(x - _EPS * max(1.0, abs(x)))


def _floor(x: float) -> int:
    return math.floor(x + _EPS * max(1.0, abs(x)))


class CpSatBackend:
    """Integer model: a real quantity q with unit u is the integer q/u.

    Each constraint is multiplied by a power of two S (as large as keeps every
    activity below 2^46, at most 2^24) before its coefficients are rounded, and
    they are rounded so that every cost is over-estimated, never under-estimated;
    the error per term is at most 1/S unit per unit of its variable
    (formulations/exact.md §5).
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
        # slack above the bound: rounded-up coefficients may exceed an exactly tight bound
        hi = _ceil(ub / unit * (1 + 1e-6)) + 1024
        v = self.m.new_int_var(0, hi, name)
        self.unit[v.index] = unit
        self.ub[v.index] = hi
        return v

    def _scaled(self, terms, unit: float, extra: float = 0.0) -> tuple[int, list[tuple[int, Any]], float]:
        ratios = [(c * self._u(v) / unit, v) for c, v in terms if c != 0]
        size = extra + sum(abs(r) * self.ub[v.index] for r, v in ratios)
        S = 1
        if all(float(r).is_integer() for r, _ in ratios):
            return S, [(int(r), v) for r, v in ratios], size   # exact already
        # as fine as the magnitude limit allows: rounding costs at most 1/S unit per
        # unit of each variable, and every activity stays below 2^46
        while S < 2 ** 24 and (size + 1) * S * 2 < 2.0 ** 46:
            S *= 2
        return S, [(_ceil(S * r), v) for r, v in ratios], size

    def ge(self, lhs: Any, terms, const: float = 0.0, enforce: tuple = ()) -> None:
        ul = self._u(lhs)
        S, coefs, _ = self._scaled(terms, ul, extra=self.ub[lhs.index] + abs(const / ul))
        ct = self.m.add(S * lhs >= sum(c * v for c, v in coefs) + _ceil(S * const / ul))
        if enforce:
            ct.only_enforce_if(list(enforce))

    def le(self, terms, rhs: float, unit: float, enforce: tuple = ()) -> None:
        S, coefs, _ = self._scaled(terms, unit, extra=abs(rhs / unit))
        ct = self.m.add(sum(c * v for c, v in coefs) <= _floor(S * rhs / unit))
        if enforce:
            ct.only_enforce_if(list(enforce))

    def eq_int(self, terms, rhs: int) -> None:
        self.m.add(sum(int(c) * v for c, v in terms) == rhs)

    def minimize(self, terms, unit: float) -> None:
        # An integer objective in model units (a float objective is rescaled by
        # CP-SAT with its own precision, and ended searches early on these models).
        # Coefficients are rounded up after scaling by S, like every row.
        S, coefs, _ = self._scaled(terms, unit)
        self.obj_unit = unit / S
        self.m.minimize(sum(c * v for c, v in coefs))

    def hint(self, var: Any, value: float) -> None:
        self.m.add_hint(var, int(round(value)))


def _hint(be: CpSatBackend, inst: Instance, shape: formulation.Shape, plan: Plan | None) -> None:
    if plan is None or plan.replicas != shape.D or plan.stages != shape.P:
        return
    grid = formulation.canonical_grid(inst, plan.grid_indices(inst.index))
    for (g, k, j), var in shape.x.items():
        be.hint(var, 1 if grid[k][j] == g else 0)
    if shape.n_layers is not None:
        for j, var in enumerate(shape.n_layers):
            be.hint(var, plan.cuts[j + 1] - plan.cuts[j])


def run_shape(inst: Instance, D: int, P: int, kw: dict, seconds: float, opts: SolveOptions,
              hint: Plan | None) -> ShapeOutcome:
    be, shape = run_model(CpSatBackend, inst, D, P, kw)
    _hint(be, inst, shape, hint)
    # Branch on the plan (assignment, layers, split) before the derived times: the
    # default portfolio branches on huge integer time domains and can stall for
    # seconds on a 4-GPU model that the fixed search closes in milliseconds.
    decisions = list(shape.x.values())
    decisions += list(shape.n_layers) if shape.n_layers is not None else list(shape.y.values())
    decisions += [b for row in (shape.mb or []) for b in row]
    be.m.add_decision_strategy(decisions, cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    solver = cp_model.CpSolver()
    search = opts.extra.get("cpsat_search", "fixed")
    if search == "fixed":
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = max(1, opts.workers)
    solver.parameters.random_seed = opts.seed
    # CP-SAT 9.15 derives wrong bounds from its "greater than at least one of"
    # detection on these rows (S * t >= c * n if x_g, one x_g per slot): it proved
    # sub-optimal plans optimal and feasible models infeasible on generated 12-GPU
    # instances. Off, the results match the MILP and brute force.
    solver.parameters.auto_detect_greater_than_at_least_one_of = False
    solver.parameters.relative_gap_limit = 0.0
    solver.parameters.absolute_gap_limit = 1.0
    st = solver.solve(be.m)
    plan = None
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        grid, cuts, mb = formulation.read_plan(inst, shape, solver.value)
        plan = Plan.from_indices(inst.ids, grid, cuts, mb)
    status = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible",
              cp_model.INFEASIBLE: "infeasible"}.get(st, "unknown")
    bound = None
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # the model over-estimates by at most err units of T (formulations/exact.md §5)
        err = rounding_error_units(inst, P) * kw["t_unit"]
        bound = solver.best_objective_bound * be.obj_unit - (err if (kw.get("objective") or inst.objective.kind) == "time" else 0.0)
    return ShapeOutcome(status, plan, bound)


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    return solve_exact("cpsat", inst, opts, run_shape)
