"""What a plan decision declares, once (the pymoo pattern: a variable type carries its
own sampling and variation, so a mixed problem is a list of variables).

The grid, the cuts and the split are the plan itself; every further decision (a
device's clock, the micro-batch size and recomputation, next the tensor-parallel
degree) is a :class:`Decision` in ``geotrain_opt.decisions.DECISIONS``, and the
generic code asks it instead of naming it:

- **encoded**: its gene on a genome (``gene``, ``default``, ``copy``,
  ``signature``), read from and written to a plan (``from_plan``, ``to_plan``);
- **varied**: its mutations and local-search moves by name (``mutations``,
  ``moves``), which the memetic toolbox and the local search register with theirs;
- **evaluated**: which genomes share one batch (``batch_key``), the arrays it adds
  to a batched evaluation (``arrays``) and the instance a genome's plan is costed
  on (``instance``); the cost term itself lives in ``cost/`` (model.md says how);
- **modelled and bounded**: hooks named on each decision (the exact model's units,
  the enumeration of the instance's variants, the bounds' frugal rates), called by
  ``solvers/exact`` and ``bounds``.

docs/developers.md lists the files a new decision touches.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:                     # pragma: no cover
    import numpy as np

    from geotrain_opt.problem.instance import Instance
    from geotrain_opt.problem.plan import Plan


class Decision:
    """A plan decision beyond grid, cuts and split; subclasses fill in each part."""

    name: str = ""                    # the decision's name (docs, option values)
    gene: str = ""                    # the key of its gene in ``Genome.genes``
    default: Any = None               # the gene where a plan leaves the decision at the instance's own
    # name -> fn(inst, genome, rng) -> genome: registered as ``mutate_<name>`` in the memetic toolbox
    mutations: dict[str, Callable] = {}
    # name -> fn(fit, genome, rng, stop) -> improved: neighbourhoods of the local search
    moves: dict[str, Callable] = {}

    def active(self, inst: "Instance") -> bool:
        """Does the instance offer this decision at all (else its operators are idle)?"""
        return False

    # ---- encoded
    def copy(self, value: Any) -> Any:
        return value

    def signature(self, genome: Any) -> tuple:
        """What this gene adds to a genome's signature (empty when at its default)."""
        return ()

    def from_plan(self, inst: "Instance", plan: "Plan") -> Any:
        return self.default

    def to_plan(self, inst: "Instance", genome: Any, plan: "Plan") -> "Plan":
        return plan

    # ---- evaluated
    def batch_key(self, genome: Any) -> Any:
        """Genomes evaluated in one batch share this (None: any may be batched together)."""
        return None

    def arrays(self, genomes: list, grids: "np.ndarray") -> dict[str, Any]:
        """Keyword arguments of ``Fitness.keys_of`` for ``grids`` (n, D, P) of these
        genomes (one genome for every grid, or one genome per grid)."""
        return {}

    def instance(self, inst: "Instance", genome: Any) -> "Instance":
        """The instance the genome's plan is costed on (itself unless the decision
        changes the model, as the micro-batch choice does)."""
        return inst
