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
    """Integer model: a real quantity q with unit u is the integer q/u, rounded so
    that every cost is over-estimated, never under-estimated."""

    def __init__(self) -> None:
        self.m = cp_model.CpModel()
        self.unit: dict[int, float] = {}

    def _u(self, v: Any) -> float:
        return self.unit.get(v.index, 1.0)

    def boolean(self, name: str) -> Any:
        return self.m.new_bool_var(name)

    def integer(self, name: str, lo: int, hi: int) -> Any:
        return self.m.new_int_var(lo, hi, name)

    def real(self, name: str, ub: float, unit: float) -> Any:
        v = self.m.new_int_var(0, max(1, _ceil(ub / unit)), name)
        self.unit[v.index] = unit
        return v

    def ge(self, lhs: Any, terms, const: float = 0.0, enforce: tuple = ()) -> None:
        ul = self._u(lhs)
        expr = sum(_ceil(c * self._u(v) / ul) * v for c, v in terms if c != 0)
        ct = self.m.add(lhs >= expr + _ceil(const / ul))
        if enforce:
            ct.only_enforce_if(list(enforce))

    def le(self, terms, rhs: float, unit: float, enforce: tuple = ()) -> None:
        expr = sum(_ceil(c * self._u(v) / unit) * v for c, v in terms if c != 0)
        ct = self.m.add(expr <= _floor(rhs / unit))
        if enforce:
            ct.only_enforce_if(list(enforce))

    def eq_int(self, terms, rhs: int) -> None:
        self.m.add(sum(int(c) * v for c, v in terms) == rhs)

    def minimize(self, terms) -> None:
        self.m.minimize(sum(c * self._u(v) * v for c, v in terms))

    def hint(self, var: Any, value: float) -> None:
        self.m.add_hint(var, int(round(value)))


def _hint(be: CpSatBackend, inst: Instance, shape: formulation.Shape, plan: Plan | None) -> None:
    if plan is None or plan.replicas != shape.D or plan.stages != shape.P:
        return
    grid = plan.grid_indices(inst.index)
    for (g, k, j), var in shape.x.items():
        be.hint(var, 1 if grid[k][j] == g else 0)
    if shape.n_layers is not None:
        for j, var in enumerate(shape.n_layers):
            be.hint(var, plan.cuts[j + 1] - plan.cuts[j])


def run_shape(inst: Instance, D: int, P: int, kw: dict, seconds: float, opts: SolveOptions,
              hint: Plan | None) -> ShapeOutcome:
    be, shape = run_model(CpSatBackend, inst, D, P, kw)
    _hint(be, inst, shape, hint)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = max(1, opts.workers)
    solver.parameters.random_seed = opts.seed
    solver.parameters.relative_gap_limit = 0.0
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
        bound = solver.best_objective_bound - (err if (kw.get("objective") or inst.objective.kind) == "time" else 0.0)
    return ShapeOutcome(status, plan, bound)


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    return solve_exact("cpsat", inst, opts, run_shape)
