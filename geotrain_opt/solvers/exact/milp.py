"""PuLP MILP back end (CBC bundled with PuLP; HiGHS when installed) for formulations/exact.md."""
from __future__ import annotations

import functools
import itertools
import time
import warnings
from typing import Any

import pulp

from geotrain_opt.errors import SolverError
from geotrain_opt.cost.evaluator import clock_levels
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.exact import formulation
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.options import MilpOptions
from geotrain_opt.solvers.exact.driver import RES_BITS, ShapeOutcome, run_model, solve_exact
from geotrain_opt.solvers.exact.formulation import BuildSpec
from geotrain_opt.solvers.result import Status


class PulpBackend:
    """Continuous quantities are stored as value/unit; enforcement becomes big-M
    with M computed from the variables' bounds (as small as it can be)."""

    def __init__(self) -> None:
        self.m = pulp.LpProblem("geotrain", pulp.LpMinimize)
        self.unit: dict[str, float] = {}
        self.ub: dict[str, float] = {}
        self._names = itertools.count()

    def _new(self, name: str, lo: float, hi: float, cat: str) -> Any:
        name = f"{name}__{next(self._names)}"
        if hasattr(self.m, "add_variable"):     # PuLP >= 3.3.1; the LpVariable constructor is deprecated there
            v = self.m.add_variable(name, lo, hi, cat)
        else:                                   # older PuLP (the floor in pyproject.toml)
            v = pulp.LpVariable(name, lo, hi, cat)
        self.ub[v.name] = hi
        return v

    def _u(self, v: Any) -> float:
        return self.unit.get(v.name, 1.0)

    def boolean(self, name: str) -> Any:
        return self._new(name, 0, 1, pulp.LpBinary)

    def integer(self, name: str, lo: int, hi: int) -> Any:
        return self._new(name, lo, hi, pulp.LpInteger)

    def real(self, name: str, ub: float, unit: float) -> Any:
        v = self._new(name, 0, ub / unit, pulp.LpContinuous)
        self.unit[v.name] = unit
        return v

    def _scaled(self, terms, unit: float) -> list[tuple[float, Any]]:
        return [(c * self._u(v) / unit, v) for c, v in terms if c != 0]

    def _max(self, scaled) -> float:
        return sum(c * self.ub[v.name] for c, v in scaled if c > 0)

    def _add(self, terms: list[tuple[float, Any]], rhs: float, enforce: tuple, bigm: float) -> None:
        """sum(terms) <= rhs + bigm * (number of false enforcement literals), row-scaled.

        CBC is sensitive to badly scaled rows (bytes next to seconds): each row is
        divided by its largest coefficient, which changes nothing mathematically.
        """
        scale = max([abs(c) for c, _ in terms] + [1e-300])
        expr = pulp.lpSum((c / scale) * v for c, v in terms)
        r = rhs / scale
        if enforce:
            self.m += expr <= r + (bigm / scale) * pulp.lpSum(1 - lit for lit in enforce)
        else:
            self.m += expr <= r

    def ge(self, lhs: Any, terms, const: float = 0.0, enforce: tuple = ()) -> None:
        ul = self._u(lhs)
        sc = self._scaled(terms, ul)
        bigm = max(0.0, self._max(sc) + const / ul)
        self._add(sc + [(-1.0, lhs)], -const / ul, enforce, bigm)

    def le(self, terms, rhs: float, unit: float, enforce: tuple = ()) -> None:
        sc = self._scaled(terms, unit)
        r = rhs / unit
        self._add(sc, r, enforce, max(0.0, self._max(sc) - r))

    def eq_int(self, terms, rhs: int) -> None:
        self.m += pulp.lpSum(c * v for c, v in terms) == rhs

    def minimize(self, terms, unit: float) -> None:
        self.obj_unit = unit
        self.m.setObjective(pulp.lpSum(c * self._u(v) / unit * v for c, v in terms))

    def hint(self, var: Any, value: float) -> None:
        var.setInitialValue(value)


@functools.lru_cache(maxsize=1)
def _highs_available() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # listSolvers touches PULP_CBC_CMD
        return "HiGHS" in pulp.listSolvers(onlyAvailable=True)


