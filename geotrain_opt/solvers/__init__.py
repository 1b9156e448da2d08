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
BASELINES = ("dtfm", "megatron-uniform", "proportional", "greedy", "random-search", "simulated-annealing", "plain-ga")
EXACT = ("bruteforce", "cpsat", "milp")


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> SolverFn:
    if name not in _REGISTRY:
        raise SolverError(f"unknown solver {name!r} (known: {', '.join(_REGISTRY)})")
    module, _, fn = _REGISTRY[name].partition(":")
    return getattr(import_module(module), fn or "solve")


def register(name: str, module: str) -> None:
    _REGISTRY[name] = module


__all__ = ["BASELINES", "EXACT", "SolveOptions", "get", "names", "register"]
