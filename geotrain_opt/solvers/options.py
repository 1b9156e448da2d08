"""Typed solver options: one frozen dataclass per solver family.

``SolveOptions.extra`` is the options as a user writes them (keyword arguments of
``gt.solve``, ``extra:`` in a bench suite, CLI flags); ``Cls.parse(solver, extra)``
turns them into the solver's dataclass and is the one place they are checked: an
unknown key, a wrong type, a value out of range or not among the choices is a
one-line :class:`SolverError` naming the solver and the option. The CLI derives
its solver flags from the same fields (``cli_fields``), so a new option is one
field here and nothing else.
"""
from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Mapping, TypeVar

from geotrain_opt.errors import SolverError

O = TypeVar("O", bound="Options")


def option(default: Any, help: str, *, choices: tuple | str | None = None, lo: float | None = None,
           hi: float | None = None, cli: bool = True, metavar: str | None = None) -> Any:
    """A field with what checking and the CLI need: ``choices`` (a tuple, or the name
    of an operator table read lazily, for list options each item), closed range
    ``[lo, hi]``, ``cli=False`` for options set by the program itself."""
    meta = {"help": help, "choices": choices, "lo": lo, "hi": hi, "cli": cli, "metavar": metavar}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable option defaults: use a tuple")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Options:
    """Base of every solver's options; no fields of its own."""

    @classmethod
    def parse(cls: type[O], solver: str, extra: Mapping[str, Any] | "Options" | None) -> O:
        """The solver's typed options from the user's mapping (checked), or as given."""
        if isinstance(extra, cls):
            return extra
        if isinstance(extra, Options):
            extra = extra.to_dict()
        extra = dict(extra or {})
        spec = {f.name: f for f in fields(cls)}
        unknown = sorted(set(extra) - set(spec))
        if unknown:
            raise SolverError(f"{solver}: unknown option {unknown[0]!r} "
                              f"(its options: {', '.join(sorted(spec)) or 'none'})")
        hints = typing.get_type_hints(cls)
        values = {}
        for key, value in extra.items():
            values[key] = _checked(solver, key, value, hints[key], spec[key].metadata)
            if isinstance(values[key], tuple) and not values[key] and spec[key].default != ():
                # an empty list would switch the operator family off: ls_rate 0 is how
                raise SolverError(f"{solver}: option {key!r} must list at least one value")
        made = cls(**values)
        made._check(solver)
        return made

    def _check(self, solver: str) -> None:
        """Checks across fields or on a value's shape (one-line SolverError)."""

    def to_dict(self, *, only_set: bool = True) -> dict[str, Any]:
        """The options as a user would write them (``only_set``: those not at their default)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if only_set and f.default is not MISSING and v == f.default:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    def but(self: O, **changes: Any) -> O:
        from dataclasses import replace
        return replace(self, **changes)


# ------------------------------------------------------------------ checking
def kind_of(hint: Any) -> tuple[tuple[type, ...], bool, type | None]:
    """(accepted scalar types, None allowed, item type of a sequence option or None)."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        scalar, _, item = kind_of(rest[0]) if len(rest) == 1 else (tuple(rest), False, None)
        return scalar, nullable, item
    if origin is tuple:
        return (list, tuple), False, args[0] if args else object
    if hint is float:
        return (int, float), False, None
    return (hint,), False, None


def _name(types_: tuple, nullable: bool, item: type | None) -> str:
    if item is not None:
        words = [f"a list of {item.__name__}"]
    else:
        words = ["number" if t is float else t.__name__ for t in types_ if t is not int or float not in types_]
    return " or ".join(words + (["null"] if nullable else []))


def _is(value: Any, types_: tuple) -> bool:
    if isinstance(value, bool) and bool not in types_:
        return False                    # True is an int to Python, not to a user
    return isinstance(value, types_)


