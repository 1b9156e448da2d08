"""What every solver shares: its options, the incumbent it keeps, the result it returns.

A solver is a function ``solve(inst, opts) -> SolverResult`` registered by name in
:mod:`geotrain_opt.solvers`; this mirrors scikit-learn's one interface for many
algorithms, so the CLI, the benchmark harness and the verifier treat them alike.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.result import Status
from geotrain_opt.solvers import trace

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.solvers.options import Options

O = TypeVar("O", bound="Options")


@dataclass
class SolveOptions:
    """What every solver is given: the budget, seed, threads and warm start, and in
    ``extra`` its own options as the user wrote them. A solver reads those typed
    (:meth:`typed`), never from the dict; ``solvers.build_options`` is the one way
    the API, the CLI, the benchmark harness and the verifier make these."""

    time_limit_s: float = 60.0
    seed: int = 0
    workers: int = 2
    hint: Plan | None = None            # warm start (a heuristic's plan)
    progress: bool = False              # a progress line on standard error
    verbose: bool = False               # the engines' own logs (CP-SAT, HiGHS, CBC) on standard error
    max_plans: int = 2_000_000          # brute force refuses larger instances
    extra: dict[str, Any] = field(default_factory=dict)
    # (the extra it was read from, the solver's typed options): read once per solve
    _typed: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)

    def typed(self, cls: "type[O]", solver: str) -> "O":
        """The solver's typed options (checked: a one-line SolverError on a bad one),
        read from ``extra`` once; a copy with another ``extra`` reads its own."""
        got = self._typed
        if got is not None and got[0] is self.extra and isinstance(got[1], cls):
            return got[1]
        made = cls.parse(solver, self.extra)
        self._typed = (self.extra, made)
        return made

    def settings(self) -> dict[str, Any]:
        d = asdict(replace(self, _typed=None))
        d.pop("_typed")
        d["hint"] = self.hint.to_dict() if self.hint else None
        return d


class Deadline:
    """Wall-clock budget; solvers poll it and return their best plan when it expires."""

    def __init__(self, seconds: float) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed)

    @property
    def expired(self) -> bool:
        return self.elapsed >= self.seconds


class Incumbent:
    """Best plan so far under the instance's objective (with ε-limits enforced)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.key: tuple[float, float] | None = None
        self.plan: Plan | None = None
        self.T = self.E = float("inf")

    def offer(self, plan: Plan, T: float, E: float, C: float | None = None, Q: float | None = None) -> bool:
        """``C``, ``Q``: the plan's dollars and grams (§9), needed under those objectives."""
        return self.offer_key(plan, objmod.key(self.inst.objective, T, E, C, Q), T, E)

    def offer_evaluated(self, plan: Plan, ev: Any) -> bool:
        """As ``offer``, from the plan's reference evaluation; an unacceptable plan
        (memory, an ε-limit) is never taken."""
        return bool(ev.acceptable) and self.offer(plan, ev.time_s, ev.energy_j, ev.cost_usd, ev.carbon_g)

    def offer_plan(self, plan: Plan) -> Any:
        """Evaluate ``plan`` (reference evaluator) and offer it; its evaluation."""
        ev = evaluate(self.inst, plan)
        self.offer_evaluated(plan, ev)
        return ev

    def offer_key(self, plan: Plan, k: tuple[float, float], T: float, E: float) -> bool:
        """As ``offer``, with the objective key already computed (a batch's, a genome's)."""
        if objmod.better(self.inst.objective, k, self.key):
            self.key, self.plan, self.T, self.E = k, plan, T, E
            trace.note(k[0])
            return True
        return False


def finish(name: str, inst: Instance, opts: SolveOptions, plan: Plan | None, status: str,
           deadline: Deadline, best_bound: float | None = None, stats: dict | None = None) -> SolverResult:
    """Re-evaluate the plan with the reference evaluator and wrap it as a result."""
    ev = evaluate(inst, plan) if plan is not None else None
    value = None
    if ev is not None:
        value = float(objmod.of(inst.objective, ev)[0])
    if best_bound is not None and value is not None and status == Status.OPTIMAL:
        best_bound = min(best_bound, value)
    return SolverResult(solver=name, status=status, plan=plan, evaluation=ev,
                        objective=inst.objective.kind, objective_value=value, best_bound=best_bound,
                        seed=opts.seed, wall_s=deadline.elapsed, settings=opts.settings(),
                        stats=stats or {})


SolverFn = Callable[[Instance, SolveOptions], SolverResult]
