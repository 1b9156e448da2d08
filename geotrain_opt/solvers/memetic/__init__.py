"""Memetic algorithm on DEAP: specialised operators, local search, NSGA-II Pareto mode.

The toolbox holds every operator by name (``toolbox.mate``, ``toolbox.mutate_swap``,
``toolbox.local_search``, ``toolbox.select``), so a variant swaps in
one line, e.g. ``toolbox.register("mate", cx_stages, inst)``. Settings come from
``SolveOptions.extra``: ``population`` (40), ``generations`` (None = until the
time limit), ``stall`` (generations without improvement before a restart, 60),
``patience`` (restarts in a row without improvement before stopping early: 8 up
to 16 GPUs, never beyond;
a restart keeps the elite and re-seeds the rest: perturbed elites, structured
seeds and random genomes),
``ls_rate`` (share of offspring improved by local search, 0.25; 0 disables it),
``ls_moves``, ``cxpb`` (0.7), ``mutpb`` (0.6), ``parallel`` (multiprocessing map),
``pareto`` (NSGA-II mode), ``seeding`` (True), ``seed_solvers`` (baselines whose
plans join generation 0), ``islands`` (populations evolving side by side, 1;
every ``migration_interval`` = 10 generations each sends its best ``migrants`` = 2
to the next, in a ring; ``island_backend``: ``inline`` evolves them in turn here,
``processes`` in a pool of ``workers`` processes, ``dask`` on the Dask scheduler
``dask`` (an address or ``local``): the same result in all three, since an
island's run depends on its own state only), ``max_evaluations`` (an evaluation
budget, for fair comparisons), ``mutations`` (names to draw from, default all).
"""
from __future__ import annotations

import random
import time
from operator import attrgetter
from dataclasses import dataclass
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
from ..termination import Termination
from .encoding import Genome, default_split
from .local_search import local_search, optimize_cuts
from .operators import CROSSOVERS, MUTATIONS, fresh_cuts
from ...heuristics import CONSTRUCTORS, component_plans, seed_shapes

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


def random_genome(inst: Instance, rng: np.random.Generator, shapes: list[tuple[int, int]]) -> Genome:
    D, P = shapes[int(rng.integers(len(shapes)))]
    g = Genome(D, P, rng.permutation(inst.n).astype(np.int64), np.zeros(P + 1, dtype=np.int64),
               default_split(inst, D))
    g.cuts = fresh_cuts(inst, g)
    return g


def sel_tournament(individuals: list, k: int, tournsize: int, rnd: random.Random) -> list:
    """DEAP's ``tools.selTournament`` drawing from ``rnd`` instead of the global
    ``random`` module (the same draws for the same state): islands in Dask or
    pool workers must not share a stream with anything else in the process."""
    return [max((rnd.choice(individuals) for _ in range(tournsize)), key=attrgetter("fitness"))
            for _ in range(k)]


def build_toolbox(inst: Instance, fit: Fitness, rng: np.random.Generator, extra: dict,
                  stop=lambda: False, rnd: random.Random | None = None) -> base.Toolbox:
    tb = base.Toolbox()
    tb.register("mate", CROSSOVERS[extra.get("crossover", "replicas")], inst, rng=rng)
    for name, op in MUTATIONS.items():
        tb.register(f"mutate_{name}", op, inst, rng=rng)
    tb.register("local_search", local_search, fit, rng=rng, stop=stop,
                moves=tuple(extra.get("ls_moves", ("region", "grid", "order", "cuts", "split"))))
    if extra.get("pareto"):
        tb.register("select", tools.selNSGA2)
    else:
        tb.register("select", sel_tournament, tournsize=3, rnd=rnd if rnd is not None else random.Random(0))
    return tb


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
    _WORKER_FIT(chunk)
    return [(g.key, g.te, g.feasible) for g in chunk]


@dataclass
class _Config:
    """What one generation of one island needs besides the instance (picklable:
    island workers in other processes receive it once)."""
    pareto: bool
    pop_size: int
    stall_limit: int
    patience: int | None
    ls_rate: float
    cxpb: float
    mutpb: float
    mut_names: list[str]
    shapes: list[tuple[int, int]]
    extra: dict


