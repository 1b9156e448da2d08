"""Micro-batch size and recomputation (formulations/model.md §11; the decision:
``decisions/choices.py``) for a solver that does not search them itself: enumerated outside it as (D, P) is outside the exact model: the instance
at each (micro_batch, recompute) it offers is solved on a share of the time and the
best plan, tagged with its choice, is the result. A choice changes M, every stage's
work, activations and boundary message, so each is a whole instance of its own; the
few choices a model offers (two or three sizes, two modes) make this cheap, and each
solver keeps its own proof (an exact solver's result is optimal when every choice's is).
"""
from __future__ import annotations

import time
from dataclasses import replace
from functools import wraps
from typing import Any

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.cost.objective import pareto_filter
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.decisions.choices import tag
from geotrain_opt.solvers.base import SolveOptions, SolverFn
from geotrain_opt.solvers.result import Status


def over_choices(fn: SolverFn) -> SolverFn:
    """``fn`` on every (micro_batch, recompute) choice of the instance, best plan kept."""
    @wraps(fn)
    def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
        if not inst.has_choices:
            return fn(inst, opts)
        start = time.perf_counter()
        choices = inst.model.choices()
        runs: list[tuple[int, str, SolverResult]] = []
        for i, (b, r) in enumerate(choices):
            left = opts.time_limit_s - (time.perf_counter() - start)
            if left <= 0 and runs:
                break
            hint = opts.hint
            if hint is not None:
                hb = hint.micro_batch or inst.model.micro_batch
                hr = hint.recompute or inst.model.recompute
                hint = replace(hint, micro_batch=None, recompute=None) if (hb, hr) == (b, r) else None
            share = replace(opts, time_limit_s=max(left / (len(choices) - i), 0.01), hint=hint)
            try:
                runs.append((b, r, fn(inst.variant(b, r), share)))
            except KeyboardInterrupt:
                if not runs:
                    raise
                break           # Ctrl-C: the best of the choices solved so far
            if runs[-1][2].stats.get("interrupted"):
                break           # the solver caught Ctrl-C itself and returned its best
        return _combine(inst, opts, runs, time.perf_counter() - start)
    return solve


def _combine(inst: Instance, opts: SolveOptions, runs: list, wall: float) -> SolverResult:
    obj = inst.objective
    best, best_key = None, None
    for b, r, res in runs:
        if res.plan is None or res.evaluation is None or not res.evaluation.acceptable:
            continue
        k = tuple(float(v) for v in objmod.of(obj, res.evaluation))
        if objmod.better(obj, k, best_key):
            best, best_key = (b, r, res), k
    statuses = [str(res.status) for _, _, res in runs]
    first = runs[0][2]
    complete = len(runs) == len(inst.model.choices())
    proved = complete and all(s in (Status.OPTIMAL, Status.INFEASIBLE) for s in statuses)
    if best is None:
        status = Status.INFEASIBLE if proved else Status.UNKNOWN
    elif proved:
        status = Status.OPTIMAL
    elif str(best[2].status) in (Status.OPTIMAL, Status.TIME_LIMIT, Status.FEASIBLE):
        # an exact solver that did not prove every choice: at its limit, unless every
        # run ended before it with shapes open (formulations/model.md §5)
        status = Status.TIME_LIMIT if not complete or Status.TIME_LIMIT in statuses else Status.FEASIBLE
    else:
        status = str(best[2].status)    # a heuristic's or a baseline's own
    # a bound holds for every plan only if every choice has one
    bounds = [res.best_bound if res.best_bound is not None else (res.objective_value if str(res.status) == Status.OPTIMAL
                                                                else None)
              for _, _, res in runs if str(res.status) != Status.INFEASIBLE]
    bound = None if not complete or not bounds or any(v is None for v in bounds) else min(bounds)
    table = [{"micro_batch": b, "recompute": r, "status": str(res.status), "objective_value": res.objective_value,
              "wall_s": round(res.wall_s, 3)} for b, r, res in runs]
    if best is None:
        return replace(first, status=status, plan=None, evaluation=None, objective_value=None, best_bound=None,
                       wall_s=wall, settings=opts.settings(), stats={"choices": table}, pareto=[])
    b, r, res = best
    plan = tag(inst, res.plan, b, r)
    front = []
    for bb, rr, rs in runs:
        front += [replace(p, plan=tag(inst, p.plan, bb, rr), evaluation=evaluate(inst, tag(inst, p.plan, bb, rr)))
                  for p in rs.pareto if p.plan is not None]
    if front:
        # the front's own pair of metrics (time and energy unless the run asked for another)
        a, b = (objmod.METRIC[m] for m in opts.extra.get("front", objmod.DEFAULT_FRONT))
        keep = pareto_filter([(getattr(p.evaluation, a), getattr(p.evaluation, b)) for p in front])
        front = [front[i] for i in keep]
    stats: dict[str, Any] = dict(res.stats, choices=table)
    return replace(res, status=status, plan=plan, evaluation=evaluate(inst, plan), best_bound=bound,
                   wall_s=wall, settings=opts.settings(), stats=stats, pareto=front)