def available_backends() -> list[str]:
    """Every MILP engine PuLP can drive here: highs, cbc and PuLP's own names (GUROBI, SCIP_CMD, …)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        names = pulp.listSolvers(onlyAvailable=True)
    return ["auto", "highs", "cbc"] + [n for n in names if n not in ("HiGHS", "PULP_CBC_CMD")]


def backend_name(opts: SolveOptions) -> str:
    """``milp_solver`` option: auto (HiGHS where installed, else CBC), highs, cbc, or
    the name of any other engine PuLP finds installed (``pulp.listSolvers``)."""
    name = opts.typed(MilpOptions, "milp").milp_solver
    if name == "auto":
        return "highs" if _highs_available() else "cbc"
    if name.lower() in ("highs", "cbc"):
        return name.lower()
    known = available_backends()
    if name not in known:
        raise SolverError(f"milp_solver: {name!r} is not available here (available: {', '.join(known)})")
    return name


# the least time limit an engine is given: a slice's last fraction of a second is its
# own (a floor of 1 s let CBC run 1 s past a command's limit, issue 39); the engines
# count wall time (PuLP's timeMode "elapsed")
MIN_SOLVE_S = 0.1


def _solver(opts: SolveOptions, seconds: float, warm: bool):
    name = backend_name(opts)
    seconds = max(MIN_SOLVE_S, seconds)
    if name not in ("highs", "cbc"):
        # another engine: its proof is read like HiGHS's (status Optimal at gap 0)
        try:
            return pulp.getSolver(name, msg=opts.verbose, timeLimit=seconds, gapRel=0.0, threads=opts.workers)
        except TypeError:          # engines without gap/thread arguments
            return pulp.getSolver(name, msg=opts.verbose, timeLimit=seconds)
    if name == "highs":
        # HiGHS keeps one thread scheduler per process: once anything in the process
        # (a user's own highspy model, a run with other threads) started it with
        # another size, a solve with threads=N fails and PuLP reports it as a status
        # ("Infeasible", "Not Solved"), not an error. Reset it, blocking, each time.
        import highspy
        reset = getattr(highspy.Highs, "resetGlobalScheduler", None)
        if reset is not None:
            reset(True)
        return pulp.HiGHS(msg=opts.verbose, timeLimit=seconds, gapRel=0.0, threads=opts.workers,
                          random_seed=opts.seed)
    # CBC 2.10's pre-processing declares some of these big-M models infeasible
    # (seen on generated tiny instances); without it CBC is slower but correct.
    # PuLP 3 deprecates the bundled-CBC class name, not the bundled binary.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not pulp.PULP_CBC_CMD().available():
            raise SolverError("milp: the CBC binary bundled with PuLP is missing; install highspy or use cpsat")
        return pulp.PULP_CBC_CMD(msg=opts.verbose, timeLimit=seconds, gapRel=0.0, threads=opts.workers,
                                 warmStart=warm, options=["preprocess off", f"randomSeed {opts.seed + 1}",
                                                          f"randomCbcSeed {opts.seed + 1}"])


def run_shape(inst: Instance, D: int, P: int, spec: BuildSpec, seconds: float, opts: SolveOptions,
              hint: Plan | None) -> ShapeOutcome:
    # The MILP measures time and energy in units of T_ref and E_ref (values near 1).
    end = time.perf_counter() + seconds          # building the model spends the slice too
    be, shape, _src = run_model(PulpBackend, inst, D, P, spec.scaled(2.0 ** RES_BITS))
    warm = False
    if hint is not None and hint.replicas == D and hint.stages == P:
        for var, value in formulation.hint_values(inst, shape, hint.grid_indices(inst.index),
                                                  clock_levels(inst, hint)):
            be.hint(var, value)
        warm = True
    st = be.m.solve(_solver(opts, max(0.05, end - time.perf_counter()), warm))
    status_txt = pulp.LpStatus[st]
    sol = be.m.sol_status
    has_sol = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    plan = None
    if has_sol:
        plan = formulation.read_solution(inst, shape, lambda v: v.value() or 0.0)
    if status_txt == "Optimal" and sol == pulp.LpSolutionOptimal:
        status = Status.OPTIMAL
    elif status_txt == "Infeasible":
        status = Status.INFEASIBLE
    elif has_sol:
        status = Status.FEASIBLE
    else:
        status = Status.UNKNOWN
    bound = pulp.value(be.m.objective) * be.obj_unit if status == Status.OPTIMAL else None
    return ShapeOutcome(status, plan, bound)


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    return solve_exact("milp", inst, opts, run_shape)
