"""Memetic algorithm on DEAP: specialised operators, local search, NSGA-II Pareto mode.

The toolbox holds every operator by name (``toolbox.mate``, ``toolbox.mutate_swap``,
``toolbox.local_search``, ``toolbox.select``, ``toolbox.map``/``toolbox.evaluate``),
so a variant swaps in one line, e.g. ``toolbox.register("mate", cx_stages, inst)``.
A run is an object (:class:`MemeticRun`: ``setup``, ``step``, ``result``) stopped
by the shared :class:`~..termination.Termination`; its history is DEAP's
``Logbook``, its NSGA-II archive DEAP's ``ParetoFront``. Settings:
:class:`~..options.MemeticOptions` (population 40, stall 60 generations before a
restart around the elite, patience 8 restarts without improvement up to 16 GPUs,
local search on a quarter of the offspring, islands with ring migration on this
process, a process pool or Dask: the same result on all three, since an island's
run depends on its own state only).
"""
from __future__ import annotations

import random
import time
from operator import attrgetter
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from deap import base, creator, tools

from ... import objective as objmod
from ...construct import feasible_shapes
from ...instance import Instance
from ...cluster import dask_client, worker_guard
from ...errors import SolverError
from ...objective import pareto_filter
from ...plan import Plan
from ...result import SolverResult
from ..base import SolveOptions, finish
from ..fitness import Fitness
from ..options import MemeticOptions
from ..termination import Termination
from .encoding import Genome, choice_count, default_split, variant
from .local_search import local_search, optimize_cuts
from .operators import CROSSOVERS, MUTATIONS, fresh_cuts, mutation_names
from ...heuristics import CONSTRUCTORS, component_plans, seed_shapes
from ...site_layouts import site_plans

if not hasattr(creator, "GeoKey"):
    # (primary, secondary) minimised lexicographically; NSGA-II mode stores (T, E)
    creator.create("GeoKey", base.Fitness, weights=(-1.0, -1.0))


def _set_fitness(g: Genome, pareto: bool) -> None:
    if not hasattr(g, "fitness"):
        g.fitness = creator.GeoKey()
    if pareto:
        pen = 0.0 if g.feasible else g.key[0]
        g.fitness.values = (g.te[0] + pen, g.te[1] + pen)
    else:
        g.fitness.values = g.key


def random_genome(inst: Instance, rng: np.random.Generator, shapes: list[tuple[int, int, int]]) -> Genome:
    """A random genome of one of the (choice, D, P) that fit."""
    ch, D, P = shapes[int(rng.integers(len(shapes)))]
    g = Genome(D, P, rng.permutation(inst.n).astype(np.int64), np.zeros(P + 1, dtype=np.int64),
               default_split(variant(inst, ch), D), ch=ch)
    g.cuts = fresh_cuts(inst, g)
    return g


def choice_shapes(inst: Instance) -> list[tuple[int, int, int]]:
    """Every (choice, D, P) whose shape fits at that micro-batch size and recomputation
    (§11; choice 0 only, the model's own, where it offers none)."""
    return [(ch, D, P) for ch in range(choice_count(inst)) for D, P in feasible_shapes(variant(inst, ch))]


def sel_tournament(individuals: list, k: int, tournsize: int, rnd: random.Random) -> list:
    """DEAP's ``tools.selTournament`` drawing from ``rnd`` instead of the global
    ``random`` module (the same draws for the same state): islands in Dask or
    pool workers must not share a stream with anything else in the process."""
    return [max((rnd.choice(individuals) for _ in range(tournsize)), key=attrgetter("fitness"))
            for _ in range(k)]


def build_toolbox(inst: Instance, fit: Fitness, rng: np.random.Generator, options: MemeticOptions,
                  stop=lambda: False, rnd: random.Random | None = None,
                  parallel: "_Parallel | None" = None) -> base.Toolbox:
    """Every operator by name, DEAP's way: ``mate``, ``mutate_<name>``,
    ``local_search``, ``select``, and ``map``/``evaluate`` (a batch of genomes to
    their (key, (T, E), feasible); ``map`` is a process pool's with ``parallel``)."""
    tb = base.Toolbox()
    tb.register("mate", CROSSOVERS[options.crossover], inst, rng=rng)
    for name, op in MUTATIONS.items():
        tb.register(f"mutate_{name}", op, inst, rng=rng)
    tb.register("local_search", local_search, fit, rng=rng, stop=stop, moves=tuple(options.ls_moves))
    if options.pareto:
        tb.register("select", tools.selNSGA2)
    else:
        tb.register("select", sel_tournament, tournsize=3, rnd=rnd if rnd is not None else random.Random(0))
    if parallel is not None:
        tb.register("map", parallel.map)
        tb.register("evaluate", _eval_chunk)
    else:
        tb.register("map", map)
        tb.register("evaluate", _evaluate_here, fit)
    return tb


