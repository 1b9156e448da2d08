"""A memetic run as an object (pymoo's algorithm shape): ``setup`` (seeding),
``step`` (one epoch of every island), ``result``; stopped by the shared Termination."""
from __future__ import annotations

import random
from typing import Any
import numpy as np
from deap import base, tools
from geotrain_opt.problem.instance import Instance
from geotrain_opt.cost.objective import pareto_filter
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import SolveOptions, finish
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.options import MemeticOptions
from geotrain_opt.solvers.termination import Termination
from geotrain_opt.decisions.choices import count as choice_count
from geotrain_opt.decisions.choices import variant
from geotrain_opt.solvers.search.memetic.encoding import Genome
from geotrain_opt.solvers.search.memetic.local_search import optimize_cuts
from geotrain_opt.solvers.search.memetic.operators import mutation_names
from geotrain_opt.construct.heuristics import CONSTRUCTORS, component_plans, full_shapes, seed_shapes
from geotrain_opt.construct.site_layouts import site_plans
from geotrain_opt.solvers.search.memetic.evolver import _Config, _Evolver, _unique_best
from geotrain_opt.solvers.search.memetic.evolver import _Island
from geotrain_opt.solvers.search.memetic.islands import _IslandPool
from geotrain_opt.solvers.search.memetic.parallel import _Parallel
from geotrain_opt.solvers.search.memetic.toolbox import _set_fitness, build_toolbox, choice_shapes
from geotrain_opt.solvers.budget import SEED_SOLVER_SHARE, SITE_SHARE
from geotrain_opt.solvers.result import Status
from geotrain_opt.solvers import trace

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
        o = self.options = opts.typed(MemeticOptions, name)
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
            self._note(self.hinted)
            # structured seeds at every micro-batch size and recomputation the model offers (§11)
            for ch in range(choice_count(inst)) if o.seeding else ():
                vi = variant(inst, ch)
                seeds += self._shape_seeds(vi, ch)
                if not stop():
                    # plans inside one fast component, screened on their constructive cuts:
                    # only the best few pay for a cut search
                    say(f"{self.name}: seeding inside fast components")
                    inside = [self._genome(Plan.from_indices(inst.ids, *c), ch) for c in component_plans(vi, stop=stop)]
                    fit(inside)
                    self._note(inside)
                    seeds += sorted(inside, key=lambda g: g.key)[:COMPONENT_SEEDS]
            for name in o.seed_solvers:    # baseline plans as seeds, on a share of the time
                from geotrain_opt.solvers import get as _get
                share = SolveOptions(time_limit_s=max(0.5, SEED_SOLVER_SHARE * opts.time_limit_s), seed=opts.seed, workers=1)
                r = _get(name)(inst, share)
                if r.plan is not None:
                    seeds.append(Genome.from_plan(inst, r.plan))
            # seeds compete on their best cuts: a structured layout with poor cuts would
            # otherwise fall out of the population before local search ever sees it
            say(f"{self.name}: evaluating {len(seeds)} seeds")
            self.evo.evaluate(seeds, self._toolbox(0))
            self._note(seeds)
            for k, g in enumerate(seeds):
                if stop():
                    break
                say(f"{self.name}: cuts of seed {k + 1}/{len(seeds)}")
                optimize_cuts(fit, g, rng, stop=stop)
                _set_fitness(g, o.pareto)
                self._note([g])
            if o.seeding and not stop():
                # last, on what time the other seeds leave (site_rings polishes its own cuts)
                more = self._site_seeds(sorted({(g.genes["ch"], g.D, g.P) for g in seeds}))
                self.evo.evaluate(more, self._toolbox(0))
                self._note(more)
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

    def _note(self, genomes: list[Genome]) -> None:
        """Generation 0's plans as they get their cost: the trajectory's first points
        (the plans an interrupt here would return, ``fallback``)."""
        if not self.options.pareto:
            feasible = [g.key[0] for g in genomes if g.key is not None and g.feasible]
            if feasible:
                trace.note(min(feasible))

    def _shape_seeds(self, vi: Instance, ch: int) -> list[Genome]:
        """Every constructor at every shape (small instances) or at a spread of shapes
        (large); on large ones also at every other depth with its most replicas, those
        screened on their constructive cuts so that only the best ``DEPTH_SEEDS`` pay for
        a cut search (all of them cost the search a 7 % worse plan in a 20-s run at 256
        GPUs, benchmarks/tp_gain.py)."""
        inst, stop = self.inst, self.stop
        shapes = seed_shapes(vi, limit=10**9) if inst.n <= 64 else seed_shapes(vi)
        depths = [] if inst.n <= 64 else [s for s in full_shapes(vi) if s not in set(shapes)]
        at = f" at choice {ch + 1}/{choice_count(inst)}" if inst.has_choices else ""
        out: list[Genome] = []
        extra: list[Genome] = []
        for k, (D, P) in enumerate(shapes + depths):
            if stop():
                break
            self._say(f"{self.name}: seeding shape {k + 1}/{len(shapes) + len(depths)}{at}")
            for build in CONSTRUCTORS.values():
                g = self._genome(Plan.from_indices(inst.ids, *build(vi, D, P)), ch)
                (out if k < len(shapes) else extra).append(g)
        if extra:
            self.fit(extra)
            self._note(extra)
            out += sorted(extra, key=lambda g: g.key)[:DEPTH_SEEDS]
        return out

    def _genome(self, plan: Plan, ch: int) -> Genome:
        """The genome of a plan built at choice ``ch`` (§11) of the instance."""
        g = Genome.from_plan(self.inst, plan)
        g.genes["ch"] = ch
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
            if best is not None and best.feasible and not o.pareto:
                trace.note(best.key[0])
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
        status = Status.HEURISTIC if plan is not None else Status.UNKNOWN
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


COMPONENT_SEEDS = 6     # plans inside fast components that join generation 0
DEPTH_SEEDS = 8         # plans at the depths a spread of shapes leaves out that join it


SITE_SHAPES = 2         # shapes whose quick ring-per-site plan is best, tried again in full (and kept)


