"""Micro-batch size and recomputation as decisions (formulations/model.md §11), by
hand on the tiny instance (constants in tests/test_evaluator_hand.py) and across
the solvers."""
from __future__ import annotations

import copy
from dataclasses import replace
import json
from pathlib import Path

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.bounds import instance_bound
from geotrain_opt.errors import InstanceError, PlanError
from geotrain_opt.cost.evaluator import BatchEvaluator
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.solvers import SolveOptions, get, spec

REL = 1e-12


def choosing(tiny_dict, **objective):
    d = copy.deepcopy(tiny_dict)
    d["model"]["micro_batch_options"] = [1, 2]
    d["model"]["recompute_options"] = ["none", "full"]
    d["objective"] = {"kind": "time", **objective}
    return instance_from_dict(d)


def test_choices_and_the_plan_fields(tiny_dict):
    inst = choosing(tiny_dict)
    assert inst.model.choices() == [(1, "none"), (1, "full"), (2, "none"), (2, "full")]
    plan = Plan.make([["e0"]], [0, 4], [2])
    ev = evaluate(inst, plan)                                  # b = 1 (the model's): M = 4
    assert not ev.feasible and "summing to M = 4" in ev.violations[0]
    from dataclasses import replace
    p2 = replace(plan, micro_batch=2)
    assert json.loads(json.dumps(p2.to_dict()))["micro_batch"] == 2 and Plan.from_dict(p2.to_dict()) == p2
    with pytest.raises(PlanError, match=r"micro_batch: 4 is not one of the model's choices \(1, 2\)"):
        evaluate(inst, replace(plan, micro_batch=4, micro_batches=(1,)))


def test_by_hand(tiny_dict):
    from dataclasses import replace
    inst = choosing(tiny_dict)
    # b = 2: F = 2 * 1000 * (24e6 + 4e6) = 5.6e10, w = 3F; head 6 b s h V = 1.2e11; M = 2
    ev = evaluate(inst, replace(Plan.make([["e0"]], [0, 4], [2]), micro_batch=2))
    assert ev.time_s == pytest.approx(2 * (4 * 1.68e11 + 1.2e11) / 5e13, rel=REL)
    # activations s b h (34 + 5 a s / h) = 1.68e8 per layer, logits 4 b s V = 8e7; 1 in flight
    assert ev.memory_bytes["e0"] == pytest.approx(16 * 69_052_000 + 4 * 1.68e8 + 8e7, rel=REL)
    # recompute full, b = 1: w = 4F = 1.12e11, head not recomputed; activations 2 s b h, logits once
    ev = evaluate(inst, replace(Plan.make([["e0"]], [0, 4], [4]), recompute="full"))
    assert ev.time_s == pytest.approx(4 * (4 * 1.12e11 + 6e10) / 5e13, rel=REL)
    assert ev.memory_bytes["e0"] == pytest.approx(16 * 69_052_000 + 4 * 2e6 + 4e7, rel=REL)
    b = BatchEvaluator(inst).evaluate_plans([replace(Plan.make([["e0"]], [0, 4], [4]), recompute="full")])[0]
    assert b.time_s[0] == pytest.approx(ev.time_s, rel=REL)


def test_bad_choices(tiny_dict):
    for options, field, words in [([3], "model.micro_batch_options[0]", "does not divide global_batch 4"),
                                  ([2, 2], "model.micro_batch_options[1]", "listed twice"),
                                  (["x"], "model.micro_batch_options[0]", "positive integer")]:
        d = copy.deepcopy(tiny_dict)
        d["model"]["micro_batch_options"] = options
        with pytest.raises(InstanceError) as e:
            instance_from_dict(d)
        assert e.value.field == field and words in str(e.value)
    d = copy.deepcopy(tiny_dict)
    d["model"]["recompute_options"] = ["partial"]
    with pytest.raises(InstanceError, match=r"model.recompute_options\[0\]: must be one of none, full, selective"):
        instance_from_dict(d)


def _best_by_hand(inst, name, opts):
    """Each choice solved alone (no wrapper), the best kept: an independent oracle."""
    fn = spec(name).load()
    best = None
    for b, r in inst.model.choices():
        res = fn(inst.variant(b, r), opts)
        if res.plan is not None and (best is None or res.objective_value < best):
            best = res.objective_value
    return best


