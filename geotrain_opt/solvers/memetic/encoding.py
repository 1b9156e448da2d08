"""Genome of a plan (its batched fitness: solvers/fitness.py).

A genome is a permutation ``order`` of *all* devices plus (D, P), cuts and the
micro-batch split: ``grid[k][j] = order[k*P + j]`` and ``order[D*P:]`` are the
released devices. Every plan of formulations/model.md has such a genome, and every genome
decodes to a structurally valid plan, so operators never leave the search space;
only memory and the ε-limits can fail, and they are penalised, not forbidden.

Where the model offers micro-batch sizes or recomputation (formulations/model.md
§11), the gene ``ch`` indexes ``inst.model.choices()`` (0: the model's own): the
split then sums to that choice's M, and every cost of the genome is the cost of
the plan at that choice (:func:`variant`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...construct import split_micro_batches
from ...instance import Instance
from ...plan import Plan

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
    clk: np.ndarray | None = None               # (n,) clock level per device (§10); None: all full clock
    ch: int = 0                                 # index of the (micro_batch, recompute) choice (§11)

    @property
    def grid(self) -> np.ndarray:
        return self.order[: self.D * self.P].reshape(self.D, self.P)

    def copy(self) -> "Genome":
        return Genome(self.D, self.P, self.order.copy(), self.cuts.copy(), self.mb.copy(),
                      self.key, self.te, self.feasible, None if self.clk is None else self.clk.copy(), self.ch)

    def invalidate(self) -> None:
        self.key = self.te = None
        self.feasible = False

    def signature(self) -> tuple:
        sig = (self.D, self.P, self.grid.tobytes(), self.cuts.tobytes(), self.mb.tobytes())
        if self.clk is not None and self.clk[self.grid].any():
            sig += (self.clk[self.grid].tobytes(),)
        if self.ch:
            sig += (("choice", self.ch),)
        return sig

    def to_plan(self, inst: Instance) -> Plan:
        clocks = None
        if self.clk is not None:
            clocks = {inst.ids[g]: inst.devices[g].levels[int(self.clk[g])][0]
                      for g in self.grid.reshape(-1).tolist() if self.clk[g]}
        plan = Plan.from_indices(inst.ids, self.grid, self.cuts, self.mb, clocks)
        if inst.has_choices:
            from ..choices import tag
            plan = tag(inst, plan, *inst.model.choices()[self.ch])
        return plan

    @staticmethod
    def from_plan(inst: Instance, plan: Plan) -> "Genome":
        grid = plan.grid_indices(inst.index)
        used = grid.reshape(-1)
        free = np.ones(inst.n, dtype=bool)
        free[used] = False
        rest = np.flatnonzero(free).astype(np.int64)
        clk = None
        if plan.clocks:
            clk = np.zeros(inst.n, dtype=np.int64)
            for dev, f in plan.clocks:
                g = inst.index[dev]
                clk[g] = [lv[0] for lv in inst.devices[g].levels].index(f)
        ch = 0
        if inst.has_choices:
            m = inst.model
            ch = m.choices().index((plan.micro_batch or m.micro_batch, plan.recompute or m.recompute))
        return Genome(plan.replicas, plan.stages, np.concatenate([used, rest]).astype(np.int64),
                      np.array(plan.cuts, dtype=np.int64), np.array(plan.micro_batches, dtype=np.int64), clk=clk,
                      ch=ch)


def choice_count(inst: Instance) -> int:
    """How many (micro_batch, recompute) choices a genome may take (1 without §11)."""
    return len(inst.model.choices()) if inst.has_choices else 1


def variant(inst: Instance, ch: int) -> Instance:
    """The instance at choice ``ch`` (itself without choices): its M, work and memory."""
    return inst.variant(*inst.model.choices()[ch]) if inst.has_choices else inst


def default_split(inst: Instance, D: int) -> np.ndarray:
    return np.array(split_micro_batches(inst.model.num_micro_batches, D), dtype=np.int64)
