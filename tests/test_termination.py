"""One Termination for every iterative solver: time, evaluation budget, generations,
and Ctrl-C, after which each solver still returns its best plan so far."""
import time
from pathlib import Path

import pytest

from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import load_instance
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.solvers.termination import Termination

INSTANCES = Path(__file__).resolve().parents[1] / "instances"


def test_termination_budget_generations_and_progress():
    spent = {"n": 0}
    term = Termination(60.0, max_evaluations=100, evaluations=lambda: spent["n"], max_generations=3)
    assert not term() and term.progress == 0.0
    spent["n"] = 25
    assert term.progress == pytest.approx(0.25) and not term()
    spent["n"] = 100
    assert term() and term.progress == 1.0
    assert term.generations_left(2) and not term.generations_left(3)
    assert Termination(0.0)()                       # no time: stop at once
    t = Termination(60.0)
    with t.guard():
        raise KeyboardInterrupt
    assert t.interrupted and t()                    # caught, and the search stops


def _interrupt_after(monkeypatch, owner, name: str, calls: int) -> None:
    real = getattr(owner, name)
    seen = {"n": 0}

    def flaky(*args, **kw):
        seen["n"] += 1
        if seen["n"] > calls:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, flaky)


@pytest.mark.parametrize("solver", ["simulated-annealing", "random-search", "dtfm"])
def test_ctrl_c_returns_the_best_plan_so_far(monkeypatch, solver):
    import geotrain_opt.solvers.baselines.dtfm as dtfm
    from geotrain_opt.solvers.search.fitness import Fitness
    if solver == "dtfm":
        _interrupt_after(monkeypatch, dtfm, "gcma", 1)          # Ctrl-C in the second shape's search
    else:
        _interrupt_after(monkeypatch, Fitness, "keys_of", 30)
    inst = load_instance(INSTANCES / "demo-8gpu.yaml")
    t = time.perf_counter()
    res = get(solver)(inst, SolveOptions(time_limit_s=60, seed=0))
    assert time.perf_counter() - t < 30                        # it did not run to the limit
    assert res.stats["interrupted"] is True
    assert res.plan is not None and evaluate(inst, res.plan).feasible
    assert res.evaluation.time_s == pytest.approx(evaluate(inst, res.plan).time_s)