class _Evolver:
    """Evaluation, local search and one generation of an island, over one fitness."""

    def __init__(self, inst: Instance, cfg: _Config, seeds: list[Genome], fit: Fitness, stop,
                 parallel: "_Parallel | None" = None) -> None:
        self.inst, self.cfg, self.seeds, self.fit, self.stop, self.parallel = inst, cfg, seeds, fit, stop, parallel
        self.ls_time = 0.0
        self.ls_gain = 0.0

    def toolbox(self, isl: "_Island") -> base.Toolbox:
        if isl.tb is None:     # islands shipped to another process travel without theirs
            isl.tb = build_toolbox(self.inst, self.fit, isl.rng, self.cfg.extra, self.stop, isl.rnd)
        return isl.tb

    def evaluate(self, genomes: list[Genome]) -> None:
        todo = [g for g in genomes if g.key is None]
        if self.parallel is not None and len(todo) >= 64:
            chunks = [todo[i::4] for i in range(4)]
            for chunk, res in zip(chunks, self.parallel.map(_eval_chunk, chunks)):
                for g, (k, te, ok) in zip(chunk, res):
                    g.key, g.te, g.feasible = k, te, ok
                self.fit.evaluations += len(chunk)
        else:
            self.fit(todo)
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
        self.evaluate(pop)
        pop = _unique_best(pop, max(cfg.pop_size, len(pop)), cfg.pareto, tb)
        if cfg.ls_rate > 0:
            self.improve(pop[: max(1, int(cfg.ls_rate * cfg.pop_size))], tb)
        pop = _unique_best(pop, cfg.pop_size, cfg.pareto, tb)
        best0 = min(pop, key=lambda g: g.key).copy()
        return _Island(rng, rnd, tb, pop, best0, best_at_restart=best0.key)

    def generation(self, isl: "_Island") -> None:
        """One generation of one island: restart if it stalled, then breed."""
        cfg, inst = self.cfg, self.inst
        rng_, tb_ = isl.rng, self.toolbox(isl)
        if isl.stall >= cfg.stall_limit:
            # converged: restart around the elite instead of stopping
            isl.fruitless = 0 if _key_better_keys(inst, isl.best.key, isl.best_at_restart) else isl.fruitless + 1
            if cfg.patience is not None and isl.fruitless >= int(cfg.patience):
                isl.done = True
                return
            isl.best_at_restart = isl.best.key
            isl.restarts += 1
            isl.stall = 0
            isl.pop = _restart(isl.pop, isl.best, cfg.pop_size, inst, rng_, tb_, cfg.shapes, self.seeds,
                               cfg.mut_names)
            self.evaluate(isl.pop)
            if cfg.ls_rate > 0:
                self.improve(isl.pop[: max(1, int(cfg.ls_rate * cfg.pop_size))], tb_)
            isl.pop = _unique_best(isl.pop, cfg.pop_size, cfg.pareto, tb_)
        pop_ = isl.pop
        if cfg.pareto:   # NSGA-II: random mating, survival by non-domination and crowding
            parents = [pop_[int(i)] for i in rng_.integers(len(pop_), size=len(pop_))]
        else:
            parents = tb_.select(pop_, len(pop_))
        offspring = [p.copy() for p in parents]
        for i in range(0, len(offspring) - 1, 2):
            if rng_.random() < cfg.cxpb:
                offspring[i] = tb_.mate(offspring[i], offspring[i + 1])
        for i, child in enumerate(offspring):
            if rng_.random() < cfg.mutpb:
                name = cfg.mut_names[int(rng_.integers(len(cfg.mut_names)))]
                child = getattr(tb_, f"mutate_{name}")(child)
                child.invalidate()
                offspring[i] = child
            elif child.key is None:
                child.invalidate()
        self.evaluate(offspring)
        if cfg.ls_rate > 0:
            ranked = sorted(offspring, key=lambda g: g.key)
            k = max(1, int(cfg.ls_rate * len(offspring)))
            self.improve(ranked[: k // 2 + 1] + [ranked[int(i)] for i in rng_.choice(len(ranked), k // 2, replace=False)], tb_)
        isl.pop = _unique_best(pop_ + offspring, cfg.pop_size, cfg.pareto, tb_)
        cur = min(isl.pop, key=lambda g: g.key)
        if isl.best.key is None or _key_better(inst, cur, isl.best):
            isl.best, isl.stall = cur.copy(), 0
        else:
            isl.stall += 1


def solve(inst: Instance, opts: SolveOptions) -> SolverResult:
    extra = opts.extra
    pareto = bool(extra.get("pareto"))
    stop = Termination(opts.time_limit_s, extra.get("max_evaluations"), lambda: fit.evaluations,
                       extra.get("generations"))
    deadline, max_evals, max_gen = stop.deadline, stop.max_evaluations, stop.max_generations
    rng = np.random.default_rng(opts.seed)
    fit = Fitness(inst)
    rnd = random.Random(opts.seed)
    tb = build_toolbox(inst, fit, rng, extra, stop, rnd)
    shapes = seed_shapes(inst, limit=10**9) if inst.n <= 64 else seed_shapes(inst)
    all_shapes = feasible_shapes(inst)
    if not all_shapes:
        return finish("memetic", inst, opts, None, "infeasible", deadline)
    cfg = _Config(pareto=pareto, pop_size=int(extra.get("population", 40)), stall_limit=int(extra.get("stall", 60)),
                  # small instances converge for good; large ones use their whole time limit
                  patience=extra.get("patience", 8 if inst.n <= 16 else None),
                  ls_rate=float(extra.get("ls_rate", 0.25)), cxpb=float(extra.get("cxpb", 0.7)),
                  mutpb=float(extra.get("mutpb", 0.6)), mut_names=list(extra.get("mutations", MUTATIONS)),
                  shapes=all_shapes, extra={k: v for k, v in extra.items() if k in _WORKER_KEYS})
    n_islands = max(1, int(extra.get("islands", 1)))
    backend = extra.get("island_backend", "inline") if n_islands > 1 else "inline"
    parallel = _Parallel(inst, max(2, opts.workers)) if extra.get("parallel") and backend == "inline" else None
    seeds: list[Genome] = []
    evo = _Evolver(inst, cfg, seeds, fit, stop, parallel)
    stats: dict[str, Any] = {}

    # ---- generation 0: constructive seeds, their local optima, random fill. Ctrl-C
    # or the deadline here still returns the best seed evaluated so far.
    hinted = [Genome.from_plan(inst, opts.hint)] if opts.hint is not None else []
    migrate_every = max(1, int(extra.get("migration_interval", 10)))
    migrants = max(1, int(extra.get("migrants", 2)))
    islands: list[_Island] = []
    bar = None
    if opts.progress:
        from tqdm import tqdm
        # disable=None: no \r frames when stderr is redirected to a log
        bar = tqdm(total=max_gen, desc="memetic: seeding", unit="gen", leave=False, dynamic_ncols=True, disable=None)

    def say(what: str) -> None:
        if bar is not None:
            bar.set_description(what)
    try:
        evo.evaluate(hinted)
        if extra.get("seeding", True):
            for k, (D, P) in enumerate(shapes):
                if stop():
                    break
                say(f"memetic: seeding shape {k + 1}/{len(shapes)}")
                for build in CONSTRUCTORS.values():
                    grid, cuts, mb = build(inst, D, P)
                    seeds.append(Genome.from_plan(inst, Plan.from_indices(inst.ids, grid, cuts, mb)))
            if not stop():
                # plans inside one fast component, screened on their constructive cuts:
                # only the best few pay for a cut search
                say("memetic: seeding inside fast components")
                inside = [Genome.from_plan(inst, Plan.from_indices(inst.ids, *c)) for c in component_plans(inst)]
                fit(inside)
                seeds += sorted(inside, key=lambda g: g.key)[:COMPONENT_SEEDS]
        for name in extra.get("seed_solvers", ()):    # baseline plans as seeds, on a share of the time
            from .. import get as _get
            share = SolveOptions(time_limit_s=max(0.5, 0.1 * opts.time_limit_s), seed=opts.seed, workers=1)
            r = _get(name)(inst, share)
            if r.plan is not None:
                seeds.append(Genome.from_plan(inst, r.plan))
        # seeds compete on their best cuts: a structured layout with poor cuts would
        # otherwise fall out of the population before local search ever sees it
        say(f"memetic: evaluating {len(seeds)} seeds")
        evo.evaluate(seeds)
        for k, g in enumerate(seeds):
            if stop():
                break
            say(f"memetic: cuts of seed {k + 1}/{len(seeds)}")
            optimize_cuts(fit, g, rng, stop=stop)
            _set_fitness(g, pareto)
        say("memetic: generation 0")
        for i in range(n_islands):
            # island 0 is the single-population solver; the others draw their own streams
            irng = rng if i == 0 else np.random.default_rng([opts.seed, i])
            irnd = rnd if i == 0 else random.Random(opts.seed * 1_000_003 + i)
            itb = tb if i == 0 else build_toolbox(inst, fit, irng, extra, stop, irnd)
            mine = seeds if i == 0 else [seeds[int(j)] for j in irng.permutation(len(seeds))[: len(seeds) // 2]]
            islands.append(evo.start(irng, irnd, itb, hinted + mine))
    except KeyboardInterrupt:
        stop.interrupted = True
    say("memetic")
    # what generation 0 had evaluated when it ended (an interrupt may come before any island)
    fallback = [g for g in hinted + seeds if g.key is not None]
    if not islands and not fallback:
        # interrupted before any seed had its cost (e.g. inside the pool's map): one
        # batched evaluation here, in this process, takes well under a second
        fallback = hinted + seeds
        if not fallback:
            D, P = shapes[0]
            fallback = [Genome.from_plan(inst, Plan.from_indices(inst.ids, *CONSTRUCTORS["fastest-first"](inst, D, P)))]
        fit(fallback)
        for g in fallback:
            _set_fitness(g, pareto)

    def overall_best() -> Genome | None:
        pool = [isl.best for isl in islands] or fallback
        return min(pool, key=lambda g: g.key) if pool else None

    def migrate() -> None:
        # ring migration: each island's best few replace the worst of the next
        moving = [[g.copy() for g in isl.pop[:migrants]] for isl in islands]
        for g in (g for group in moving for g in group):
            _set_fitness(g, pareto)
        for i, isl in enumerate(islands):
            isl.pop = _unique_best(isl.pop[: max(1, cfg.pop_size - migrants)] + moving[i - 1],
                                   cfg.pop_size, pareto, isl.tb)

    archive: dict[tuple, Genome] = {}
    # DEAP's Logbook: one record per generation (or per migration epoch of a pool)
    log = tools.Logbook()
    log.header = ("gen", "t", "T", "E", "evals")
    gen = 0
    pool = None
    try:
        if backend != "inline" and islands and not stop.interrupted:
            pool = _IslandPool(backend, inst, cfg, seeds, opts.workers, n_islands, extra.get("dask"))
        while islands and not stop() and stop.generations_left(gen) and not all(isl.done for isl in islands):
            if pool is None:
                steps = 1
                for isl in islands:
                    if not isl.done and not stop():
                        evo.generation(isl)
            else:
                # each island runs to the next migration in its own process
                steps = migrate_every - gen % migrate_every
                if max_gen is not None:
                    steps = min(steps, max_gen - gen)
                budget = None if max_evals is None else max(0, max_evals - fit.evaluations) // n_islands + 1
                islands, done = pool.epoch(islands, steps, deadline.remaining, budget)
                for n_eval, ls_t, ls_g in done:
                    fit.evaluations += n_eval
                    evo.ls_time += ls_t
                    evo.ls_gain += ls_g
            gen += steps
            if n_islands > 1 and gen % migrate_every == 0:
                migrate()
            best = overall_best()
            if pareto:
                for isl in islands:
                    for g in isl.pop:
                        if g.feasible:
                            archive[(round(g.te[0], 12), round(g.te[1], 12))] = g.copy()
            log.record(gen=gen, t=round(deadline.elapsed, 3), T=best.te[0], E=best.te[1], evals=fit.evaluations)
            if bar is not None:
                # postfix first: the refresh that update() makes shows this generation's incumbent
                bar.set_postfix(T=f"{best.te[0]:.4g}", E=f"{best.te[1]:.4g}", feasible=best.feasible, refresh=False)
                bar.update(steps)
    except KeyboardInterrupt:
        stop.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        if parallel is not None:
            parallel.close()
        if pool is not None:
            pool.close()
    best = overall_best()
    pop = [g for isl in islands for g in isl.pop]
    restarts = sum(isl.restarts for isl in islands)
    plan = best.to_plan(inst) if best is not None and best.feasible else None
    stats.update(generations=gen, restarts=restarts, evaluations=fit.evaluations,
                 local_search_s=round(evo.ls_time, 3),
                 local_search_share=round(evo.ls_time / max(deadline.elapsed, 1e-9), 3),
                 local_search_gain=evo.ls_gain, interrupted=stop.interrupted,
                 # (gen, seconds, T, E, evaluations) rows: JSON-friendly, the last 200
                 history=list(zip(*log.select(*log.header)))[-200:])
    if n_islands > 1:
        stats["island_backend"] = backend
    status = "heuristic" if plan is not None else "unknown"
    res = finish("memetic", inst, opts, plan, status, deadline, stats=stats)
    if pareto:
        for g in pop:
            if g.feasible:
                archive[(round(g.te[0], 12), round(g.te[1], 12))] = g.copy()
        items = list(archive.values())
        keep = pareto_filter([g.te for g in items])
        # its indicators are added by fronts.pareto_front, as for every other solver's front
        res.pareto = [finish("memetic", inst, opts, items[i].to_plan(inst), "heuristic", deadline) for i in keep]
    return res


# settings a worker's toolbox reads (the rest of ``extra`` stays in the parent)
COMPONENT_SEEDS = 6     # plans inside fast components that join generation 0

_WORKER_KEYS = ("crossover", "ls_moves", "pareto")


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
             tb: base.Toolbox, shapes: list[tuple[int, int]], seeds: list[Genome],
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
