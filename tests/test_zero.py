"""Sharded data parallelism, ZeRO stages 1 and 2 (formulations/model.md §15): memory
and sync by hand, the simulator and the batched evaluator against the reference,
exact solvers against an enumeration, and the option's errors."""
from __future__ import annotations

import itertools

import pytest

import geotrain_opt as gt
from geotrain_opt.cost.evaluator import BatchEvaluator, evaluate
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.problem.plan import Plan

# 2 layers of n_l = 4h^2 + 2hf + f + 9h = 49,984 parameters (h 64, f 256), embeddings
# Vh + sh = 9,216, head Vh = 8,192: one stage holds N = 117,376 parameters
MODEL = {"layers": 2, "hidden": 64, "heads": 1, "seq_len": 16, "vocab": 128, "ffn_hidden": 256,
         "global_batch": 4, "micro_batch": 1}
N_ALL = 117_376
BETA = 1.024e9 / 8 * 8          # 8.192 Gbit/s between the nodes, bytes/s


def cluster(zero: int, **model) -> dict:
    return {"name": "zero-hand", "model": {**MODEL, **model},
            "gpu_types": {"X": {"peak_tflops": 0.001, "efficiency": 1.0, "memory_gib": 1.0, "busy_w": 300.0,
                                "wait_w": 50.0}},
            "devices": [{"id": f"{n}{i}", "type": "X", "region": "r", "node": n} for n in "ab" for i in range(2)],
            "network": {"intra_node": {"latency_ms": 0.1, "bandwidth_gbps": 80.0},
                        "intra_region": {"latency_ms": 2.0, "bandwidth_gbps": 8.192}},
            "options": {"zero_stage": zero}}


TWO = Plan.from_dict({"grid": [["a0"], ["b0"]], "cuts": [0, 2], "micro_batches": [2, 2]})


def test_memory_by_hand():
    """Per parameter: 16 bytes without ZeRO; 2 + 2 + 12/2 = 10 at stage 1 with D = 2
    (the optimizer state shared); 2 + 14/2 = 9 at stage 2 (the gradients too)."""
    mem = {z: evaluate(instance_from_dict(cluster(z)), TWO).memory_bytes["a0"] for z in (0, 1, 2)}
    assert mem[0] - mem[1] == pytest.approx(6 * N_ALL, rel=1e-12)
    assert mem[1] - mem[2] == pytest.approx(1 * N_ALL, rel=1e-12)


def test_sync_by_hand_with_fp32_gradients():
    """grad_bytes 4: the all-reduce moves 2 (D-1)/D x 4 bytes per parameter, ZeRO's
    reduce-scatter (4) and all-gather of the bf16 weights (2) move (D-1)/D x 6."""
    R = {z: evaluate(instance_from_dict(cluster(z, grad_bytes=4.0)), TWO).stage_allreduce_s[0] for z in (0, 1)}
    assert R[0] == pytest.approx(4.0 * N_ALL / BETA + 2 * 2e-3, rel=1e-12)
    assert R[1] == pytest.approx(3.0 * N_ALL / BETA + 2 * 2e-3, rel=1e-12)


@pytest.mark.parametrize("zero", [1, 2])
def test_simulator_and_batched_evaluator_agree(zero):
    inst = instance_from_dict(cluster(zero, grad_bytes=4.0))
    plans = [TWO, Plan.from_dict({"grid": [["a0", "a1"], ["b0", "b1"]], "cuts": [0, 1, 2], "micro_batches": [2, 2]}),
             Plan.from_dict({"grid": [["a0", "b1"], ["b0", "a1"]], "cuts": [0, 1, 2], "micro_batches": [2, 2]})]
    rows = BatchEvaluator(inst).evaluate_plans(plans)
    for plan, row in zip(plans, rows):
        ev = evaluate(inst, plan)
        assert float(row.time_s[0]) == pytest.approx(ev.time_s, rel=1e-12)
        assert float(row.energy_j[0]) == pytest.approx(ev.energy_j, rel=1e-12)
        assert simulate(inst, plan).time_s == pytest.approx(ev.time_s, rel=1e-9)


def test_zero_makes_data_parallelism_fit_and_exact_solvers_find_it():
    """1.9 MB of state (16 bytes x N) fits on no GPU of 1.7 MB; at ZeRO-1 with D = 2 a GPU
    holds 10 bytes x N = 1.2 MB. CP-SAT, the MILP and brute force return the least time
    of every plan, enumerated here."""
    def tight(z):
        d = cluster(z)
        d["gpu_types"]["X"]["memory_gib"] = 0.0018
        return instance_from_dict(d)
    inst = tight(1)
    ids = [d.id for d in inst.devices]
    best = float("inf")
    for D, P in ((1, 1), (2, 1), (4, 1), (1, 2), (2, 2)):
        for perm in itertools.permutations(ids, D * P):
            plan = Plan.make([list(perm[k * P:(k + 1) * P]) for k in range(D)], [0, 2] if P == 1 else [0, 1, 2],
                             [4 // D] * D)
            ev = evaluate(inst, plan)
            if ev.feasible:
                best = min(best, ev.time_s)
    assert not evaluate(tight(0), TWO).feasible and evaluate(inst, TWO).feasible
    for solver in ("cpsat", "milp", "bruteforce"):
        res = gt.solve(inst, solver, time_limit=60)
        assert res.status == "optimal" and res.evaluation.time_s == pytest.approx(best, rel=1e-9), solver
        assert res.plan.replicas > 1
    assert gt.solve(inst, "cpsat", time_limit=60).best_bound <= best * (1 + 1e-9)
    assert gt.solve(inst, "greedy", time_limit=20).evaluation.feasible


@pytest.mark.parametrize("zero, model, message", [
    (3, {}, "ZeRO-3 is not modelled"),
    (5, {}, "must be 0, 1 or 2"),
    (1, {"state_bytes": 3.0}, "must be at least precision_bytes + grad_bytes = 4"),
])
def test_bad_zero_names_the_field(zero, model, message):
    with pytest.raises(InstanceError, match="options.zero_stage") as e:
        instance_from_dict(cluster(zero, **model))
    assert message in str(e.value)
