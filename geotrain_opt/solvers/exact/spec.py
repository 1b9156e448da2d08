"""What a back end implements (:class:`Backend`), how one shape's model is asked for
(:class:`BuildSpec`) and what a built model hands back (:class:`Shape`)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol




Terms = list[tuple[float, Any]]


def scaled(terms: Terms, s: float) -> Terms:
    """Every coefficient of ``terms`` times ``s``."""
    return [(c * s, v) for c, v in terms]


class Backend(Protocol):
    def boolean(self, name: str) -> Any: ...
    def integer(self, name: str, lo: int, hi: int) -> Any: ...
    def real(self, name: str, ub: float, unit: float) -> Any: ...
    def ge(self, lhs: Any, terms: Terms, const: float = 0.0, enforce: tuple = ()) -> None: ...
    def le(self, terms: Terms, rhs: float, unit: float, enforce: tuple = ()) -> None: ...
    def eq_int(self, terms: list[tuple[int, Any]], rhs: int) -> None: ...
    def minimize(self, terms: Terms, unit: float) -> None: ...
    def hint(self, var: Any, value: float) -> None: ...


@dataclass
class Shape:
    """Variables of a built (D, P) model, kept so a solution can be read back."""

    D: int
    P: int
    x: dict[tuple[int, int, int], Any]       # unit u (a device, or a class of them) at replica k, stage j
    n_layers: list[Any] | None               # identical layers: layers per stage
    y: dict[tuple[int, int], Any] | None     # per-layer overrides: layer l in stage j
    mb: list[Any] | None                     # free split: one-hot mu[k][v-1]
    T: Any
    E_terms: Terms
    obj_terms: Terms
    # the derived variables by name (t, lk, oc, tau, ring, PT, eb, om): read back by
    # the pinned-plan tests, which compare each with the evaluator's term
    vars: dict[str, Any] = field(default_factory=dict)
    # the devices behind each unit u of x: one device each in the per-device
    # model, a class of interchangeable devices in the class model (§3.7)
    units: list[list[int]] = field(default_factory=list)
    # the clock level of each unit (formulations/exact.md §3.8): a class at each of its clocks is one unit
    levels: list[int] = field(default_factory=list)
    # whether twin classes are ordered by first use (§3.7): hints must be too
    twins: bool = False


class BuildTimeout(Exception):
    """The time limit ended while a model was still being built."""


@dataclass(frozen=True)
class BuildSpec:
    """How to state one (D, P) model (everything but the instance and the shape).

    ``t_unit``/``e_unit``: the time and energy units (§5). ``cutoff``: only plans
    whose objective is at most this are wanted (pruning with an incumbent).
    ``objective``: overrides the instance's (the tie-break phase). ``time_cap``:
    extra T <= cap (tie-break, ε-sweeps); ``energy_cap``: a tighter energy limit.
    ``classes``: the class model (formulations/exact.md §3.7). ``stop``: polled
    while building (the model has O(D P n^2) terms, so building alone can outlast
    a time limit); when it returns True the build raises :class:`BuildTimeout`."""

    t_unit: float
    e_unit: float
    cutoff: float | None = None
    c_unit: float = 1.0          # dollars and grams (formulations/model.md §9), where modelled
    q_unit: float = 1.0
    objective: str | None = None
    time_cap: float | None = None
    energy_cap: float | None = None
    symmetry: bool = True
    classes: bool = False
    stop: Callable[[], bool] | None = None

    def scaled(self, factor: float) -> "BuildSpec":
        """The same spec with both units multiplied by ``factor``."""
        return replace(self, t_unit=self.t_unit * factor, e_unit=self.e_unit * factor,
                       c_unit=self.c_unit * factor, q_unit=self.q_unit * factor)

    def but(self, **changes: Any) -> "BuildSpec":
        return replace(self, **changes)
