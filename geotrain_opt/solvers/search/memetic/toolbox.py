"""The DEAP toolbox of a memetic run: every operator registered by name
(``toolbox.mate``, ``toolbox.mutate_swap``, ``toolbox.local_search``, ``toolbox.select``),
so a variant swaps in one line, e.g. ``toolbox.register("mate", cx_stages, inst)``."""
from __future__ import annotations

import random
from operator import attrgetter
import numpy as np
from deap import base, creator, tools
from geotrain_opt.construct.pieces import feasible_shapes
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.options import MemeticOptions
from geotrain_opt.decisions.choices import count as choice_count
from geotrain_opt.decisions.choices import variant
from geotrain_opt.solvers.search.memetic.encoding import Genome, default_split
from geotrain_opt.solvers.search.memetic.local_search import local_search
from geotrain_opt.solvers.search.memetic.operators import CROSSOVERS, MUTATIONS, fresh_cuts
from geotrain_opt.solvers.search.memetic.parallel import _Parallel, _eval_chunk, _evaluate_here


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
               default_split(variant(inst, ch), D))
    g.genes["ch"] = ch
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
