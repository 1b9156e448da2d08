"""model.attention (formulations/model.md §1): fused (Flash) attention keeps no
attention scores, so a layer's activations are 34 s b h bytes, not s b h (34 + 5 a s / h)."""
from __future__ import annotations

import pytest

from geotrain_opt import Plan, evaluate
from geotrain_opt.errors import InstanceError
from geotrain_opt.cost.evaluator import BatchEvaluator

from .conftest import variant


def test_flash_attention_memory_by_hand(tiny_dict):
    # s = h = 1000, b = 1, a = 10: standard 1000*1000*(34 + 5*10*1000/1000) = 8.4e7 B per layer,
    # flash 34e6 B. One device, all 4 layers, one micro-batch in flight, logits 4e7:
    # 16 B * 69,052,000 parameters + 4 * 3.4e7 + 4e7 = 1,280,832,000 B
    inst = variant(tiny_dict, model__attention="flash")
    assert inst.model.layer_act_bytes() == 3.4e7
    plan = Plan.make([["e0"]], [0, 4], [4])
    ev = evaluate(inst, plan)
    assert ev.memory_bytes["e0"] == pytest.approx(1_104_832_000 + 4 * 3.4e7 + 4e7, rel=1e-12)
    standard = evaluate(variant(tiny_dict), plan)
    assert standard.memory_bytes["e0"] - ev.memory_bytes["e0"] == pytest.approx(4 * (8.4e7 - 3.4e7), rel=1e-12)
    assert ev.time_s == standard.time_s          # memory only: the work is the same
    batch = BatchEvaluator(inst).evaluate_plans([plan])[0]
    assert float(batch.memory.max()) == pytest.approx(ev.memory_bytes["e0"], rel=1e-12)


def test_attention_is_checked(tiny_dict):
    with pytest.raises(InstanceError, match="model.attention: must be one of standard, flash"):
        variant(tiny_dict, model__attention="paged")


def test_selective_recomputation_by_hand(tiny_dict):
    """recompute: selective (Korthikanti et al. 2022) keeps a layer's 34 s b h bytes,
    as fused attention does, and recomputes the attention core in the backward:
    QK^T and scores x V, 4 b s^2 h = 4e9 FLOP per layer on top of 3 F = 8.4e10."""
    from geotrain_opt.cost.simulate import simulate
    inst = variant(tiny_dict, model__recompute="selective")
    assert inst.model.layer_work_flop() == pytest.approx(8.4e10 + 4e9, rel=1e-12)
    assert inst.model.layer_act_bytes() == 3.4e7
    plan = Plan.make([["e0"]], [0, 4], [4])
    ev = evaluate(inst, plan)
    # 4 micro-batches of 4 layers and the head (6e10, not recomputed) at 5e13 FLOP/s
    assert ev.time_s == pytest.approx(4 * (4 * 8.8e10 + 6e10) / 5e13, rel=1e-12)
    # the logits of every micro-batch in flight are kept (only full recomputation drops them)
    assert ev.memory_bytes["e0"] == pytest.approx(1_104_832_000 + 4 * 3.4e7 + 4e7, rel=1e-12)
    two = Plan.make([["e0", "w0"]], [0, 2, 4], [4])
    assert simulate(inst, two).time_s == pytest.approx(evaluate(inst, two).time_s, rel=1e-9)
    with pytest.raises(InstanceError, match="recompute"):
        variant(tiny_dict, model__recompute="partial")


@pytest.mark.parametrize("memory_gib, best", [(0.7, "full"), (0.8, "selective"), (1.0, None)])
def test_selective_recomputation_as_a_choice(tiny_dict, memory_gib, best):
    """With none, full and selective to choose (§11): selective's 34 s b h bytes fit
    where none's scores do not, for a twentieth of full's extra compute; the exact
    engine and brute force agree on which memory size each wins at (None: the
    model's own, none)."""
    from geotrain_opt.solvers import SolveOptions, get
    inst = variant(tiny_dict, model__recompute_options=["none", "full", "selective"],
                   gpu_types__fast__memory_gib=memory_gib, gpu_types__slow__memory_gib=memory_gib)
    res = get("cpsat")(inst, SolveOptions(time_limit_s=60))
    brute = get("bruteforce")(inst, SolveOptions(time_limit_s=60))
    assert res.status == brute.status == "optimal"
    assert res.objective_value == pytest.approx(brute.objective_value, rel=1e-9)
    assert res.plan.recompute == best
