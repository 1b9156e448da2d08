"""Genome of a plan and its batched fitness.

A genome is a permutation ``order`` of *all* devices plus (D, P), cuts and the
micro-batch split: ``grid[k][j] = order[k*P + j]`` and ``order[D*P:]`` are the
released devices. Every plan of formulations/model.md has such a genome, and every genome
decodes to a structurally valid plan, so operators never leave the search space;
only memory and the ε-limits can fail, and they are penalised, not forbidden.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import objective as objmod
from ...construct import split_micro_batches
from ...evaluator import BatchEvaluator
from ...instance import Instance
from ...plan import Plan

PENALTY = 1e12   # added to the primary objective of plans that break memory or a limit


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

    @property
    def grid(self) -> np.ndarray:
        return self.order[: self.D * self.P].reshape(self.D, self.P)

    def copy(self) -> "Genome":
        return Genome(self.D, self.P, self.order.copy(), self.cuts.copy(), self.mb.copy(),
                      self.key, self.te, self.feasible)

    def invalidate(self) -> None:
        self.key = self.te = None
        self.feasible = False

    def signature(self) -> tuple:
        return (self.D, self.P, self.grid.tobytes(), self.cuts.tobytes(), self.mb.tobytes())

    def to_plan(self, inst: Instance) -> Plan:
        return Plan.from_indices(inst.ids, self.grid, self.cuts, self.mb)

    @staticmethod
    def from_plan(inst: Instance, plan: Plan) -> "Genome":
        grid = plan.grid_indices(inst.index)
        used = grid.reshape(-1)
        free = np.ones(inst.n, dtype=bool)
        free[used] = False
        rest = np.flatnonzero(free).astype(np.int64)
        return Genome(plan.replicas, plan.stages, np.concatenate([used, rest]).astype(np.int64),
                      np.array(plan.cuts, dtype=np.int64), np.array(plan.micro_batches, dtype=np.int64))


def default_split(inst: Instance, D: int) -> np.ndarray:
    return np.array(split_micro_batches(inst.model.num_micro_batches, D), dtype=np.int64)


class Fitness:
    """Batched evaluation of genomes into lexicographic keys (counts evaluations)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.ev = BatchEvaluator(inst)
        self.obj = inst.objective
        self.evaluations = 0

    def keys_of(self, D: int, P: int, grids: np.ndarray, cuts: np.ndarray, mb: np.ndarray):
        """(primary, secondary, T, E, feasible) arrays for plans of one shape."""
        res = self.ev(grids, cuts, mb)
        self.evaluations += len(grids)
        T, E = res.time_s, res.energy_j
        p = np.asarray(objmod.primary(self.obj, T, E), dtype=float)
        s = np.asarray(objmod.secondary(self.obj, T, E), dtype=float)
        ok = res.acceptable
        if not ok.all():
            cap = self.ev.a.mem_cap[grids]
            over = np.maximum(res.memory / cap - 1.0, 0.0).max(axis=(1, 2))
            lim = 0.0
            if self.obj.max_time_s is not None:
                lim = lim + np.maximum(T / self.obj.max_time_s - 1.0, 0.0)
            if self.obj.max_energy_j is not None:
                lim = lim + np.maximum(E / self.obj.max_energy_j - 1.0, 0.0)
            bad = ~ok
            p = np.where(bad, PENALTY * (1.0 + over + lim) + p, p)
        return p, s, T, E, ok

    def __call__(self, genomes: list[Genome]) -> None:
        """Fill ``key``/``te``/``feasible`` of the genomes that lack them."""
        todo: dict[tuple[int, int], list[Genome]] = {}
        for g in genomes:
            if g.key is None:
                todo.setdefault((g.D, g.P), []).append(g)
        for (D, P), members in todo.items():
            grids = np.stack([m.grid for m in members])
            cuts = np.stack([m.cuts for m in members])
            mb = np.stack([m.mb for m in members])
            p, s, T, E, ok = self.keys_of(D, P, grids, cuts, mb)
            for i, m in enumerate(members):
                m.key = (float(p[i]), float(s[i]))
                m.te = (float(T[i]), float(E[i]))
                m.feasible = bool(ok[i])
