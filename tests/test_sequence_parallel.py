"""Tensor-parallel groups without sequence parallelism (formulations/model.md §14):
the activations outside a layer's GEMMs (LayerNorm inputs and outputs, dropout masks:
10 s b h bytes of the layer's stored activations, Korthikanti et al. 2022) are then
held whole by every GPU of a group. Memory by hand, exact solvers against an
enumeration where that memory decides the optimum, exports and the field's errors."""
from __future__ import annotations

import pytest

import geotrain_opt as gt
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.problem.plan import Plan

from .test_tensor_parallel import _every_plan, physical

# the instance of test_tensor_parallel.py: h 64, s 16, b 1, 8 heads, standard attention,
# so a layer stores s b h (34 + 5 a s / h) = 1,024 x 44 = 45,056 bytes per micro-batch,
# of which 10 s b h = 10,240 bytes sit outside the GEMMs
ONE_GROUP = {"grid": [[["a0", "a1"]]], "cuts": [0, 2], "micro_batches": [4]}


def test_memory_by_hand():
    """One stage of both layers on a group of two, 1F1B with one stage: one micro-batch
    in flight. Without sequence parallelism each GPU holds the 10,240 replicated bytes
    of each layer whole instead of half: (1 - 1/2) x 10,240 x 2 layers x 1 = 10,240
    bytes more per GPU; everything else (state, logits, time) is unchanged."""
    with_sp = instance_from_dict(physical())
    without = instance_from_dict(physical(sequence_parallel=False))
    assert without.model.replicated_act_share() == pytest.approx(10 / 44, rel=1e-12)
    plan = Plan.from_dict(ONE_GROUP)
    a, b = evaluate(with_sp, plan), evaluate(without, plan)
    assert b.memory_bytes["a0"] - a.memory_bytes["a0"] == pytest.approx(10_240.0, rel=1e-12)
    assert b.memory_bytes["a1"] == b.memory_bytes["a0"]
    assert (a.time_s, a.energy_j) == (b.time_s, b.energy_j)
    # a single GPU (degree 1) holds its activations whole either way
    single = Plan.from_dict({"grid": [["a0"]], "cuts": [0, 2], "micro_batches": [4]})
    assert evaluate(without, single).memory_bytes == evaluate(with_sp, single).memory_bytes


def test_full_recomputation_keeps_the_layer_input_whole():
    """Under full recomputation a layer stores its input only (2 s b h = 2,048 bytes),
    which sequence parallelism splits and plain tensor parallelism does not (rho = 1):
    (1 - 1/2) x 2,048 x 2 layers x 1 = 2,048 bytes more per GPU."""
    def inst(sp):
        d = physical(sequence_parallel=sp)
        d["model"]["recompute"] = "full"
        return instance_from_dict(d)
    assert inst(False).model.replicated_act_share() == 1.0
    a, b = (evaluate(inst(sp), Plan.from_dict(ONE_GROUP)) for sp in (True, False))
    assert b.memory_bytes["a0"] - a.memory_bytes["a0"] == pytest.approx(2_048.0, rel=1e-12)


def _tight(sp: bool) -> dict:
    """993,000 usable bytes per GPU: a group holds both layers (988,160 bytes per GPU)
    only with sequence parallelism (998,400 without); half the layers fit either way."""
    d = physical(sequence_parallel=sp)
    d["gpu_types"]["X"]["memory_gib"] = 993_000 / 0.9 / 2**30
    return d


@pytest.mark.parametrize("sp, best", [(True, 0.056128392), (False, 0.077423968)])
def test_exact_optimum_is_the_least_plan_by_enumeration(sp, best):
    """With sequence parallelism the best plan is two replicas of one group each
    (56.13 ms); without, no group holds both layers, and the best is one pipeline of
    the two groups (77.42 ms). CP-SAT, the MILP and brute force equal the least of
    every plan at degrees 1 and 2, evaluated here one by one; the heuristics find it."""
    inst = instance_from_dict(_tight(sp))
    singles, pairs = ["a0", "a1", "b0", "b1"], [("a0", "a1"), ("b0", "b1")]
    feasible = [ev.time_s for plans in (_every_plan(inst, singles), _every_plan(inst, pairs))
                for ev in map(lambda p: evaluate(inst, p), plans) if ev.feasible]
    assert min(feasible) == pytest.approx(best, rel=1e-9)
    for solver in ("cpsat", "milp", "bruteforce", "greedy", "memetic"):
        extra = {"generations": 5} if solver == "memetic" else {}
        res = gt.solve(inst, solver, time_limit=600, seed=0, **extra)      # ends by proof or generations
        assert res.evaluation.time_s == pytest.approx(best, rel=1e-9), solver
        if solver in ("cpsat", "milp", "bruteforce"):
            assert res.status == "optimal", solver


def test_megatron_export_follows_the_option():
    from geotrain_opt.io.export_plan import rank_map, to_megatron
    plan = Plan.from_dict(ONE_GROUP)
    for sp in (True, False):
        inst = instance_from_dict(physical(sequence_parallel=sp))
        assert ("--sequence-parallel" in to_megatron(inst, plan)["args"]) is sp
        assert rank_map(inst, plan)["sequence_parallel"] is sp


def test_a_bad_value_names_the_field():
    with pytest.raises(InstanceError, match="options.sequence_parallel") as e:
        instance_from_dict(physical(sequence_parallel="no"))
    assert "true or false" in str(e.value)
