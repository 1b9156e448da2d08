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
