"""Micro-batch size and recomputation (formulations/model.md §11; the decision:
``decisions/choices.py``) for a solver that does not search them itself, and the
tensor-parallel degree (§14) for every solver: enumerated outside it as (D, P) is
outside the exact model. The instance at each case (a (micro_batch, recompute) the
model offers; a degree, whose instance is that of its GPU groups) is solved on a
share of the time and the best plan, tagged with its case, is the result. A case
changes every stage's work, memory and messages, so each is a whole instance of its
own; the few cases an instance offers make this cheap, and each solver keeps its own
proof (an exact solver's result is optimal when every case's is).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import partial, wraps
from typing import Any, Callable

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import BatchEvaluator, evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.cost.objective import pareto_filter
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.decisions.choices import tag
from geotrain_opt.decisions.tensor import as_groups, at_degrees, ungroup
from geotrain_opt.problem.instance import tensor
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.base import SolveOptions, SolverFn
from geotrain_opt.solvers.result import Status


@dataclass(frozen=True)
class Case:
    """One case of an enumeration: what it is (its row of the stats table), its
    instance, its plans as plans of the whole instance, and a hint as one of its own."""

    label: dict
    inst: Instance
    tag: Callable[[Plan | None], Plan | None]
    own: Callable[[Plan | None], Plan | None]


def choice_cases(inst: Instance) -> list[Case]:
    """Every (micro_batch, recompute) the model offers (§11)."""
    def own(b: int, r: str) -> Callable:
        def hint_at(h: Plan | None) -> Plan | None:
            if h is None:
                return None
            at = (h.micro_batch or inst.model.micro_batch, h.recompute or inst.model.recompute)
            return replace(h, micro_batch=None, recompute=None) if at == (b, r) else None
        return hint_at
    return [Case({"micro_batch": b, "recompute": r}, inst.variant(b, r), partial(tag, inst, b=b, r=r), own(b, r))
            for b, r in inst.model.choices()]


def degree_cases(inst: Instance) -> list[Case]:
    """Every tensor-parallel degree the instance lets the solvers search (§14) at
    which some group exists and the device limit allows one."""
    return [Case({"tensor_parallel": t}, at, partial(ungroup, at), partial(as_groups, at))
            for t, at in at_degrees(inst)]


def over_choices(fn: SolverFn) -> SolverFn:
    """``fn`` on every (micro_batch, recompute) choice of the instance, best plan kept."""
    @wraps(fn)
    def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
        if not inst.has_choices:
            return fn(inst, opts)
        return over_cases(fn, inst, opts, choice_cases(inst), "choices")
    return solve


RACE_KEEP = 3      # cases a heuristic searches after the race (formulations/model.md §14)
RACE_SHAPES = 12   # shapes whose greedy plans rank a case
# the share of a heuristic's time kept back for the case whose plan is best after every
# kept case had its first share (successive halving: the best degree searched longest)
REFINE_SHARE = 0.5


def over_degrees(fn: SolverFn, race: bool = False) -> SolverFn:
    """``fn`` at every tensor-parallel degree the instance offers (§14), best plan kept.
    ``race`` (the heuristics and baselines: they prove nothing, so need not visit every
    case): where there are more than ``RACE_KEEP`` cases, the greedy constructive plan
    of each ranks them and only the ``RACE_KEEP`` best are searched, each on a larger
    share of the time."""
    @wraps(fn)
    def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
        if tensor.degrees(inst) == (1,):
            return fn(inst, opts)
        # a degree left out has no group, or more GPUs than max_devices: no plan at all
        start = time.perf_counter()
        cases = degree_cases(inst)
        left_out: list[dict] = []
        if race and len(cases) > RACE_KEEP:
            cases, left_out = _race(inst, opts, cases)
        res = over_cases(fn, inst, replace(opts, time_limit_s=opts.time_limit_s - (time.perf_counter() - start)),
                         cases, "tensor_parallel", every=not left_out, refine=REFINE_SHARE if race else 0.0)
        if left_out:
            res.stats["tensor_parallel"] = res.stats.get("tensor_parallel", []) + left_out
        return replace(res, wall_s=time.perf_counter() - start)
    return solve


def _race(inst: Instance, opts: SolveOptions, cases: list[Case]) -> tuple[list[Case], list[dict]]:
    """The ``RACE_KEEP`` cases whose greedy constructive plans are best (by the
    objective), and a stats row for each case left out."""
    scored = []
    # a fixed number of plans per case (deterministic); the time guard (half of the
    # time) only binds on instances far larger than the limit allows
    each = max(opts.time_limit_s / (2 * len(cases)), 0.01)
    for case in cases:
        scored.append((_greedy_key(case.inst, time.perf_counter() + each), case))
    order = sorted(range(len(scored)), key=lambda i: scored[i][0])
    keep = sorted(order[:RACE_KEEP])           # in their own order: fewest units first
    out = [{**scored[i][1].label, "status": "not searched", "greedy_value": scored[i][0][0] if math.isfinite(scored[i][0][0]) else None}
           for i in order[RACE_KEEP:]]
    return [scored[i][1] for i in keep], out


def _greedy_key(inst: Instance, until: float) -> tuple[float, float]:
    """The objective key of the best plan the greedy constructors build (inf: none)."""
    from geotrain_opt.construct.heuristics import CONSTRUCTORS, seed_shapes
    ev, best = BatchEvaluator(inst), (float("inf"), float("inf"))
    for D, P in seed_shapes(inst, limit=RACE_SHAPES):
        for build in CONSTRUCTORS.values():
            if time.perf_counter() > until:
                return best
            grid, cuts, mb = build(inst, D, P)
            r = ev(np.asarray(grid)[None], np.asarray(cuts)[None], np.asarray(mb)[None])
            if r.acceptable[0]:
                k = objmod.key(inst.objective, float(r.time_s[0]), float(r.energy_j[0]),
                               None if r.cost_usd is None else float(r.cost_usd[0]),
                               None if r.carbon_g is None else float(r.carbon_g[0]))
                best = min(best, tuple(float(v) for v in k))
    return best


def at_degree_one(fn: SolverFn) -> SolverFn:
    """``fn`` on one GPU per slot only, whatever degrees the instance offers (a planner
    without tensor parallelism, as DT-FM's scheduler is: model.md §14)."""
    @wraps(fn)
    def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
        if tensor.degrees(inst) == (1,):
            return fn(inst, opts)
        one = tensor.at_degree(inst, 1)
        return fn(one, replace(opts, hint=as_groups(one, opts.hint)))
    return solve


def at_node_degree(fn: SolverFn) -> SolverFn:
    """``fn`` at one degree, as Megatron-LM's classic layout sets it (model.md §14):
    tensor parallelism over a whole node, i.e. the largest degree the instance offers
    for every GPU type alike; a smaller one only where that gives no plan (the model
    does not split evenly, too few groups), as a user would step down."""
    @wraps(fn)
    def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
        if tensor.degrees(inst) == (1,):
            return fn(inst, opts)
        start = time.perf_counter()
        uniform = sorted((c for c in degree_cases(inst) if isinstance(c.label["tensor_parallel"], int)),
                         key=lambda c: -c.label["tensor_parallel"])
        res = None
        for case in uniform:
            left = opts.time_limit_s - (time.perf_counter() - start)
            res = over_cases(fn, inst, replace(opts, time_limit_s=max(left, 0.01)), [case], "tensor_parallel",
                             every=False)
            if res.plan is not None or left <= 0:
                break
        if res is None:                      # no degree has a group: one GPU per slot
            return fn(tensor.at_degree(inst, 1), opts)
        return replace(res, wall_s=time.perf_counter() - start)
    return solve


def over_cases(fn: SolverFn, inst: Instance, opts: SolveOptions, cases: list[Case], key: str,
               every: bool = True, refine: float = 0.0) -> SolverResult:
    """``fn`` on each case on its share of the time left, in proportion to its devices
    (a degree of few groups needs less search than one of many GPUs; choices share
    equally); ``every``: the cases are all there are (else no proof of the whole).
    ``refine`` (a heuristic's): the share of the time kept from the first pass and
    given, after it, to the case with the best plan, warm-started from that plan."""
    start = time.perf_counter()
    runs: list[tuple[Case, SolverResult]] = []
    sizes = [c.inst.n for c in cases]
    first = opts.time_limit_s * (1.0 - refine) if len(cases) > 1 else opts.time_limit_s
    for i, case in enumerate(cases):
        left = opts.time_limit_s - (time.perf_counter() - start)
        # the least a case took so far is what the next one needs at least (a first
        # plan: at 4,096 GPUs one DT-FM evaluation takes a second); past the limit
        # the cases not started would each overrun it (issue 39)
        if runs and left < min(r.wall_s for _, r in runs):
            break
        part = max(first - (opts.time_limit_s - left), 0.0) * sizes[i] / sum(sizes[i:])
        share = replace(opts, time_limit_s=max(part, 0.01), hint=case.own(opts.hint))
        try:
            runs.append((case, fn(case.inst, share)))
        except KeyboardInterrupt:
            if not runs:
                raise
            break           # Ctrl-C: the best of the cases solved so far
        if runs[-1][1].stats.get("interrupted"):
            break           # the solver caught Ctrl-C itself and returned its best
    else:
        runs = _refine(fn, inst, opts, runs, start) if refine and len(cases) > 1 else _second_pass(fn, opts, runs, start)
    return _combine(inst, opts, runs, time.perf_counter() - start, key, every and len(runs) == len(cases))


def _second_pass(fn: SolverFn, opts: SolveOptions, runs: list, start: float) -> list:
    """The time the cases left unused (one proved infeasible in a second, say) goes to
    the open case with the best plan, warm-started from it: an exact solver's shares are
    set before it knows which cases are quick."""
    left = opts.time_limit_s - (time.perf_counter() - start)
    open_ = [i for i, (_, r) in enumerate(runs) if str(r.status) == Status.TIME_LIMIT and r.objective_value is not None]
    if not open_ or left < max(1.0, 0.1 * opts.time_limit_s):
        return runs
    i = min(open_, key=lambda i: runs[i][1].objective_value)
    case, first = runs[i]
    again = fn(case.inst, replace(opts, time_limit_s=left, hint=first.plan))
    bounds = [b for b in (first.best_bound, again.best_bound) if b is not None]
    better = again.objective_value is not None and (again.objective_value <= first.objective_value
                                                    or str(again.status) == Status.OPTIMAL)
    merged = replace(again if better else first, wall_s=first.wall_s + again.wall_s,
                     status=again.status if str(again.status) == Status.OPTIMAL else first.status,
                     best_bound=max(bounds) if bounds else None)
    return runs[:i] + [(case, merged)] + runs[i + 1:]


def _refine(fn: SolverFn, inst: Instance, opts: SolveOptions, runs: list, start: float) -> list:
    """The time kept back goes to the case whose plan is best (by the objective), its
    search warm-started from that plan; the better of its two runs stands for it."""
    left = opts.time_limit_s - (time.perf_counter() - start)
    keys = [(_key(inst, res), i) for i, (_, res) in enumerate(runs)]
    scored = [(k, i) for k, i in keys if k is not None]
    if not scored or left < min(res.wall_s for _, res in runs):
        return runs
    i = min(scored)[1]
    case, first = runs[i]
    try:
        again = fn(case.inst, replace(opts, time_limit_s=left, hint=first.plan))
    except KeyboardInterrupt:
        return runs             # Ctrl-C: the first pass's plans stand
    k = _key(inst, again)
    keep = again if k is not None and k <= _key(inst, first) else first
    merged = replace(keep, wall_s=first.wall_s + again.wall_s, stats=dict(keep.stats, refined=True))
    return runs[:i] + [(case, merged)] + runs[i + 1:]


def _key(inst: Instance, res: SolverResult) -> tuple[float, ...] | None:
    """A result's objective key (lower is better), None without an acceptable plan."""
    if res.plan is None or res.evaluation is None or not res.evaluation.acceptable:
        return None
    return tuple(float(v) for v in objmod.of(inst.objective, res.evaluation))


def _combine(inst: Instance, opts: SolveOptions, runs: list, wall: float, key: str, complete: bool) -> SolverResult:
    obj = inst.objective
    best, best_key = None, None
    for case, res in runs:
        k = _key(inst, res)
        if k is not None and objmod.better(obj, k, best_key):
            best, best_key = (case, res), k
    statuses = [str(res.status) for _, res in runs]
    first = runs[0][1]
    proved = complete and all(s in (Status.OPTIMAL, Status.INFEASIBLE) for s in statuses)
    if best is None:
        status = Status.INFEASIBLE if proved else Status.UNKNOWN
    elif proved:
        status = Status.OPTIMAL
    elif str(best[1].status) in (Status.OPTIMAL, Status.TIME_LIMIT, Status.FEASIBLE):
        # an exact solver that did not prove every case: at its limit, unless every
        # run ended before it with shapes open (formulations/model.md §5)
        status = Status.TIME_LIMIT if not complete or Status.TIME_LIMIT in statuses else Status.FEASIBLE
    else:
        status = str(best[1].status)    # a heuristic's or a baseline's own
    # a bound holds for every plan only if every case has one
    bounds = [res.best_bound if res.best_bound is not None else (res.objective_value if str(res.status) == Status.OPTIMAL
                                                                else None)
              for _, res in runs if str(res.status) != Status.INFEASIBLE]
    bound = None if not complete or not bounds or any(v is None for v in bounds) else min(bounds)
    table = [{**case.label, "status": str(res.status), "objective_value": res.objective_value,
              "wall_s": round(res.wall_s, 3)} for case, res in runs]
    if best is None:
        return replace(first, status=status, plan=None, evaluation=None, objective_value=None, best_bound=None,
                       wall_s=wall, settings=opts.settings(), stats={key: table}, pareto=[])
    case, res = best
    plan = case.tag(res.plan)
    front = []
    for cs, rs in runs:
        front += [replace(p, plan=cs.tag(p.plan), evaluation=evaluate(inst, cs.tag(p.plan)))
                  for p in rs.pareto if p.plan is not None]
    if front:
        # the front's own pair of metrics (time and energy unless the run asked for another)
        a, b = (objmod.METRIC[m] for m in opts.extra.get("front", objmod.DEFAULT_FRONT))
        keep = pareto_filter([(getattr(p.evaluation, a), getattr(p.evaluation, b)) for p in front])
        front = [front[i] for i in keep]
    stats: dict[str, Any] = dict(res.stats, **{key: table})
    return replace(res, status=status, plan=plan, evaluation=evaluate(inst, plan), best_bound=bound,
                   wall_s=wall, settings=opts.settings(), stats=stats, pareto=front)
