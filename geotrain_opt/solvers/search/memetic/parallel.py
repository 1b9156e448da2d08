"""Batched fitness on this process or a process pool (``parallel=True``)."""
from __future__ import annotations

from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.cluster import worker_guard
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.search.memetic.encoding import Genome



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
