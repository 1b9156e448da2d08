"""Property: the batched evaluator equals the reference evaluator on random plans."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geotrain_opt import Plan, evaluate, load_instance
from geotrain_opt.cost.evaluator import BatchEvaluator

from .conftest import INSTANCES, TINY, variant
import yaml

BASE = yaml.safe_load(TINY.read_text())
INSTS = {
    "tiny-1f1b-uniform": load_instance(TINY),
    "tiny-gpipe-free": variant(BASE, options__schedule="gpipe", options__batch_split="free",
                               model__global_batch=12),
    "demo-8gpu": load_instance(INSTANCES / "demo-8gpu.yaml"),
    # ZeRO-2 (model.md §15): the state depends on D, the rings move fp32 gradients and bf16 weights
    "demo-8gpu-zero2": variant(yaml.safe_load((INSTANCES / "demo-8gpu.yaml").read_text()),
                               options__zero_stage=2, model__grad_bytes=4.0),
}


@st.composite
def plans(draw, inst):
    n, L, M = inst.n, inst.model.layers, inst.model.num_micro_batches
    uniform = inst.options.batch_split == "uniform"
    Ds = [d for d in range(1, n + 1) if d <= M and (not uniform or M % d == 0)]
    D = draw(st.sampled_from(Ds))
    P = draw(st.integers(1, min(L, n // D)))
    devs = draw(st.permutations(range(n)))[: D * P]
    cuts = [0, *sorted(draw(st.sets(st.integers(1, L - 1), min_size=P - 1, max_size=P - 1))), L]
    if uniform:
        mb = [M // D] * D
    else:
        bars = sorted(draw(st.sets(st.integers(1, M - 1), min_size=D - 1, max_size=D - 1)))
        mb = list(np.diff([0, *bars, M]))
    grid = np.array(devs).reshape(D, P)
    return Plan.from_indices(inst.ids, grid, cuts, mb)


@pytest.mark.parametrize("name", list(INSTS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_batched_equals_reference(name, data):
    inst = INSTS[name]
    batch = [data.draw(plans(inst)) for _ in range(3)]
    results = BatchEvaluator(inst).evaluate_plans(batch)
    for plan, res in zip(batch, results):
        ev = evaluate(inst, plan)
        assert ev.feasible == bool(res.feasible[0])
        for f in ("time_s", "energy_j", "pipeline_s", "allreduce_s", "busy_j", "wait_j", "network_j"):
            assert getattr(res, f)[0] == pytest.approx(getattr(ev, f), rel=1e-12, abs=1e-15), f
        mem = res.memory[0]
        for k, row in enumerate(plan.grid):
            for j, g in enumerate(row):
                assert mem[k, j] == pytest.approx(ev.memory_bytes[g], rel=1e-12)


def test_batch_of_many_shapes_in_one_call():
    inst = INSTS["demo-8gpu"]
    grid = np.array([[[0, 4], [1, 5]], [[2, 6], [3, 7]], [[7, 0], [6, 1]]])
    cuts = np.array([[0, 12, 24], [0, 20, 24], [0, 1, 24]])
    mb = np.array([[4, 4]] * 3)
    res = BatchEvaluator(inst)(grid, cuts, mb)
    for i in range(3):
        ev = evaluate(inst, Plan.from_indices(inst.ids, grid[i], cuts[i], mb[i]))
        assert res.time_s[i] == pytest.approx(ev.time_s, rel=1e-12)
        assert res.energy_j[i] == pytest.approx(ev.energy_j, rel=1e-12)
