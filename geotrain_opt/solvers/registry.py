"""The solver registry: every solver's name, where its code lives, what it can do
and which options it takes. Report grouping, the Pareto dispatch, the CLI's checks
and the option checker all read it, so a new solver is its file plus one entry
(or one ``@register`` line above its ``solve`` in the file itself).

Built-in solvers are named by module path and imported on first use, so that
``evaluate`` and ``validate`` never pay for importing OR-Tools or DEAP.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Callable

from geotrain_opt.errors import SolverError
from geotrain_opt.solvers.base import SolverFn
from geotrain_opt.solvers.options import Options

KINDS = ("exact", "heuristic", "baseline")
# how a solver yields a time-energy front: "epsilon", an ε-constraint walk of proven
# optima (fronts.py); "native", the solver returns one itself when run with pareto=True
PARETO_MODES = ("epsilon", "native")
TP_MODES = (True, False, "node", "every")


@dataclass(frozen=True)
class SolverSpec:
    name: str
    target: str | Callable        # "module" (its ``solve``), "module:function", or the function
    kind: str                     # exact: proves optima; heuristic: ours; baseline: to compare with
    pareto: str | None = None     # one of PARETO_MODES, or no front
    certify: bool = False         # can re-prove its claim with a second engine (--certify)
    # its typed options (options.py); None: options not checked (as register's default)
    options: type[Options] | None = None
    # searches micro-batch size and recomputation (§11) itself; else ``get`` runs it per choice
    choices: bool = False
    # plans tensor-parallel groups (§14): ``get`` runs it at every degree (a heuristic or a
    # baseline at the degrees its greedy plans rank best); "every": at every degree, none
    # raced out; False: at degree 1 only; "node": at the largest degree the instance
    # offers, Megatron-LM's classic layout
    tensor_parallel: bool | str = True

    def load(self) -> SolverFn:
        if callable(self.target):
            return self.target
        module, _, fn = self.target.partition(":")
        return getattr(import_module(module), fn or "solve")


_SPECS: dict[str, SolverSpec] = {}


def register(name: str, target: str | Callable | None = None, *, kind: str = "heuristic",
             pareto: str | None = None, certify: bool = False,
             options: type[Options] | None = None, choices: bool = False,
             tensor_parallel: bool | str = True) -> str | Callable:
    """Add (or replace) a solver. With ``target`` omitted it is a decorator:
    ``@register("mine", kind="baseline")`` above ``def solve(inst, opts)``.
    ``options``: the frozen :class:`~.options.Options` dataclass of what it takes
    in ``SolveOptions.extra`` (``None``: not checked). ``choices``: it searches the
    model's micro-batch sizes and recomputation itself (else ``get`` runs it per choice).
    ``tensor_parallel`` False: a planner without tensor parallelism (DT-FM's), run at
    degree 1 only; "node": a fixed rule, the largest degree (a whole node) first;
    "every": every degree searched, whatever its kind."""
    if kind not in KINDS:
        raise SolverError(f"register {name!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if options is not None and not (isinstance(options, type) and issubclass(options, Options)):
        raise SolverError(f"register {name!r}: options must be an Options dataclass (solvers/options.py), "
                          f"got {options!r}")
    if tensor_parallel not in TP_MODES:
        raise SolverError(f"register {name!r}: tensor_parallel must be True, False, 'node' or 'every', "
                          f"got {tensor_parallel!r}")
    if pareto is not None and pareto not in PARETO_MODES:
        raise SolverError(f"register {name!r}: pareto must be one of {', '.join(PARETO_MODES)} or None, got {pareto!r}")

    def add(fn: str | Callable) -> str | Callable:
        _SPECS[name] = SolverSpec(name, fn, kind, pareto, certify, options, choices, tensor_parallel)
        return fn

    if target is None:
        return add
    return add(target)


def spec(name: str) -> SolverSpec:
    if name not in _SPECS:
        raise SolverError(f"unknown solver {name!r} (known: {', '.join(_SPECS)})")
    return _SPECS[name]


def names(kind: str | None = None, *, pareto: bool = False, certify: bool = False) -> list[str]:
    """Registered solvers, in registration order; filtered by kind and capability."""
    return [s.name for s in _SPECS.values()
            if (kind is None or s.kind == kind) and (not pareto or s.pareto) and (not certify or s.certify)]


def get(name: str) -> SolverFn:
    """The solver, run at every tensor-parallel degree the instance offers and over
    the micro-batch sizes and recomputations it offers (choices.py; a plain call where
    it offers none, or where the solver searches them itself)."""
    from geotrain_opt.solvers.choices import at_degree_one, at_node_degree, over_choices, over_degrees
    s = spec(name)
    fn = s.load() if s.choices else over_choices(s.load())
    if s.tensor_parallel == "node":
        return at_node_degree(fn)
    if not s.tensor_parallel:
        return at_degree_one(fn)
    return over_degrees(fn, race=s.kind != "exact" and s.tensor_parallel != "every")
