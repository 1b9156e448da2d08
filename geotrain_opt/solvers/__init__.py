"""The solvers: every one takes (instance, SolveOptions) and returns a SolverResult.

The built-in entries of the registry (registry.py) and the option checker."""
from __future__ import annotations

from ..errors import SolverError
from .base import SolveOptions
from .registry import SolverSpec, get, names, register, spec

# An option's kind: the Python types it takes, and for a choice its allowed values.
_INT, _NUM, _BOOL, _STR, _LIST = (int,), (int, float), (bool,), (str,), (list, tuple)
_MEMETIC: dict[str, tuple] = {
    "population": _INT, "generations": _INT, "stall": _INT, "patience": _INT + (type(None),),
    "cxpb": _NUM, "mutpb": _NUM, "ls_rate": _NUM, "mutations": _LIST, "crossover": _STR, "ls_moves": _LIST,
    "islands": _INT, "island_backend": _STR, "dask": _STR, "parallel": _BOOL, "migration_interval": _INT,
    "migrants": _INT, "seeding": _BOOL, "seed_solvers": _LIST, "max_evaluations": _INT, "pareto": _BOOL}
_SEARCH = {"max_evaluations": _INT, "batch": _INT}
_CHOICES = {"island_backend": ("inline", "processes", "dask"), "cpsat_search": ("fixed", "auto"),
            "exact_model": ("auto", "devices", "classes"),
            "crossover": None, "mutations": None, "ls_moves": None}

_S = "geotrain_opt.solvers."
register("bruteforce", _S + "bruteforce", kind="exact", pareto="native", options={"pareto": _BOOL})
register("cpsat", _S + "cpsat", kind="exact", pareto="epsilon", certify=True,
         options={"cpsat_search": _STR, "exact_model": _STR})
register("milp", _S + "milp", kind="exact", pareto="epsilon", certify=True,
         options={"milp_solver": _STR, "exact_model": _STR})
register("memetic", _S + "memetic", kind="heuristic", pareto="native", options=_MEMETIC)
register("random-search", _S + "random_search", kind="baseline", options=_SEARCH)
register("simulated-annealing", _S + "annealing", kind="baseline", options=_SEARCH)
register("plain-ga", _S + "plain_ga", kind="baseline", options=_MEMETIC)
register("megatron-uniform", _S + "baselines:megatron_uniform", kind="baseline", options={})
register("proportional", _S + "baselines:proportional", kind="baseline", options={})
register("greedy", _S + "baselines:greedy", kind="baseline", options={})
register("dtfm", _S + "dtfm", kind="baseline",
         options={"population": _INT, "offspring": _INT, "shape": _LIST, "dtfm_activation_gb": _NUM,
                  "dtfm_gradient_gb": _NUM})


def check_options(name: str, extra: dict) -> None:
    """One-line error for an option the solver does not take, or of the wrong type
    (a typo would otherwise be ignored, a string would fail deep inside the solver)."""
    known = spec(name).options
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


__all__ = ["SolveOptions", "SolverSpec", "check_options", "get", "names", "register", "spec"]
