"""When an iterative search stops (pymoo's termination, shared): the time limit,
an evaluation budget, a generation limit, or Ctrl-C. Every iterative solver
(memetic, plain GA, annealing, random search, DT-FM's GCMA) polls one of these,
so "interrupted, return the best plan so far" means the same everywhere."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from geotrain_opt.solvers.base import Deadline


class Termination:
    """``term()`` is True once the search must stop. ``evaluations``: a callable
    giving the evaluations spent so far (e.g. ``lambda: fit.evaluations``)."""

    def __init__(self, seconds: float, max_evaluations: int | None = None,
                 evaluations: Callable[[], int] = lambda: 0, max_generations: int | None = None) -> None:
        self.deadline = Deadline(seconds)
        self.max_evaluations = max_evaluations
        self.max_generations = max_generations
        self._evaluations = evaluations
        self.interrupted = False

    @property
    def evaluations(self) -> int:
        return self._evaluations()

    def __call__(self) -> bool:
        return (self.interrupted or self.deadline.expired
                or (self.max_evaluations is not None and self._evaluations() >= self.max_evaluations))

    def generations_left(self, gen: int) -> bool:
        return self.max_generations is None or gen < self.max_generations

    @property
    def progress(self) -> float:
        """Share of the budget spent, in [0, 1]: evaluations if budgeted, else time."""
        if self.max_evaluations:
            return min(1.0, self._evaluations() / self.max_evaluations)
        return min(1.0, self.deadline.elapsed / max(self.deadline.seconds, 1e-9))

    @contextmanager
    def guard(self) -> Iterator["Termination"]:
        """Ctrl-C inside the block ends the search, not the program: the solver
        goes on to return its best plan so far."""
        try:
            yield self
        except KeyboardInterrupt:
            self.interrupted = True