def _checked(solver: str, key: str, value: Any, hint: Any, meta: Mapping[str, Any]) -> Any:
    types_, nullable, item = kind_of(hint)
    where = f"{solver}: option {key!r}"
    if value is None:
        if nullable:
            return None
        raise SolverError(f"{where} must be {_name(types_, nullable, item)}, got None")
    if not _is(value, types_) or (item is not None and not all(_is(v, (item,)) for v in value)):
        raise SolverError(f"{where} must be {_name(types_, nullable, item)}, got {value!r}")
    items = tuple(value) if item is not None else (value,)
    choices = choice_values(meta.get("choices"))
    for v in items:
        if choices is not None and v not in choices:
            raise SolverError(f"{where}: unknown value {v!r} (one of {', '.join(map(str, choices))})")
        lo, hi = meta.get("lo"), meta.get("hi")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if v != v or (lo is not None and v < lo) or (hi is not None and v > hi):
                rng = f"in [{lo:g}, {hi:g}]" if lo is not None and hi is not None else \
                    f">= {lo:g}" if lo is not None else f"<= {hi:g}"
                raise SolverError(f"{where} must be {rng}, got {v!r}")
    return tuple(value) if item is not None else value


def choice_values(choices: tuple | str | None) -> tuple | None:
    """A field's allowed values; a string names an operator table of the memetic
    solver, read on first use (so checking options never imports DEAP early)."""
    if choices is None or isinstance(choices, tuple):
        return choices
    from geotrain_opt.solvers.search.memetic.local_search import LOCAL_SEARCHES
    from geotrain_opt.solvers.search.memetic.operators import CROSSOVERS, MUTATIONS
    return tuple({"crossovers": CROSSOVERS, "mutations": MUTATIONS, "local_searches": LOCAL_SEARCHES}[choices])


def cli_fields(classes: typing.Iterable[type[Options]]) -> dict[str, tuple[Any, Any, Mapping[str, Any]]]:
    """Option name -> (type hint, a default of one solver, metadata), over the given
    classes, for options a user sets on the command line (``cli=True``)."""
    out: dict[str, tuple[Any, Any, Mapping[str, Any]]] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            if f.metadata.get("cli", True) and f.name not in out:
                out[f.name] = (hints[f.name], f.default, f.metadata)
    return out


# ------------------------------------------------------------------ the solvers' options
@dataclass(frozen=True)
class NoOptions(Options):
    """Constructive baselines: nothing to set."""


@dataclass(frozen=True)
class ChoiceOptions(Options):
    choice_search: str = option("joint", "micro-batch size and recomputation (model.md §11): searched jointly "
                                         "with the plan (exact: with the shapes; memetic: a gene), or one whole "
                                         "solve per choice on a share of the time", choices=("joint", "separate"))


@dataclass(frozen=True)
class ExactOptions(ChoiceOptions):
    exact_model: str = option("auto", "assign slots to devices, or to classes of interchangeable devices with "
                                      "their counts (auto: classes where there are fewer classes than devices)", choices=("auto", "devices", "classes"))


@dataclass(frozen=True)
class CpsatOptions(ExactOptions):
    cpsat_search: str = option("fixed", "CP-SAT's branching: the model's fixed order, or its own portfolio", choices=("fixed", "auto"))
    class_grid: str = option("auto", "before each open shape's model, the class-grid relaxation (proofs.md §9: "
                                     "rows of device classes, ring order free), where it applies; off: never",
                             choices=("auto", "off"))


@dataclass(frozen=True)
class MilpOptions(ExactOptions):
    # the engines PuLP finds installed are known only at run time: milp.backend_name checks
    milp_solver: str = option("auto", "MILP engine behind PuLP: auto (HiGHS where installed, else CBC), highs, "
                                      "cbc, or any engine PuLP finds installed (GUROBI, SCIP_CMD, CPLEX_CMD, ...)", metavar="NAME")


FRONT_METRICS = ("time", "energy", "cost", "carbon")


def _check_front(solver: str, front: tuple[str, ...]) -> None:
    if len(front) != 2 or front[0] == front[1]:
        raise SolverError(f"{solver}: option 'front' must be two different metrics, got {list(front)!r}")


@dataclass(frozen=True)
class BruteforceOptions(Options):
    pareto: bool = option(False, "return the Pareto front of every plan", cli=False)
    front: tuple[str, ...] = option(("time", "energy"), "the two metrics of the front", choices=FRONT_METRICS,
                                    cli=False)

    def _check(self, solver: str) -> None:
        _check_front(solver, self.front)