@pytest.mark.parametrize("objective", [dict(kind="time"), dict(kind="energy"), dict(kind="weighted")])
def test_every_solver_takes_the_best_choice(tiny_dict, objective):
    d = copy.deepcopy(tiny_dict)
    for t in d["gpu_types"].values():
        t["memory_gib"] = 0.7        # tight: the model's own (b = 2, no recomputation) fits nowhere
    d["model"]["micro_batch"] = 2
    d["model"]["micro_batch_options"] = [1, 2]
    d["model"]["recompute_options"] = ["none", "full"]
    d["objective"] = {"kind": "time", **objective}
    inst = instance_from_dict(d)
    oracle = _best_by_hand(inst, "bruteforce", SolveOptions(time_limit_s=60))
    # the exact engines search the choices with the shapes (joint) or one solve per choice (separate)
    for name, how in (("bruteforce", None), ("cpsat", "joint"), ("milp", "joint"), ("cpsat", "separate"),
                      ("milp", "separate")):
        res = get(name)(inst, SolveOptions(time_limit_s=60, extra={"choice_search": how} if how else {}))
        assert res.status == "optimal" and res.objective_value == pytest.approx(oracle, rel=1e-6), name
        assert len(res.stats["choices"]) == 4
        ev = evaluate(inst, res.plan)                     # the tagged plan re-evaluates on the instance
        assert ev.acceptable and ev.time_s == pytest.approx(res.evaluation.time_s, rel=REL)
        found = [c["objective_value"] is None for c in res.stats["choices"]]
        if objective["kind"] == "time":                  # b = 1 with recomputation: neither the model's b nor r
            assert (res.plan.micro_batch, res.plan.recompute) == (1, "full")
            # (b, r) = (2, none), (1, none) fit nowhere; (2, full) and (1, full) have plans (the
            # polished constructive ones at least)
            assert found == [True, False, True, False], how
            if how == "joint":
                # one incumbent over the choices: its cutoff closes every shape of (2, full),
                # by a bound or by a model with nothing under the cutoff (separate solves
                # share no cutoff across choices)
                at = [s for s in res.stats["shape_log"] if (s["micro_batch"], s["recompute"]) == (2, "full")]
                assert at and all(s["status"] in ("closed", "infeasible") for s in at), at
    for how in ("joint", "separate"):                     # the choice gene, or one run per choice
        heur = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=0,
                                                 extra={"generations": 15, "choice_search": how}))
        assert heur.objective_value == pytest.approx(oracle, rel=1e-9), how
    bound, _ = instance_bound(inst)
    assert bound <= oracle * (1 + 1e-9)                  # the certified bound holds over every choice


def test_exports_carry_the_plans_choices(tiny_dict):
    from dataclasses import replace

    from geotrain_opt.io.export_plan import export
    d = copy.deepcopy(tiny_dict)
    d["gpu_types"]["fast"]["clocks"] = [{"fraction": 0.75, "busy_w": 190}]
    d["model"]["micro_batch_options"] = [1, 2]
    d["model"]["recompute_options"] = ["none", "full"]
    inst = instance_from_dict(d)
    plan = replace(Plan.make([["e0", "w0"]], [0, 2, 4], [2], {"e0": 0.75}), micro_batch=2, recompute="full")
    out = json.loads(export(inst, plan, "torch-pipelining"))
    assert (out["micro_batch_size"], out["recompute"]) == (2, "full")
    assert [r["clock_fraction"] for r in out["ranks"]] == [0.75, 1.0]
    assert out["replicas"][0]["samples"] == 4                # 2 micro-batches of 2 = the global batch


def test_describe_shows_the_levers():
    from geotrain_opt.io.describe import describe_dict, describe_instance
    from geotrain_opt.problem.instance import load_instance
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "demo-8gpu-levers.yaml")
    text = describe_instance(inst)
    assert "choices: micro-batch size 2, 4, 8; recompute full, none (6 combinations)" in text
    assert "A100-SXM4-40GB 1 (400 W), 0.9 (314.6 W)" in text and "USD/h" in text and "g CO2/kWh" in text
    d = describe_dict(inst)
    assert len(d["choices"]) == 6 and d["clocks"]["T4"][-1] == [0.6, 30.8]


