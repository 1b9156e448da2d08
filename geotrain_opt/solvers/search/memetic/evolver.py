"""One generation of an island: variation, local search, selection, restarts
around the elite after a stall."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from functools import partial
import numpy as np
from deap import base, tools
from geotrain_opt.cost import objective as objmod
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.options import MemeticOptions
from geotrain_opt.solvers.search.memetic.encoding import Genome
from geotrain_opt.solvers.search.memetic.parallel import _Parallel, _evaluate_here
from geotrain_opt.solvers.search.memetic.toolbox import _set_fitness, build_toolbox, random_genome
from geotrain_opt.problem.tolerances import TINY



@dataclass
class _Config:
    """What one generation of one island needs besides the instance (picklable:
    island workers in other processes receive it once)."""
    options: MemeticOptions          # patience resolved for the instance
    shapes: list[tuple[int, int, int]]        # (choice, D, P)
    default_mutations: tuple[str, ...] = ()     # the instance's (operators.mutation_names)

    @property
    def pareto(self) -> bool:
        return self.options.pareto

    @property
    def pop_size(self) -> int:
        return self.options.population

    @property
    def mut_names(self) -> list[str]:
        return list(self.options.mutations or self.default_mutations)


class _Evolver:
    """Evaluation, local search and one generation of an island, over one fitness."""

    def __init__(self, inst: Instance, cfg: _Config, seeds: list[Genome], fit: Fitness, stop,
                 parallel: "_Parallel | None" = None) -> None:
        self.inst, self.cfg, self.seeds, self.fit, self.stop, self.parallel = inst, cfg, seeds, fit, stop, parallel
        self.ls_time = 0.0
        self.ls_gain = 0.0

    def toolbox(self, isl: "_Island") -> base.Toolbox:
        if isl.tb is None:     # islands shipped to another process travel without theirs
            isl.tb = build_toolbox(self.inst, self.fit, isl.rng, self.cfg.options, self.stop, isl.rnd)
        return isl.tb

    def evaluate(self, genomes: list[Genome], tb: base.Toolbox) -> None:
        """DEAP's ``toolbox.map(toolbox.evaluate, ...)`` over batches: one batch here,
        four in the process pool when it pays (``parallel``, large batches)."""
        todo = [g for g in genomes if g.key is None]
        far = self.parallel is not None and len(todo) >= 64
        chunks = [todo[i::4] for i in range(4)] if far else [todo]
        if far or self.parallel is None:
            done = tb.map(tb.evaluate, chunks)
        else:
            done = map(partial(_evaluate_here, self.fit), chunks)
        for chunk, res in zip(chunks, done):
            for g, (k, te, ok) in zip(chunk, res):
                g.key, g.te, g.feasible = k, te, ok
        if far:
            self.fit.evaluations += len(todo)       # counted in the workers' own Fitness
        for g in genomes:
            _set_fitness(g, self.cfg.pareto)

    def improve(self, genomes: list[Genome], tb: base.Toolbox) -> None:
        t = time.perf_counter()
        for g in genomes:
            if self.stop():
                break
            before = g.key[0]
            tb.local_search(g)
            if before < 1e300 and g.key[0] < before:
                self.ls_gain += (before - g.key[0]) / max(abs(before), TINY)
            _set_fitness(g, self.cfg.pareto)
        self.ls_time += time.perf_counter() - t

    def start(self, rng: np.random.Generator, rnd: random.Random, tb: base.Toolbox,
              members: list[Genome]) -> "_Island":
        """Generation 0 of an island: the given members, random fill, local search."""
        cfg = self.cfg
        pop = [g.copy() for g in members]
        while len(pop) < cfg.pop_size:
            pop.append(random_genome(self.inst, rng, cfg.shapes))
        self.evaluate(pop, tb)
        pop = _unique_best(pop, max(cfg.pop_size, len(pop)), cfg.pareto, tb)
        if cfg.options.ls_rate > 0:
            self.improve(pop[: max(1, int(cfg.options.ls_rate * cfg.pop_size))], tb)
        pop = _unique_best(pop, cfg.pop_size, cfg.pareto, tb)
        best0 = min(pop, key=lambda g: g.key).copy()
        return _Island(rng, rnd, tb, pop, best0, best_at_restart=best0.key)

    def generation(self, isl: "_Island") -> None:
        """One generation of one island: restart if it stalled, then breed."""
        cfg, inst = self.cfg, self.inst
        rng_, tb_ = isl.rng, self.toolbox(isl)
        if isl.stall >= cfg.options.stall:
            # converged: restart around the elite instead of stopping
            isl.fruitless = 0 if _key_better_keys(inst, isl.best.key, isl.best_at_restart) else isl.fruitless + 1
            if cfg.options.patience is not None and isl.fruitless >= cfg.options.patience:
                isl.done = True
                return
            isl.best_at_restart = isl.best.key
            isl.restarts += 1
            isl.stall = 0
            isl.pop = _restart(isl.pop, isl.best, cfg.pop_size, inst, rng_, tb_, cfg.shapes, self.seeds,
                               cfg.mut_names)
            self.evaluate(isl.pop, tb_)
            if cfg.options.ls_rate > 0:
                self.improve(isl.pop[: max(1, int(cfg.options.ls_rate * cfg.pop_size))], tb_)
            isl.pop = _unique_best(isl.pop, cfg.pop_size, cfg.pareto, tb_)
        pop_ = isl.pop
        if cfg.pareto:   # NSGA-II: random mating, survival by non-domination and crowding
            parents = [pop_[int(i)] for i in rng_.integers(len(pop_), size=len(pop_))]
        else:
            parents = tb_.select(pop_, len(pop_))
        offspring = [p.copy() for p in parents]
        for i in range(0, len(offspring) - 1, 2):
            if rng_.random() < cfg.options.cxpb:
                offspring[i] = tb_.mate(offspring[i], offspring[i + 1])
        for i, child in enumerate(offspring):
            if rng_.random() < cfg.options.mutpb:
                name = cfg.mut_names[int(rng_.integers(len(cfg.mut_names)))]
                child = getattr(tb_, f"mutate_{name}")(child)
                child.invalidate()
                offspring[i] = child
            elif child.key is None:
                child.invalidate()
        self.evaluate(offspring, tb_)
        if cfg.options.ls_rate > 0:
            ranked = sorted(offspring, key=lambda g: g.key)
            k = max(1, int(cfg.options.ls_rate * len(offspring)))
            self.improve(ranked[: k // 2 + 1] + [ranked[int(i)] for i in rng_.choice(len(ranked), k // 2, replace=False)], tb_)
        isl.pop = _unique_best(pop_ + offspring, cfg.pop_size, cfg.pareto, tb_)
        cur = min(isl.pop, key=lambda g: g.key)
        if isl.best.key is None or _key_better(inst, cur, isl.best):
            isl.best, isl.stall = cur.copy(), 0
        else:
            isl.stall += 1


def _key_better(inst: Instance, a: Genome, b: Genome) -> bool:
    return _key_better_keys(inst, a.key, b.key)


def _key_better_keys(inst: Instance, a: tuple | None, b: tuple | None) -> bool:
    return a is not None and objmod.better(inst.objective, a, b)


def _restart(pop: list[Genome], best: Genome, size: int, inst: Instance, rng: np.random.Generator,
             tb: base.Toolbox, shapes: list[tuple[int, int, int]], seeds: list[Genome],
             mut_names: list[str]) -> list[Genome]:
    """Keep the elite (a tenth), add perturbed copies of it (several mutations
    each), structured seeds and random genomes: the diversity a converged
    population has lost, around what it has learned."""
    elite = [best.copy()] + [g.copy() for g in pop[: max(1, size // 10)]]
    out = list(elite)
    while len(out) < size // 2:
        child = elite[int(rng.integers(len(elite)))].copy()
        for _ in range(int(rng.integers(2, 6))):
            name = mut_names[int(rng.integers(len(mut_names)))]
            child = getattr(tb, f"mutate_{name}")(child)
        child.invalidate()
        out.append(child)
    pool = [s.copy() for s in seeds]
    rng.shuffle(pool)
    out += pool[: max(0, (size - len(out)) // 2)]
    while len(out) < size:
        out.append(random_genome(inst, rng, shapes))
    return out


def _unique_best(genomes: list[Genome], size: int, pareto: bool, tb: base.Toolbox) -> list[Genome]:
    seen: set = set()
    uniq = []
    for g in sorted(genomes, key=lambda g: g.key):
        sig = g.signature()
        if sig not in seen:
            seen.add(sig)
            uniq.append(g)
    if pareto:
        if len(uniq) <= size:
            return uniq
        chosen = tools.selNSGA2(uniq, size)
        return chosen
    return uniq[:size]


@dataclass
class _Island:
    """One population of the island model (the single-population solver is island 0)."""
    rng: np.random.Generator
    rnd: random.Random          # selection's stream: an island's run depends on its own state only
    tb: base.Toolbox | None
    pop: list[Genome]
    best: Genome
    stall: int = 0
    fruitless: int = 0
    restarts: int = 0
    done: bool = False
    best_at_restart: tuple | None = None
