"""Solver registry: every entry takes (instance, SolveOptions) and returns a SolverResult."""
from __future__ import annotations

from importlib import import_module

from ..errors import SolverError
from .base import SolveOptions, SolverFn

# name -> "module" holding ``solve`` or "module:function"; imported lazily so that
# `evaluate` never pays for OR-Tools.
_REGISTRY = {
    "bruteforce": "geotrain_opt.solvers.bruteforce",
    "cpsat": "geotrain_opt.solvers.cpsat",
    "milp": "geotrain_opt.solvers.milp",
    "memetic": "geotrain_opt.solvers.memetic",
    "random-search": "geotrain_opt.solvers.random_search",
    "simulated-annealing": "geotrain_opt.solvers.annealing",
    "plain-ga": "geotrain_opt.solvers.plain_ga",
    "megatron-uniform": "geotrain_opt.solvers.baselines:megatron_uniform",
    "proportional": "geotrain_opt.solvers.baselines:proportional",
    "greedy": "geotrain_opt.solvers.baselines:greedy",
    "dtfm": "geotrain_opt.solvers.dtfm",
}
_MEMETIC = frozenset({"population", "generations", "stall", "patience", "cxpb", "mutpb", "ls_rate", "mutations",
                      "crossover", "ls_moves", "islands", "island_backend", "dask", "parallel", "migration_interval",
                      "migrants", "seeding", "seed_solvers", "max_evaluations", "pareto"})
# name -> the keys its ``SolveOptions.extra`` understands: a typo is an error, not ignored
OPTIONS: dict[str, frozenset[str] | None] = {
    "bruteforce": frozenset({"pareto"}),
    "cpsat": frozenset({"cpsat_search"}),
    "milp": frozenset({"milp_solver"}),
    "memetic": _MEMETIC,
    "plain-ga": _MEMETIC,
    "random-search": frozenset({"max_evaluations", "batch"}),
    "simulated-annealing": frozenset({"max_evaluations", "batch"}),
    "megatron-uniform": frozenset(),
    "proportional": frozenset(),
    "greedy": frozenset(),
    "dtfm": frozenset({"population", "offspring", "shape", "dtfm_activation_gb", "dtfm_gradient_gb"}),
}
BASELINES = ("dtfm", "megatron-uniform", "proportional", "greedy", "random-search", "simulated-annealing", "plain-ga")
EXACT = ("bruteforce", "cpsat", "milp")


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> SolverFn:
    if name not in _REGISTRY:
        raise SolverError(f"unknown solver {name!r} (known: {', '.join(_REGISTRY)})")
    module, _, fn = _REGISTRY[name].partition(":")
    return getattr(import_module(module), fn or "solve")


def register(name: str, module: str, options: frozenset[str] | None = None) -> None:
    """Add a solver; ``options``: the extra keys it takes (``None``: not checked)."""
    _REGISTRY[name] = module
    OPTIONS[name] = options


def check_options(name: str, extra: dict) -> None:
    """One-line error for an option the solver does not take (a typo would otherwise be ignored)."""
    get(name)
    known = OPTIONS.get(name)
    if known is None:
        return
    bad = sorted(set(extra) - known)
    if bad:
        raise SolverError(f"{name}: unknown option {bad[0]!r} (its options: {', '.join(sorted(known)) or 'none'})")


__all__ = ["BASELINES", "EXACT", "OPTIONS", "SolveOptions", "check_options", "get", "names", "register"]
