"""Batched fitness of genomes: lexicographic (primary, secondary) keys with a
penalty for plans that break memory or an ε-limit, so searches move through
infeasible plans towards feasible ones. Shared by every search over genomes
(memetic, annealing, random search, the greedy baselines)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geotrain_opt.cost import objective as objmod
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.decisions import DECISIONS
from geotrain_opt.problem.instance import Instance

if TYPE_CHECKING:
    from geotrain_opt.solvers.search.memetic.encoding import Genome

PENALTY = 1e12   # added to the primary objective of plans that break memory or a limit


class Fitness:
    """Batched evaluation of genomes into lexicographic keys (counts evaluations)."""

    def __init__(self, inst: Instance, front: tuple[str, str] = objmod.DEFAULT_FRONT) -> None:
        self.inst = inst
        self.ev = BatchEvaluator(inst)
        # one evaluator per (micro_batch, recompute) choice a genome may take (§11; ch 0 is the model's own)
        # built on first use: at thousands of GPUs each costs a second, and a short run
        # may never reach every choice
        self._choices = [None] if not inst.has_choices else list(inst.model.choices())
        self._evs: dict[int, BatchEvaluator] = {} if inst.has_choices else {0: self.ev}
        self.obj = inst.objective
        self.evaluations = 0
        # the two metrics a genome's ``te`` holds (a Pareto run's pair; T and E by default)
        self.front = tuple(objmod.METRIC[m] for m in front)

    def evaluator(self, ch: int) -> BatchEvaluator:
        """The batched evaluator of choice ``ch`` (§11)."""
        ev = self._evs.get(ch)
        if ev is None:
            b, r = self._choices[ch]
            ev = self._evs[ch] = BatchEvaluator(self.inst.variant(b, r))
        return ev

    def keys_of(self, D: int, P: int, grids: np.ndarray, cuts: np.ndarray, mb: np.ndarray,
                clk: np.ndarray | None = None, ch: int = 0):
        """(primary, secondary, T, E, feasible) arrays for plans of one shape; ``clk``:
        each slot's clock level (§10), None for full clocks; ``ch``: the plans' choice of
        micro-batch size and recomputation (§11). (T and E are the front's two metrics
        where the Fitness was made for another pair.)"""
        res = self.evaluator(ch)(grids, cuts, mb, clk)
        self.evaluations += len(grids)
        T, E = res.time_s, res.energy_j
        p, s = (np.asarray(v, dtype=float) for v in objmod.of(self.obj, res))
        ok = res.acceptable
        if not ok.all():
            cap = self.ev.a.mem_cap[grids]
            over = np.maximum(res.memory / cap - 1.0, 0.0).max(axis=(1, 2))
            lim = 0.0
            for m, cap in objmod.limits(self.obj):        # how far past each ε-limit
                v = getattr(res, m.field)
                if v is not None:
                    lim = lim + np.maximum(v / cap - 1.0, 0.0)
            bad = ~ok
            p = np.where(bad, PENALTY * (1.0 + over + lim) + p, p)
        if self.front != ("time_s", "energy_j"):
            T, E = (getattr(res, m) for m in self.front)
        return p, s, T, E, ok

    def __call__(self, genomes: list[Genome]) -> None:
        """Fill ``key``/``te``/``feasible`` of the genomes that lack them."""
        # one batch per shape and instance (a micro-batch choice is an instance of its own)
        todo: dict[tuple, list[Genome]] = {}
        for g in genomes:
            if g.key is None:
                todo.setdefault((g.batch_key(), g.D, g.P), []).append(g)
        for (_key, D, P), members in todo.items():
            grids = np.stack([m.grid for m in members])
            cuts = np.stack([m.cuts for m in members])
            mb = np.stack([m.mb for m in members])
            genes: dict = {}
            for d in DECISIONS:         # each decision's arrays: clock levels, the choice
                genes.update(d.arrays(members, grids))
            p, s, T, E, ok = self.keys_of(D, P, grids, cuts, mb, **genes)
            for i, m in enumerate(members):
                m.key = (float(p[i]), float(s[i]))
                m.te = (float(T[i]), float(E[i]))
                m.feasible = bool(ok[i])
