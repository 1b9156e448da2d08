"""The solvers: every one takes (instance, SolveOptions) and returns a SolverResult.

The built-in entries of the registry (registry.py), each with its typed options
(options.py), and the option checker."""
from __future__ import annotations

from typing import Any, Mapping

from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.options import (AnnealingOptions, BruteforceOptions, CpsatOptions, DtfmOptions,
                                          ExactOptions, MemeticOptions, MilpOptions, NoOptions, Options,
                                          SearchOptions)
from geotrain_opt.solvers.registry import SolverSpec, get, names, register, spec

_S = "geotrain_opt.solvers."
register("bruteforce", _S + "exact.bruteforce", kind="exact", pareto="native", options=BruteforceOptions)
register("cpsat", _S + "exact.cpsat", kind="exact", pareto="epsilon", certify=True, options=CpsatOptions, choices=True)
register("milp", _S + "exact.milp", kind="exact", pareto="epsilon", certify=True, options=MilpOptions, choices=True)
register("memetic", _S + "search.memetic", kind="heuristic", pareto="native", options=MemeticOptions, choices=True)
register("random-search", _S + "search.random_search", kind="baseline", options=SearchOptions)
register("simulated-annealing", _S + "search.annealing", kind="baseline", options=AnnealingOptions)
register("plain-ga", _S + "search.plain_ga", kind="baseline", options=MemeticOptions, choices=True)
register("megatron-uniform", _S + "baselines.rules:megatron_uniform", kind="baseline", options=NoOptions,
         tensor_parallel="node")
register("proportional", _S + "baselines.rules:proportional", kind="baseline", options=NoOptions)
register("greedy", _S + "baselines.rules:greedy", kind="baseline", options=NoOptions)
register("dtfm", _S + "baselines.dtfm", kind="baseline", options=DtfmOptions, tensor_parallel=False)
register("sailor-like", _S + "baselines.sailor", kind="baseline", options=NoOptions, tensor_parallel="every")


def check_options(name: str, extra: Mapping[str, Any]) -> Options | None:
    """The solver's typed options, or a one-line error for an option it does not
    take, of the wrong type, out of range or not among the choices (a typo would
    otherwise be ignored, a string would fail deep inside the solver)."""
    cls = spec(name).options
    if cls is None:
        return None
    opts = cls.parse(name, extra)
    known = names()
    for other in getattr(opts, "seed_solvers", ()):    # options name other solvers: the registry knows them
        if other not in known:
            from geotrain_opt.errors import SolverError
            raise SolverError(f"{name}: option 'seed_solvers': unknown solver {other!r} (known: {', '.join(known)})")
    return opts


def build_options(solver: str, extra: Mapping[str, Any] | None = None, *, options: Options | None = None,
                  **fields: Any) -> SolveOptions:
    """The one way a run's options are made (the API, the CLI, the benchmark harness
    and the verifier): ``extra`` the solver's own options as the user wrote them (a
    typed ``options`` object, e.g. ``MemeticOptions(population=60)``, under them),
    checked here once; ``fields`` the common ones (time_limit_s, seed, workers, hint,
    progress, verbose)."""
    extra = dict(extra or {})
    if options is not None:
        if not isinstance(options, Options):
            from geotrain_opt.errors import SolverError
            raise SolverError(f"{solver}: options= must be a solvers.Options dataclass, got {type(options).__name__}")
        extra = {**options.to_dict(), **extra}
    typed = check_options(solver, extra)
    made = SolveOptions(**fields, extra=extra)
    if typed is not None:
        made._typed = (made.extra, typed)
    return made


def run(name: str, inst: Any, opts: SolveOptions, until: float | None = None, exportable: str | None = None,
        started: float | None = None) -> Any:
    """The one solve pipeline of the API and the CLI: the solver, then the instance's
    certified lower bound and the gap to it attached to the result (any solver), and
    the plan simulated (``stats["simulation"]``, with a warning where the simulator
    and the cost model differ by more than 10 %) when that is cheap. ``until`` (a
    ``time.perf_counter()`` instant): the whole command's end; the bound stops there
    and the simulation is skipped past it (the solver's own limit is the caller's).
    ``exportable`` (megatron, deepspeed, torch): the plan projected onto what that
    framework runs (``exportable.py``), before the bound is attached. ``started`` (a
    ``time.perf_counter()`` instant, default now): where the incumbent trajectory's
    clock starts (``stats["trajectory"]``, trace.py)."""
    from geotrain_opt.bounds import attach_bound
    from geotrain_opt.common.clock import Until
    from geotrain_opt.cost.simulate import simulation_check
    from geotrain_opt.solvers import trace
    # the trajectory from the command's start when the caller gave it (loading included)
    with trace.recording(started) as tr:
        res = get(name)(inst, opts)
    trace.attach(tr, res)      # the search's own: an exportable projection below may change the plan
    if exportable:
        import time
        from geotrain_opt.solvers.exportable import restrict
        # the command's end, or a tenth of the limit for the API (the grids it tries)
        res = restrict(inst, res, exportable, until if until is not None
                       else time.perf_counter() + max(1.0, 0.1 * opts.time_limit_s))
    late = None if until is None else Until(until)
    attach_bound(inst, res, late)
    if res.plan is not None and res.evaluation is not None and not (late and late()):
        # the analytic model checked against the schedule's semantics, where that is cheap
        sim = simulation_check(inst, res.plan, res.evaluation.time_s, stop=late)
        if sim is not None:
            res.stats["simulation"] = sim
    return res


def options_taken(name: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``extra`` that solver ``name`` takes (e.g. a second engine
    re-proving a claim gets the options the two engines share)."""
    cls = spec(name).options
    if cls is None:
        return dict(extra)
    from dataclasses import fields
    known = {f.name for f in fields(cls)}
    return {k: v for k, v in extra.items() if k in known}


__all__ = ["AnnealingOptions", "BruteforceOptions", "CpsatOptions", "DtfmOptions", "ExactOptions", "MemeticOptions",
           "MilpOptions", "NoOptions", "Options", "SearchOptions", "SolveOptions", "SolverSpec", "check_options",
           "build_options", "get", "names", "options_taken", "register", "run", "spec"]
