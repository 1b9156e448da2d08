"""Cost model v3's first term, 1F1B's window (formulations/model.md §3.1), on issue
37's Llama-2-7B cluster: version 2 proved a plan that its own simulator runs 2.3x
slower; version 3 agrees with the simulator on both plans and proves the other one."""
from __future__ import annotations

from pathlib import Path

import pytest

from geotrain_opt import Plan, evaluate, load_instance
from geotrain_opt.cost.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def llama():
    return load_instance(ROOT / "instances" / "llama7b-3region-28.yaml")


def test_version_2s_optimum_is_what_the_simulator_says(llama):
    # 2 x 10 across the Atlantic, 256 micro-batches per replica: version 2 charged
    # 25.27 s (kappa 0.5); 1F1B holds at most 10 - j of them at stage j, so every round
    # trip over the 80-ms link stalls the pipeline (58.75 s simulated at kappa 0.5,
    # 51.91 s at version 3's default kappa 0.25)
    plan = Plan.load(DATA / "llama7b-v2-optimum.json")
    ev, sim = evaluate(llama, plan), simulate(llama, plan)
    assert plan.replicas == 2 and plan.stages == 10
    assert sim.time_s == pytest.approx(51.9093, rel=1e-5)
    assert ev.time_s == pytest.approx(sim.time_s, rel=0.01)


def test_version_3s_optimum_is_proved_and_simulated_alike(llama):
    plan = Plan.load(DATA / "llama7b-v3-optimum.json")
    ev, sim = evaluate(llama, plan), simulate(llama, plan)
    assert (plan.replicas, plan.stages) == (4, 6)
    # 37.5603 s before the rings overlapped the drain (model.md §3.3): still the optimum
    assert ev.time_s == pytest.approx(37.5442, rel=1e-5) and ev.time_s == pytest.approx(sim.time_s, rel=0.01)
    # the simulator's own ranking agrees: the new optimum runs 27 % faster than the old one
    assert sim.time_s < 0.73 * simulate(llama, Plan.load(DATA / "llama7b-v2-optimum.json")).time_s
    # (CP-SAT proves this plan optimal in seconds: docs/results.md, with the command; no
    # proof is timed here)