@dataclass(frozen=True)
class SearchOptions(Options):
    max_evaluations: int | None = option(None, "an evaluation budget, for comparisons at equal effort", lo=1)
    batch: int = option(256, "plans evaluated per batch (random-search 256, simulated-annealing 32)", lo=1)


@dataclass(frozen=True)
class AnnealingOptions(SearchOptions):
    batch: int = option(32, "plans evaluated per batch (random-search 256, simulated-annealing 32)", lo=1)


@dataclass(frozen=True)
class MemeticOptions(ChoiceOptions):
    population: int = option(40, "population size (memetic 40, dtfm 100)", lo=2, hi=100_000)
    generations: int | None = option(None, "generation limit (default: until the time limit)", lo=1)
    stall: int = option(60, "generations without improvement before a restart around the elite", lo=1)
    patience: int | None = option(None, "restarts in a row without improvement before stopping "
                                        "(default 8 up to 16 GPUs, else never)", lo=0)
    cxpb: float = option(0.7, "crossover probability", lo=0, hi=1)
    mutpb: float = option(0.6, "mutation probability", lo=0, hi=1)
    ls_rate: float = option(0.25, "share of offspring improved by local search (0: none)", lo=0, hi=1)
    mutations: tuple[str, ...] | None = option(None, "mutations to draw from (default all)",
                                               choices="mutations", metavar="NAME,...")
    crossover: str = option("replicas", "crossover operator", choices="crossovers")
    ls_moves: tuple[str, ...] = option(("region", "grid", "order", "cuts", "split", "clocks", "choice"),
                                       "local-search moves", choices="local_searches", metavar="NAME,...")
    islands: int = option(1, "populations evolving side by side with ring migration", lo=1, hi=1024)
    island_backend: str = option("inline", "where islands run: here in turn, a process pool, or Dask",
                                 choices=("inline", "processes", "dask"))
    dask: str | None = option(None, "Dask scheduler address or 'local' (for island_backend dask; the flag "
                                    "--dask sets both)",
                              metavar="ADDRESS")
    parallel: bool = option(False, "evaluate large populations in a process pool")
    migration_interval: int = option(10, "generations between migrations", lo=1)
    migrants: int = option(2, "genomes each island sends at a migration", lo=1)
    seeding: bool = option(True, "structured seeds with optimised cuts in generation 0")
    seed_solvers: tuple[str, ...] = option((), "also seed with these solvers' plans (e.g. dtfm,greedy), "
                                               "each on a tenth of the time limit", metavar="NAME,...")
    max_evaluations: int | None = option(None, "an evaluation budget, for comparisons at equal effort", lo=1)
    pareto: bool = option(False, "NSGA-II: return a Pareto front", cli=False)
    front: tuple[str, ...] = option(("time", "energy"), "the two metrics of the front", choices=FRONT_METRICS,
                                    cli=False)

    def _check(self, solver: str) -> None:
        _check_front(solver, self.front)
        # names of other solvers are checked against the registry by solvers.check_options
        if "memetic" in self.seed_solvers or "plain-ga" in self.seed_solvers:
            raise SolverError(f"{solver}: option 'seed_solvers': a memetic run cannot seed itself")



@dataclass(frozen=True)
class DtfmOptions(Options):
    population: int = option(100, "population size (memetic 40, dtfm 100)", lo=2, hi=100_000)
    offspring: int = option(4900, "GCMA offspring per shape", lo=1)
    shape: tuple[int, ...] | None = option(None, "one shape DxP instead of every shape that uses every GPU", metavar="DxP")
    dtfm_activation_gb: float | None = option(None, "activation message size in GB (default: from the model)",
                                              lo=0)
    dtfm_gradient_gb: float | None = option(None, "gradient message size in GB (default: from the model)", lo=0)

    def _check(self, solver: str) -> None:
        if self.shape is not None and (len(self.shape) != 2 or min(self.shape) < 1):
            raise SolverError(f"{solver}: option 'shape' must be [D, P] with D, P >= 1, got {list(self.shape)!r}")
