"""The micro-batch size and recomputation (formulations/model.md §11): a plan may
take any (micro_batch, recompute) the model offers. A choice changes M, every
stage's work, activations and boundary message, so each is a whole instance of its
own (:func:`variants`): the gene is the index of the choice (0: the model's own),
a genome is costed on its choice's instance, and genomes of one choice share a
batch. The exact driver and the bounds enumerate the variants outside the model,
as they enumerate (D, P)."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from geotrain_opt.construct.pieces import shape_ok, split_micro_batches
from geotrain_opt.cost import objective as objmod
from geotrain_opt.decisions.base import Decision

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance
    from geotrain_opt.problem.plan import Plan


def count(inst: "Instance") -> int:
    """How many (micro_batch, recompute) choices a plan may take (1 without §11)."""
    return len(inst.model.choices()) if inst.has_choices else 1


def variant(inst: "Instance", ch: int) -> "Instance":
    """The instance at choice ``ch`` (itself without choices): its M, work and memory."""
    return inst.variant(*inst.model.choices()[ch]) if inst.has_choices else inst


def variants(inst: "Instance") -> tuple[list[tuple[int, str]], list["Instance"]]:
    """Every choice and the instance at it (the model's own only, without §11)."""
    chosen = inst.model.choices() if inst.has_choices else [(inst.model.micro_batch, inst.model.recompute)]
    return chosen, [inst.variant(b, r) if inst.has_choices else inst for b, r in chosen]


def tag(inst: "Instance", plan: "Plan | None", b: int, r: str) -> "Plan | None":
    """The plan as a plan of ``inst``: its choice recorded where it is not the model's own."""
    if plan is None:
        return None
    m = inst.model
    return replace(plan, micro_batch=None if b == m.micro_batch else b,
                   recompute=None if r == m.recompute else r)


def even_split(inst: "Instance", D: int) -> np.ndarray:
    return np.array(split_micro_batches(inst.model.num_micro_batches, D), dtype=np.int64)


def other_choices(inst: "Instance", g: Any) -> list[int]:
    """The choices other than g's at which g's shape fits."""
    ch = g.genes["ch"]
    return [c for c in range(count(inst)) if c != ch and shape_ok(variant(inst, c), g.D, g.P)]


def at_choice(inst: "Instance", g: Any, c: int) -> Any:
    """g's devices and cuts at choice ``c``, with that choice's even split (a split
    must sum to its M); not yet evaluated."""
    child = g.copy()
    child.genes["ch"], child.mb = c, even_split(variant(inst, c), g.D)
    child.invalidate()
    return child


def mut_choice(inst: "Instance", g: Any, rng: np.random.Generator) -> Any:
    """Another micro-batch size or recomputation for the same devices and cuts."""
    others = other_choices(inst, g)
    return at_choice(inst, g, others[int(rng.integers(len(others)))]) if others else g


def choice_moves(fit: Any, g: Any, rng: np.random.Generator, stop=lambda: False) -> bool:
    """Every other micro-batch size and recomputation for the genome's devices and
    cuts, each with its even split; the best is kept. A smaller micro-batch means more
    of them (a shorter pipeline fill) and less activation memory, recomputation trades
    a third more compute for memory: which wins depends on the plan, so it is searched
    with it. Nothing to do (and no evaluation) where the model offers no choice."""
    if count(fit.inst) < 2 or stop():
        return False
    cands = [at_choice(fit.inst, g, c) for c in other_choices(fit.inst, g)]
    if not cands:
        return False
    fit([g])
    fit(cands)
    best = min(cands, key=lambda h: h.key)
    if not objmod.better(fit.obj, best.key, g.key):
        return False
    g.genes["ch"], g.mb, g.key, g.te, g.feasible = best.genes["ch"], best.mb, best.key, best.te, best.feasible
    return True


class Choices(Decision):
    name = "choice"
    gene = "ch"
    default = 0             # the model's own micro-batch size and recomputation
    mutations = {"choice": mut_choice}
    moves = {"choice": choice_moves}

    def active(self, inst: "Instance") -> bool:
        return count(inst) > 1

    def signature(self, g: Any) -> tuple:
        return (("choice", g.genes["ch"]),) if g.genes["ch"] else ()

    def from_plan(self, inst: "Instance", plan: "Plan") -> int:
        if not inst.has_choices:
            return 0
        m = inst.model
        return m.choices().index((plan.micro_batch or m.micro_batch, plan.recompute or m.recompute))

    def to_plan(self, inst: "Instance", g: Any, plan: "Plan") -> "Plan":
        return tag(inst, plan, *inst.model.choices()[g.genes["ch"]]) if inst.has_choices else plan

    def batch_key(self, g: Any) -> int:
        return g.genes["ch"]

    def arrays(self, genomes: list, grids: np.ndarray) -> dict[str, Any]:
        return {"ch": genomes[0].genes["ch"]}

    def instance(self, inst: "Instance", g: Any) -> "Instance":
        return variant(inst, g.genes["ch"])
