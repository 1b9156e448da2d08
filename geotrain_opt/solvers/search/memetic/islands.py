"""Islands with ring migration, on this process, a process pool or Dask: the same
result on all three, since an island's run depends on its own state only."""
from __future__ import annotations

from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.cluster import dask_client, worker_guard
from geotrain_opt.errors import SolverError
from geotrain_opt.solvers.search.fitness import Fitness
from geotrain_opt.solvers.termination import Termination
from geotrain_opt.solvers.search.memetic.encoding import Genome
from geotrain_opt.solvers.search.memetic.evolver import _Config, _Evolver, _Island



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


