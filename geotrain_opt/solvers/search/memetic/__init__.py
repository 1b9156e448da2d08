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
run depends on its own state only)."""
from __future__ import annotations

from functools import partial
from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.options import MemeticOptions
from geotrain_opt.solvers.search.memetic.run import MemeticRun



def solve(inst: Instance, opts: SolveOptions, name: str = "memetic") -> SolverResult:
    """The memetic algorithm; with ``choice_search="separate"`` one run per micro-batch
    size and recomputation (§11) instead of the choice gene (to compare the two)."""
    if inst.has_choices and opts.typed(MemeticOptions, name).choice_search == "separate":
        from geotrain_opt.solvers.choices import over_choices
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
