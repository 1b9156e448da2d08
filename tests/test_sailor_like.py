"""The ``sailor-like`` baseline (solvers/baselines/sailor.py, formulations/baselines.md):
its rules by hand on the tiny two-region instance, its answer against every candidate
costed by the reference evaluator, and its tensor-parallel search on the 70B cluster."""
from __future__ import annotations

from pathlib import Path

import pytest

import geotrain_opt as gt
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.errors import SolverError
from geotrain_opt.construct.heuristics import full_shapes, region_columns, stage_regions_even
from geotrain_opt.construct.pieces import even_last_cuts
from geotrain_opt.io import generate
from geotrain_opt.problem.instance import instance_from_dict, load_instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers import register
from geotrain_opt.solvers.baselines import sailor
from geotrain_opt.solvers.choices import degree_cases

INST = Path(__file__).resolve().parents[1] / "instances"


def test_even_last_cuts_put_the_remainder_on_the_last_stages():
    """Sailor's ``get_stages``: 14 layers on 4 stages are 3, 3, 4, 4 (not 4, 4, 3, 3)."""
    assert even_last_cuts(14, 4).tolist() == [0, 3, 6, 10, 14]
    assert even_last_cuts(8, 4).tolist() == [0, 2, 4, 6, 8]
    assert even_last_cuts(5, 1).tolist() == [0, 5]
    assert even_last_cuts(7, 7).tolist() == list(range(8))


def test_stage_replicas_stay_in_one_region_by_hand():
    """tiny-4gpu-2region: e0, e1 (east, fast), w0 (west, fast), w1 (west, slow).
    2 x 2: stage 0 takes east (two fast GPUs beat west's fast + slow), stage 1 the
    only region with two free, west. 1 x 4: the pipeline stays in east while it can
    (e0, e1), then west's fastest first (w0, w1). 3 x 1: no region holds three (the
    lenient form takes the three fast GPUs, e0, e1, w0)."""
    inst = load_instance(INST / "tiny-4gpu-2region.yaml")
    assert region_columns(inst, 2, 2).tolist() == [[0, 2], [1, 3]]
    assert region_columns(inst, 1, 4).tolist() == [[0, 1, 2, 3]]
    assert region_columns(inst, 3, 1) is None
    # the memetic's constructor (stage-regions) takes the fastest free where no region has room
    assert region_columns(inst, 3, 1, strict=False).tolist() == [[0], [1], [2]]
    assert region_columns(inst, 2, 1).tolist() == [[0], [1]]


def test_answer_is_the_best_candidate_on_the_reference_evaluator():
    """Every candidate costed one by one by the reference evaluator (not the batched
    one the baseline uses): the baseline returns the least T among the acceptable."""
    inst = load_instance(INST / "tiny-4gpu-2region.yaml")
    times = []
    for grid, cuts, mb in sailor.candidates(inst):
        ev = evaluate(inst, Plan.from_indices(inst.ids, grid, cuts, mb))
        if ev.acceptable:
            times.append(ev.time_s)
    assert len(times) >= 3
    res = gt.solve(inst, "sailor-like", time_limit=60)
    assert res.plan is not None and str(res.status) == "heuristic"
    assert res.evaluation.time_s == pytest.approx(min(times), rel=1e-12)
    region = {d.id: d.region for d in inst.devices}
    for j in range(len(res.plan.grid[0])):
        assert len({region[row[j]] for row in res.plan.grid}) == 1


def test_searches_every_degree_and_plans_groups_on_the_70b_cluster():
    """One GPU per stage fits nowhere on llama70b-2region-tp; Sailor's rules plan TP
    inside a node, every degree case searched (none raced out), uniform Sailor cuts."""
    inst = load_instance(INST / "llama70b-2region-tp.yaml")
    res = gt.solve(inst, "sailor-like", time_limit=60)
    assert res.plan is not None and res.evaluation.acceptable
    rows = res.stats["tensor_parallel"]
    assert [r["tensor_parallel"] for r in rows] == [c.label["tensor_parallel"] for c in degree_cases(inst)]
    assert all(r["status"] != "not searched" for r in rows)
    slots = [g for row in res.plan.grid for g in row]
    assert all(isinstance(g, tuple) and len(g) > 1 for g in slots)
    node = {d.id: d.node for d in inst.devices}
    assert all(len({node[x] for x in g}) == 1 for g in slots)
    P = len(res.plan.grid[0])
    assert list(res.plan.cuts) == even_last_cuts(inst.model.layers, P).tolist()
    best_seen = min(r["objective_value"] for r in rows if r["objective_value"] is not None)
    assert res.objective_value == pytest.approx(best_seen, rel=1e-12)


def test_shapes_thin_out_past_dense_d():
    """tiny (4 micro-batches, uniform split: D divides 4) keeps every shape; at 64 GPUs
    and 64 micro-batches one stage keeps D = 1..16, the powers of two and the largest."""
    inst = load_instance(INST / "tiny-4gpu-2region.yaml")
    assert sailor.shapes(inst) == [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2), (1, 3), (1, 4)]
    spec = generate.geo(64, seed=1)
    spec["model"]["global_batch"] = 64 * spec["model"]["micro_batch"]      # 64 micro-batches
    spec.setdefault("options", {})["batch_split"] = "free"
    ds = [D for D, P in sailor.shapes(instance_from_dict(spec)) if P == 1]
    assert ds == list(range(1, 17)) + [32, 64]


def test_depth_seeds_of_the_memetic_by_hand():
    """The memetic's extra seeds on large instances: every depth at its most replicas
    (tiny: D divides 4, D x P <= 4), laid out one region per stage with Sailor's layers."""
    inst = load_instance(INST / "tiny-4gpu-2region.yaml")
    assert full_shapes(inst) == [(4, 1), (2, 2), (1, 3), (1, 4)]
    grid, cuts, mb = stage_regions_even(inst, 2, 2)
    assert grid.tolist() == [[0, 2], [1, 3]] and cuts.tolist() == [0, 2, 4] and list(mb) == [2, 2]
    grid, cuts, mb = stage_regions_even(inst, 1, 3)     # 4 layers on 3 stages: 1, 1, 2
    assert grid.tolist() == [[0, 1, 2]] and cuts.tolist() == [0, 1, 2, 4] and list(mb) == [4]


def test_registry_refuses_an_unknown_tensor_parallel_mode():
    with pytest.raises(SolverError, match="tensor_parallel must be"):
        register("bad-mode", lambda inst, opts: None, kind="baseline", tensor_parallel="some")
