"""Plan decisions beyond grid, cuts and split, each declared once (``base.Decision``):
its gene, operators, local-search moves, batched arrays, model and bound hooks.

``DECISIONS`` is the registry the generic code reads (the genome, the batched
fitness, the memetic toolbox and local search); a new decision is one module here
and one entry below (docs/developers.md, "Add a decision")."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from geotrain_opt.decisions.base import Decision
from geotrain_opt.decisions.choices import Choices
from geotrain_opt.decisions.clocks import Clocks

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance

# in this order: a genome's signature and a plan's fields are written in it
DECISIONS: tuple[Decision, ...] = (Clocks(), Choices())


def mutations() -> dict[str, Callable]:
    """Every decision's mutations by name."""
    return {name: fn for d in DECISIONS for name, fn in d.mutations.items()}


def moves() -> dict[str, Callable]:
    """Every decision's local-search moves by name."""
    return {name: fn for d in DECISIONS for name, fn in d.moves.items()}


def idle_operators(inst: "Instance") -> set[str]:
    """The mutations and moves of the decisions this instance does not offer."""
    return {name for d in DECISIONS if not d.active(inst) for name in (*d.mutations, *d.moves)}


def defaults() -> dict[str, Any]:
    """Every gene at its default: a plan that leaves every decision at the instance's own."""
    return {d.gene: d.default for d in DECISIONS}


__all__ = ["DECISIONS", "Choices", "Clocks", "Decision", "defaults", "idle_operators", "moves", "mutations"]