def _evaluate_here(fit: Fitness, chunk: list[Genome]) -> list[tuple]:
    fit(chunk)
    return [(g.key, g.te, g.feasible) for g in chunk]


class _Parallel:
    """multiprocessing map for the fitness of large populations (opt-in: ``parallel``)."""

    def __init__(self, inst: Instance, workers: int) -> None:
        import multiprocessing as mp
        self.pool = mp.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=(inst,))

    def map(self, fn, chunks):
        return self.pool.map(fn, chunks)

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


_WORKER_FIT: Fitness | None = None


def _init_worker(inst: Instance) -> None:
    global _WORKER_FIT
    worker_guard()
    _WORKER_FIT = Fitness(inst)


def _eval_chunk(chunk: list[Genome]) -> list[tuple]:
    return _evaluate_here(_WORKER_FIT, chunk)


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
                self.ls_gain += (before - g.key[0]) / max(abs(before), 1e-300)
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


class MemeticRun:
    """One run of the memetic algorithm as an object (pymoo's algorithm/termination
    split): ``setup()`` builds generation 0, each ``step()`` advances every island
    by one generation (or, on a pool, to the next migration) and says whether to go
    on, ``result()`` is the best plan (and front) so far at any point, ``close()``
    releases worker pools. ``solve`` is these four calls; a caller that wants to
    watch or steer a run (a notebook, a progress view) calls them itself::

        run = MemeticRun(inst, opts)
        run.setup()
        while run.step():
            print(run.generation, run.best().te)
        res = run.result(); run.close()
    """

    def __init__(self, inst: Instance, opts: SolveOptions, name: str = "memetic") -> None:
        self.inst, self.opts, self.name = inst, opts, name
        o = self.options = MemeticOptions.parse(name, opts.extra)
        self.fit = Fitness(inst, o.front)
        self.stop = Termination(opts.time_limit_s, o.max_evaluations, lambda: self.fit.evaluations, o.generations)
        self.rng = np.random.default_rng(opts.seed)
        self.rnd = random.Random(opts.seed)
        self.shapes = choice_shapes(inst)
        # small instances converge for good; large ones use their whole time limit
        patience = o.patience if o.patience is not None else (8 if inst.n <= 16 else None)
        self.cfg = _Config(options=o.but(patience=patience), shapes=self.shapes,
                           default_mutations=tuple(mutation_names(inst)))
        self.n_islands = o.islands
        self.backend = o.island_backend if self.n_islands > 1 else "inline"
        self.parallel = _Parallel(inst, max(2, opts.workers)) if o.parallel and self.backend == "inline" else None
        self.seeds: list[Genome] = []
        self.hinted: list[Genome] = []
        self.fallback: list[Genome] = []
        self.islands: list[_Island] = []
        self.evo = _Evolver(inst, self.cfg, self.seeds, self.fit, self.stop, self.parallel)
        self.front = tools.ParetoFront(similar=lambda a, b: True)   # NSGA-II mode: every non-dominated plan seen
        # DEAP's Logbook: one record per generation (or per migration epoch of a pool)
        self.log = tools.Logbook()
        # the incumbent's two metrics: T and E, or a Pareto run's pair (e.g. cost, carbon)
        names = {"time": "T", "energy": "E", "cost": "C", "carbon": "Q"}
        self._pair = tuple(names[m] for m in o.front)
        self.log.header = ("gen", "t", *self._pair, "evals")
        self.generation = 0
        self.pool: _IslandPool | None = None
        self.bar = None

    @property
    def feasible(self) -> bool:
        """False when no shape can hold the model: there is nothing to search."""
        return bool(self.shapes)

    def _say(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_description(what)

    def setup(self) -> None:
        """Generation 0: constructive seeds with their best cuts, plans inside fast
        components, baseline plans, random fill; Ctrl-C or the deadline here still
        leaves the best seed evaluated so far."""
        inst, opts, o, stop, fit, rng = self.inst, self.opts, self.options, self.stop, self.fit, self.rng
        if opts.progress:
            from tqdm import tqdm
            # disable=None: no \r frames when stderr is redirected to a log
            self.bar = tqdm(total=o.generations, desc=f"{self.name}: seeding", unit="gen", leave=False,
                            dynamic_ncols=True, disable=None)
        self.hinted = [Genome.from_plan(inst, opts.hint)] if opts.hint is not None else []
        seeds, say = self.seeds, self._say
        with stop.guard():
            self.evo.evaluate(self.hinted, self._toolbox(0))
            # structured seeds at every micro-batch size and recomputation the model offers (§11)
            for ch in range(choice_count(inst)) if o.seeding else ():
                vi = variant(inst, ch)
                shapes = seed_shapes(vi, limit=10**9) if inst.n <= 64 else seed_shapes(vi)
                for k, (D, P) in enumerate(shapes):
                    if stop():
                        break
                    at = f" at choice {ch + 1}/{choice_count(inst)}" if inst.has_choices else ""
                    say(f"{self.name}: seeding shape {k + 1}/{len(shapes)}{at}")
                    for build in CONSTRUCTORS.values():
                        grid, cuts, mb = build(vi, D, P)
                        seeds.append(self._genome(Plan.from_indices(inst.ids, grid, cuts, mb), ch))
                if not stop():
                    # plans inside one fast component, screened on their constructive cuts:
                    # only the best few pay for a cut search
                    say(f"{self.name}: seeding inside fast components")
                    inside = [self._genome(Plan.from_indices(inst.ids, *c), ch) for c in component_plans(vi)]
                    fit(inside)
                    seeds += sorted(inside, key=lambda g: g.key)[:COMPONENT_SEEDS]
            for name in o.seed_solvers:    # baseline plans as seeds, on a share of the time
                from .. import get as _get
                share = SolveOptions(time_limit_s=max(0.5, 0.1 * opts.time_limit_s), seed=opts.seed, workers=1)
                r = _get(name)(inst, share)
                if r.plan is not None:
                    seeds.append(Genome.from_plan(inst, r.plan))
            # seeds compete on their best cuts: a structured layout with poor cuts would
            # otherwise fall out of the population before local search ever sees it
            say(f"{self.name}: evaluating {len(seeds)} seeds")
            self.evo.evaluate(seeds, self._toolbox(0))
            for k, g in enumerate(seeds):
                if stop():
                    break
                say(f"{self.name}: cuts of seed {k + 1}/{len(seeds)}")
                optimize_cuts(fit, g, rng, stop=stop)
                _set_fitness(g, o.pareto)
            if o.seeding and not stop():
                # last, on what time the other seeds leave (site_rings polishes its own cuts)
                more = self._site_seeds(sorted({(g.ch, g.D, g.P) for g in seeds}))
                self.evo.evaluate(more, self._toolbox(0))
                for g in more:
                    _set_fitness(g, o.pareto)
                seeds += more
            say(f"{self.name}: generation 0")
            for i in range(self.n_islands):
                # island 0 is the single-population solver; the others draw their own streams
                irng = rng if i == 0 else np.random.default_rng([opts.seed, i])
                irnd = self.rnd if i == 0 else random.Random(opts.seed * 1_000_003 + i)
                itb = self._toolbox(0) if i == 0 else build_toolbox(inst, fit, irng, o, stop, irnd, self.parallel)
                mine = seeds if i == 0 else [seeds[int(j)] for j in irng.permutation(len(seeds))[: len(seeds) // 2]]
                self.islands.append(self.evo.start(irng, irnd, itb, self.hinted + mine))
        say(self.name)
        # what generation 0 had evaluated when it ended (an interrupt may come before any island)
        self.fallback = [g for g in self.hinted + seeds if g.key is not None]
        if not self.islands and not self.fallback:
            # interrupted before any seed had its cost (e.g. inside the pool's map): one
            # batched evaluation here, in this process, takes well under a second
            self.fallback = self.hinted + seeds
            if not self.fallback:
                D, P = (seed_shapes(inst) or [s[1:] for s in self.shapes if s[0] == 0] or [(1, 1)])[0]
                build = CONSTRUCTORS["fastest-first"]
                self.fallback = [Genome.from_plan(inst, Plan.from_indices(inst.ids, *build(inst, D, P)))]
            fit(self.fallback)
            for g in self.fallback:
                _set_fitness(g, o.pareto)

    def _site_seeds(self, shapes: list[tuple[int, int, int]]) -> list[Genome]:
        """Layouts by site (site_layouts.site_plans: a ring per site, with stages
        of close sites paired, and a replica per site) at the shapes (ch, D, P):
        on machines spread over cities they are the layouts that win (DT-FM
        Case 5: 30.87 s at 8x6, Case 5-2: 31.25 s at 16x3, against optima of 30.79
        and 31.21 s; the constructive seeds led to 33.22 and 33.3-37.3 s), and no
        constructor builds them."""
        inst = self.inst

        def stop() -> bool:
            # past SITE_SHARE of the budget the search itself needs the rest (at
            # thousands of GPUs the other seeds take longer than that already)
            return self.stop() or self.stop.progress > SITE_SHARE
        found = site_plans([(variant(inst, ch), D, P) for ch, D, P in shapes], SITE_SHAPES, stop)
        return [self._genome(Plan.from_indices(inst.ids, *built), shapes[i][0]) for _v, i, built in found]

    def _genome(self, plan: Plan, ch: int) -> Genome:
        """The genome of a plan built at choice ``ch`` (§11) of the instance."""
        g = Genome.from_plan(self.inst, plan)
        g.ch = ch
        return g

    def _toolbox(self, i: int) -> base.Toolbox:
        """Island ``i``'s toolbox (island 0's exists before its population does)."""
        if i < len(self.islands):
            return self.islands[i].tb
        if not hasattr(self, "_tb0"):
            self._tb0 = build_toolbox(self.inst, self.fit, self.rng, self.options, self.stop, self.rnd,
                                      self.parallel)
        return self._tb0

    def step(self) -> bool:
        """Advance every island: one generation here, or to the next migration on a
        pool. False (nothing done) once the termination holds or every island has
        converged for good."""
        stop, islands, o = self.stop, self.islands, self.options
        if (not islands or stop() or not stop.generations_left(self.generation)
                or all(isl.done for isl in islands)):
            return False
        with stop.guard():
            if self.backend != "inline" and self.pool is None:
                self.pool = _IslandPool(self.backend, self.inst, self.cfg, self.seeds, self.opts.workers,
                                        self.n_islands, o.dask)
            if self.pool is None:
                steps = 1
                for isl in islands:
                    if not isl.done and not stop():
                        self.evo.generation(isl)
            else:
                # each island runs to the next migration in its own process
                every, gen = o.migration_interval, self.generation
                steps = every - gen % every
                if stop.max_generations is not None:
                    steps = min(steps, stop.max_generations - gen)
                budget = None if stop.max_evaluations is None else \
                    max(0, stop.max_evaluations - self.fit.evaluations) // self.n_islands + 1
                self.islands, done = self.pool.epoch(islands, steps, stop.deadline.remaining, budget)
                for n_eval, ls_t, ls_g in done:
                    self.fit.evaluations += n_eval
                    self.evo.ls_time += ls_t
                    self.evo.ls_gain += ls_g
            self.generation += steps
            if self.n_islands > 1 and self.generation % o.migration_interval == 0:
                self._migrate()
            best = self.best()
            if o.pareto:
                for isl in self.islands:
                    self.front.update([g for g in isl.pop if g.feasible])
            self.log.record(gen=self.generation, t=round(stop.deadline.elapsed, 3), **dict(zip(self._pair, best.te)),
                            evals=self.fit.evaluations)
            if self.bar is not None:
                # postfix first: the refresh that update() makes shows this generation's incumbent
                self.bar.set_postfix(**{k: f"{v:.4g}" for k, v in zip(self._pair, best.te)}, feasible=best.feasible,
                                     refresh=False)
                self.bar.update(steps)
        return not stop.interrupted

    def _migrate(self) -> None:
        # ring migration: each island's best few replace the worst of the next
        o = self.options
        moving = [[g.copy() for g in isl.pop[:o.migrants]] for isl in self.islands]
        for g in (g for group in moving for g in group):
            _set_fitness(g, o.pareto)
        for i, isl in enumerate(self.islands):
            isl.pop = _unique_best(isl.pop[: max(1, self.cfg.pop_size - o.migrants)] + moving[i - 1],
                                   self.cfg.pop_size, o.pareto, isl.tb)

    def best(self) -> Genome | None:
        """The best genome of every island (or of generation 0 if no island exists)."""
        pool = [isl.best for isl in self.islands] or self.fallback
        return min(pool, key=lambda g: g.key) if pool else None

    def result(self) -> SolverResult:
        inst, opts, o, stop, evo = self.inst, self.opts, self.options, self.stop, self.evo
        if not self.shapes:
            return finish(self.name, inst, opts, None, "infeasible", stop.deadline)
        best = self.best()
        plan = best.to_plan(inst) if best is not None and best.feasible else None
        log = self.log
        stats: dict[str, Any] = dict(
            generations=self.generation, restarts=sum(isl.restarts for isl in self.islands),
            evaluations=self.fit.evaluations, local_search_s=round(evo.ls_time, 3),
            local_search_share=round(evo.ls_time / max(stop.deadline.elapsed, 1e-9), 3),
            local_search_gain=evo.ls_gain, interrupted=stop.interrupted,
            # (gen, seconds, T, E, evaluations) rows: JSON-friendly, the last 200
            history=list(zip(*log.select(*log.header)))[-200:])
        if self.n_islands > 1:
            stats["island_backend"] = self.backend
        status = "heuristic" if plan is not None else "unknown"
        res = finish(self.name, inst, opts, plan, status, stop.deadline, stats=stats)
        if o.pareto:
            self.front.update([g for isl in self.islands for g in isl.pop if g.feasible])
            items = list(self.front)
            keep = pareto_filter([g.te for g in items])     # the front's tolerance for ties, as everywhere
            # its indicators are added by fronts.pareto_front, as for every other solver's front
            res.pareto = [finish(self.name, inst, opts, items[i].to_plan(inst), "heuristic", stop.deadline)
                          for i in keep]
        return res

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.parallel is not None:
            self.parallel.close()
            self.parallel = None
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def solve(inst: Instance, opts: SolveOptions, name: str = "memetic") -> SolverResult:
    """The memetic algorithm; with ``choice_search="separate"`` one run per micro-batch
    size and recomputation (§11) instead of the choice gene (to compare the two)."""
    if inst.has_choices and MemeticOptions.parse(name, opts.extra).choice_search == "separate":
        from ..choices import over_choices
        return over_choices(partial(_solve, name=name))(inst, opts)
    return _solve(inst, opts, name)


def _solve(inst: Instance, opts: SolveOptions, name: str = "memetic") -> SolverResult:
    run = MemeticRun(inst, opts, name)
    if not run.feasible:
        return run.result()
    try:
        run.setup()
        while run.step():
            pass
    finally:
        run.close()
    return run.result()


COMPONENT_SEEDS = 6     # plans inside fast components that join generation 0
SITE_SHAPES = 2         # shapes whose quick ring-per-site plan is best, tried again in full (and kept)
SITE_SHARE = 0.4        # share of the budget after which no ring-per-site seed is started


def _island_epoch(ctx: tuple, isl: "_Island", steps: int, seconds: float,
                  evals: int | None) -> tuple["_Island", tuple[int, float, float]]:
    """Run one island for ``steps`` generations (or until ``seconds``/``evals``)
    wherever it is called: a pool worker or a Dask worker."""
    inst, cfg, seeds = ctx
    fit = Fitness(inst)
    stop = Termination(seconds, evals, lambda: fit.evaluations)
    evo = _Evolver(inst, cfg, seeds, fit, stop)
    isl.tb = None
    for _ in range(steps):
        if isl.done or stop():
            break
        evo.generation(isl)
    isl.tb = None
    return isl, (fit.evaluations, evo.ls_time, evo.ls_gain)


_ISLAND_CTX: tuple | None = None


def _init_island_worker(ctx: tuple) -> None:
    global _ISLAND_CTX
    worker_guard()
    _ISLAND_CTX = ctx


def _pool_epoch(args: tuple):
    return _island_epoch(_ISLAND_CTX, *args)


class _IslandPool:
    """Islands evolving in other processes between migrations: a local process
    pool (``island_backend="processes"``) or a Dask cluster (``"dask"``, with
    ``dask`` = a scheduler address or ``"local"``). Results do not depend on the
    backend: an island's run depends only on its own state."""

    def __init__(self, backend: str, inst: Instance, cfg: _Config, seeds: list[Genome], workers: int,
                 n_islands: int, address: str | None) -> None:
        ctx = (inst, cfg, [g.copy() for g in seeds])
        self.backend = backend
        self.client = self.cluster = None
        if backend == "processes":
            import multiprocessing as mp
            self.pool = mp.get_context("spawn").Pool(max(1, min(workers, n_islands)),
                                                     initializer=_init_island_worker, initargs=(ctx,))
        elif backend == "dask":
            self.client, self.cluster = dask_client(address, max(1, min(workers, n_islands)))
            self.ctx = self.client.scatter(ctx, broadcast=True)
        else:
            raise SolverError(f"island_backend: unknown backend {backend!r} (inline, processes, dask)")

    def epoch(self, islands: list["_Island"], steps: int, seconds: float, evals: int | None):
        for isl in islands:
            isl.tb = None
        jobs = [(isl, steps, seconds, evals) for isl in islands]
        if self.client is not None:
            futs = [self.client.submit(_island_epoch, self.ctx, *j, pure=False) for j in jobs]
            out = self.client.gather(futs)
        else:
            out = self.pool.map(_pool_epoch, jobs)
        return [o[0] for o in out], [o[1] for o in out]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        else:
            self.pool.terminate()
            self.pool.join()


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