def test_ctrl_c_keeps_the_choices_solved_so_far(tiny_dict, monkeypatch):
    """Interrupted during the third choice, the result is the best of the first two."""
    from geotrain_opt.solvers import choices
    inst = choosing(tiny_dict)
    real = spec("bruteforce").load()
    calls = []

    def flaky(v, opts):
        calls.append((v.model.micro_batch, v.model.recompute))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(v, opts)

    res = choices.over_choices(flaky)(inst, SolveOptions(time_limit_s=60))
    assert len(calls) == 3 and len(res.stats["choices"]) == 2
    assert res.status == "time_limit" and res.plan is not None and evaluate(inst, res.plan).acceptable


def test_the_memetic_choice_gene(tiny_dict):
    """The gene indexes inst.model.choices(): a plan round-trips through it, a mutation
    re-splits to the new choice's M, a crossover never mixes two choices' splits, and
    the local-search move lands on the best choice for the genome's devices and cuts."""
    import numpy as np

    from geotrain_opt.solvers.search.fitness import Fitness
    from geotrain_opt.solvers.search.memetic.encoding import Genome
    from geotrain_opt.decisions.choices import choice_moves, mut_choice
    from geotrain_opt.solvers.search.memetic.operators import cx_replicas, mutation_names
    inst = choosing(tiny_dict, kind="energy")
    assert inst.model.global_batch == 4 and inst.model.choices() == [(1, "none"), (1, "full"), (2, "none"),
                                                                     (2, "full")]
    assert "choice" in mutation_names(inst) and "choice" not in mutation_names(instance_from_dict(tiny_dict))
    plan = replace(Plan.make([["e0"], ["e1"]], [0, 4], [1, 1]), micro_batch=2, recompute="full")
    g = Genome.from_plan(inst, plan)
    assert g.genes["ch"] == 3 and g.to_plan(inst) == plan
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        h = mut_choice(inst, g.copy(), rng)
        assert h.genes["ch"] != 3 and int(h.mb.sum()) == 4 // inst.model.choices()[h.genes["ch"]][0]
        evaluate(inst, h.to_plan(inst))                  # a valid plan of the instance (no PlanError)
        seen.add(h.genes["ch"])
    assert seen == {0, 1, 2}
    other = Genome.from_plan(inst, Plan.make([["w0"], ["w1"]], [0, 4], [2, 2]))    # choice 0: M = 4
    assert other.genes["ch"] == 0
    for _ in range(10):
        child = cx_replicas(inst, g.copy(), other, rng)
        assert child.genes["ch"] == 3 and int(child.mb.sum()) == 2
    # from (b, r) = (1, full): recomputation only costs energy here, so the move drops it
    start = Genome.from_plan(inst, replace(Plan.make([["e0"], ["e1"]], [0, 4], [2, 2]), recompute="full"))
    assert start.genes["ch"] == 1
    assert choice_moves(Fitness(inst), start, rng)
    by_hand = []
    for b, r in inst.model.choices():
        p = replace(Plan.make([["e0"], ["e1"]], [0, 4], [2 // b, 2 // b]),
                    micro_batch=None if b == 1 else b, recompute=None if r == "none" else r)
        ev = evaluate(inst, p)
        by_hand.append(ev.energy_j if ev.acceptable else float("inf"))
    assert by_hand[1] > min(by_hand)
    assert start.genes["ch"] in (0, 2) and start.te[1] == pytest.approx(min(by_hand), rel=1e-9) == by_hand[start.genes["ch"]]


def test_choices_left_open_before_the_limit_are_feasible_not_time_limit(tiny_dict):
    """One solve per choice: if a choice's run ends "feasible" (shapes open before its
    limit) and none hit its limit, the whole run is "feasible"; one "time_limit" makes it so."""
    from dataclasses import replace
    from geotrain_opt.solvers import choices
    inst = choosing(tiny_dict)
    real = spec("bruteforce").load()

    def run_as(status):
        def run(v, opts):
            res = real(v, opts)
            first = (v.model.micro_batch, v.model.recompute) == inst.model.choices()[0]
            return replace(res, status=status) if first else res
        return run

    for status in ("feasible", "time_limit"):
        res = choices.over_choices(run_as(status))(inst, SolveOptions(time_limit_s=60))
        assert len(res.stats["choices"]) == len(inst.model.choices()) > 1
        assert res.status == status and res.plan is not None and evaluate(inst, res.plan).acceptable
