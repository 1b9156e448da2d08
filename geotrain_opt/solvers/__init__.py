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
# An option's kind: the Python types it takes, and for a choice its allowed values.
_INT, _NUM, _BOOL, _STR, _LIST = (int,), (int, float), (bool,), (str,), (list, tuple)
_MEMETIC: dict[str, tuple] = {
    "population": _INT, "generations": _INT, "stall": _INT, "patience": _INT + (type(None),),
    "cxpb": _NUM, "mutpb": _NUM, "ls_rate": _NUM, "mutations": _LIST, "crossover": _STR, "ls_moves": _LIST,
    "islands": _INT, "island_backend": _STR, "dask": _STR, "parallel": _BOOL, "migration_interval": _INT,
    "migrants": _INT, "seeding": _BOOL, "seed_solvers": _LIST, "max_evaluations": _INT, "pareto": _BOOL}
_SEARCH = {"max_evaluations": _INT, "batch": _INT}
# name -> the keys its ``SolveOptions.extra`` understands, with their types: a typo
# or a wrong type is a one-line error, not ignored (None: not checked)
OPTIONS: dict[str, dict[str, tuple] | None] = {
    "bruteforce": {"pareto": _BOOL},
    "cpsat": {"cpsat_search": _STR, "exact_model": _STR},
    "milp": {"milp_solver": _STR, "exact_model": _STR},
    "memetic": _MEMETIC,
    "plain-ga": _MEMETIC,
    "random-search": _SEARCH,
    "simulated-annealing": _SEARCH,
    "megatron-uniform": {},
    "proportional": {},
    "greedy": {},
    "dtfm": {"population": _INT, "offspring": _INT, "shape": _LIST, "dtfm_activation_gb": _NUM,
             "dtfm_gradient_gb": _NUM},
}
_CHOICES = {"island_backend": ("inline", "processes", "dask"), "cpsat_search": ("fixed", "auto"),
            "exact_model": ("auto", "devices", "classes"),
            "crossover": None, "mutations": None, "ls_moves": None}
BASELINES = ("dtfm", "megatron-uniform", "proportional", "greedy", "random-search", "simulated-annealing", "plain-ga")
EXACT = ("bruteforce", "cpsat", "milp")


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> SolverFn:
    if name not in _REGISTRY:
        raise SolverError(f"unknown solver {name!r} (known: {', '.join(_REGISTRY)})")
    module, _, fn = _REGISTRY[name].partition(":")
    return getattr(import_module(module), fn or "solve")


def register(name: str, module: str, options: dict[str, tuple] | None = None) -> None:
    """Add a solver; ``options``: the extra keys it takes and their types (``None``: not checked)."""
    _REGISTRY[name] = module
    OPTIONS[name] = options


def check_options(name: str, extra: dict) -> None:
    """One-line error for an option the solver does not take, or of the wrong type
    (a typo would otherwise be ignored, a string would fail deep inside the solver)."""
    get(name)
    known = OPTIONS.get(name)
    if known is None:
        return
    bad = sorted(set(extra) - set(known))
    if bad:
        raise SolverError(f"{name}: unknown option {bad[0]!r} (its options: {', '.join(sorted(known)) or 'none'})")
    for key, value in extra.items():
        types = known[key]
        if isinstance(value, bool) and bool not in types:
            ok = False                      # True is an int to Python, not to a user
        else:
            ok = isinstance(value, types)
        if not ok:
            want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise SolverError(f"{name}: option {key!r} must be {want}, got {value!r}")
        choices = _choice_values(key)
        values = value if isinstance(value, (list, tuple)) and key in ("mutations", "ls_moves") else [value]
        if choices is not None:
            for v in values:
                if v not in choices:
                    raise SolverError(f"{name}: option {key!r}: unknown value {v!r} (one of {', '.join(map(str, choices))})")


def _choice_values(key: str) -> tuple | None:
    if key not in _CHOICES:
        return None
    if _CHOICES[key] is not None:
        return _CHOICES[key]
    # registered operators: read from the memetic solver's own tables
    from .memetic.local_search import LOCAL_SEARCHES as MOVES
    from .memetic.operators import CROSSOVERS, MUTATIONS
    return tuple({"crossover": CROSSOVERS, "mutations": MUTATIONS, "ls_moves": MOVES}[key])


__all__ = ["BASELINES", "EXACT", "OPTIONS", "SolveOptions", "check_options", "get", "names", "register"]
