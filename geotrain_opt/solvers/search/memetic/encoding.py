"""Genome of a plan (its batched fitness: solvers/search/fitness.py).

A genome is a permutation ``order`` of *all* devices plus (D, P), cuts and the
micro-batch split: ``grid[k][j] = order[k*P + j]`` and ``order[D*P:]`` are the
released devices. Every plan of formulations/model.md has such a genome, and every genome
decodes to a structurally valid plan, so operators never leave the search space;
only memory and the ε-limits can fail, and they are penalised, not forbidden.

Every further decision (a device's clock, §10; the micro-batch size and
recomputation, §11) is a gene in ``genes``, declared by its
:class:`~geotrain_opt.decisions.base.Decision`: the genome copies, signs, reads and
writes its genes by asking the registry, never by name. Where the model offers
micro-batch choices, every cost of the genome is the cost of the plan at its choice
(:meth:`Genome.instance`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geotrain_opt.decisions import DECISIONS, defaults
from geotrain_opt.decisions.choices import even_split
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan


@dataclass
class Genome:
    D: int
    P: int
    order: np.ndarray          # permutation of range(n)
    cuts: np.ndarray           # (P+1,)
    mb: np.ndarray             # (D,)
    key: tuple[float, float] | None = None      # (primary, secondary), penalised
    te: tuple[float, float] | None = None       # raw (T, E)
    feasible: bool = False
    genes: dict[str, Any] = field(default_factory=defaults)     # one per decision (decisions.DECISIONS)

    @property
    def grid(self) -> np.ndarray:
        return self.order[: self.D * self.P].reshape(self.D, self.P)

    def inherit(self) -> dict[str, Any]:
        """Copies of this genome's genes, for a child made from it."""
        return {d.gene: d.copy(self.genes[d.gene]) for d in DECISIONS}

    def copy(self) -> "Genome":
        return Genome(self.D, self.P, self.order.copy(), self.cuts.copy(), self.mb.copy(),
                      self.key, self.te, self.feasible, self.inherit())

    def invalidate(self) -> None:
        self.key = self.te = None
        self.feasible = False

    def signature(self) -> tuple:
        sig = (self.D, self.P, self.grid.tobytes(), self.cuts.tobytes(), self.mb.tobytes())
        for d in DECISIONS:
            sig += d.signature(self)
        return sig

    def batch_key(self) -> tuple:
        """Genomes with equal keys are costed on one instance and evaluated in one batch."""
        return tuple(d.batch_key(self) for d in DECISIONS)

    def instance(self, inst: Instance) -> Instance:
        """The instance this genome's plan is costed on (its micro-batch choice's)."""
        for d in DECISIONS:
            inst = d.instance(inst, self)
        return inst

    def arrays(self, grids: np.ndarray) -> dict[str, Any]:
        """The decisions' arguments of ``Fitness.keys_of`` for candidate ``grids`` of
        this genome (each device keeps this genome's genes)."""
        out: dict[str, Any] = {}
        for d in DECISIONS:
            out.update(d.arrays([self], grids))
        return out

    def to_plan(self, inst: Instance) -> Plan:
        plan = Plan.from_indices(inst.ids, self.grid, self.cuts, self.mb)
        for d in DECISIONS:
            plan = d.to_plan(inst, self, plan)
        return plan

    @staticmethod
    def from_plan(inst: Instance, plan: Plan) -> "Genome":
        grid = plan.grid_indices(inst.index)
        used = grid.reshape(-1)
        free = np.ones(inst.n, dtype=bool)
        free[used] = False
        rest = np.flatnonzero(free).astype(np.int64)
        return Genome(plan.replicas, plan.stages, np.concatenate([used, rest]).astype(np.int64),
                      np.array(plan.cuts, dtype=np.int64), np.array(plan.micro_batches, dtype=np.int64),
                      genes={d.gene: d.from_plan(inst, plan) for d in DECISIONS})


def default_split(inst: Instance, D: int) -> np.ndarray:
    return even_split(inst, D)
