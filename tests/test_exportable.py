"""Issue 40: ``solve --exportable``: the plan projected onto what a framework runs,
its cost reported, the export then accepting it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import geotrain_opt as gt
from geotrain_opt import Plan
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.io.export_plan import to_deepspeed, to_megatron
from geotrain_opt.solvers.exportable import megatron_cuts, project, refusal

from .conftest import INSTANCES

DEMO = INSTANCES / "demo-8gpu.yaml"


def test_megatron_cut_vectors_by_hand():
    # 6 layers, 4 stages: inner stages of u layers, first and last of at least one
    assert sorted(megatron_cuts(6, 4)) == sorted([(0, 1, 2, 3, 6), (0, 2, 3, 4, 6), (0, 3, 4, 5, 6), (0, 1, 3, 5, 6)])
    assert megatron_cuts(5, 2) == [(0, 1, 5), (0, 2, 5), (0, 3, 5), (0, 4, 5)] and megatron_cuts(5, 1) == [(0, 5)]
    for c in megatron_cuts(24, 5):
        sizes = [b - a for a, b in zip(c, c[1:])]
        assert len(set(sizes[1:-1])) == 1 and min(sizes) >= 1 and c[-1] == 24


def test_projection_is_the_best_megatron_plan_on_the_grid():
    inst = gt.load_instance(DEMO)
    plan = Plan.make([["va-0", "va-1", "oh-0", "oh-1"]], [0, 5, 11, 18, 24], [8])
    assert "inner stages differ" in refusal(inst, plan, "megatron") and refusal(inst, plan, "deepspeed") is None
    best, why = project(inst, plan, "megatron")
    assert why is None and to_megatron(inst, best)["args"]          # the export takes it
    # every Megatron cut vector of this grid, evaluated one by one: none is better
    values = [evaluate(inst, Plan.make(plan.grid, c, [8])) for c in megatron_cuts(24, 4)]
    assert evaluate(inst, best).time_s == pytest.approx(min(v.time_s for v in values if v.acceptable), rel=1e-12)
    assert best.grid == plan.grid


def test_unequal_batches_are_made_equal_or_refused():
    inst = gt.load_instance(DEMO).with_options(batch_split="free")
    plan = Plan.make([["va-2", "va-0"], ["va-3", "va-1"]], [0, 14, 24], [5, 3])
    best, _ = project(inst, plan, "deepspeed")
    assert best.micro_batches == (4, 4) and best.cuts == plan.cuts and to_deepspeed(inst, best)
    assert project(inst, plan, "torch")[0] == plan                   # torch runs [5, 3] as it is
    three = Plan.make([["va-0"], ["va-1"], ["va-2"]], [0, 24], [3, 3, 2])
    assert project(inst, three, "megatron") == (None, "8 micro-batches do not split evenly over 3 replicas")


def test_solve_exportable_reports_what_the_restriction_costs(tmp_path):
    inst = gt.load_instance(DEMO).with_options(batch_split="free")
    # one worker: two multi-threaded runs may return different plans of equal value
    free = gt.solve(inst, "cpsat", time_limit=60, workers=1)
    res = gt.solve(inst, "cpsat", time_limit=60, workers=1, exportable="megatron")
    ex = res.stats["exportable"]
    assert ex["unrestricted_value"] == pytest.approx(free.objective_value, rel=1e-12)
    assert refusal(inst, res.plan, "megatron") is None
    assert res.objective_value >= free.objective_value * (1 - 1e-12)
    if ex["changed"]:
        assert res.status == "heuristic" and ex["cost"] == pytest.approx(res.objective_value / free.objective_value - 1)
    else:
        assert res.status == "optimal" and res.plan == free.plan
    assert res.best_bound <= res.objective_value * (1 + 1e-9)


def test_cli_solve_exportable_then_export(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    r = run("solve", DEMO, "--solver", "greedy", "--exportable", "megatron", "--out", tmp_path / "r.json")
    assert r.returncode == 0 and "--exportable megatron:" in r.stdout, r.stdout + r.stderr
    r = run("export-plan", DEMO, tmp_path / "r.json", "--to", "megatron")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "megatron"


def test_refusal_agrees_with_the_exporters():
    """``refusal`` (what ``solve --exportable`` projects onto) and the exporters state the
    same rules twice (one a summary, the others name the field): on many feasible plans
    of the demo, with equal and unequal splits, uneven cuts and ZeRO, a framework refuses
    a plan exactly when its exporter raises."""
    import itertools

    from geotrain_opt.errors import PlanError
    from geotrain_opt.io.export_plan import to_torch_pipelining as to_torch
    base = gt.load_instance(DEMO).with_options(batch_split="free")
    ids = [d.id for d in base.devices]
    exporters = {"megatron": to_megatron, "deepspeed": to_deepspeed, "torch": to_torch}
    checked = {"refused": 0, "taken": 0}
    for zero in (0, 2):
        inst = base.with_options(zero_stage=zero)
        for D, P in ((1, 4), (2, 3), (2, 2), (4, 1), (1, 3)):
            for cuts in itertools.islice((c for c in itertools.combinations(range(1, 24), P - 1)), 0, 40, 7):
                for mb in ([8 // D] * D, [8 // D + 1] + [8 // D - 1] + [8 // D] * (D - 2)) if D > 1 else ([8],):
                    plan = Plan.make([ids[k * P:(k + 1) * P] for k in range(D)], (0, *cuts, 24), mb)
                    if not evaluate(inst, plan).feasible:
                        continue
                    for fw, export in exporters.items():
                        why = refusal(inst, plan, fw)
                        try:
                            export(inst, plan)
                            raised = None
                        except PlanError as e:
                            raised = str(e)
                        assert (why is None) == (raised is None), (fw, plan, why, raised)
                        checked["refused" if why else "taken"] += 1
    assert checked["refused"] >= 20 and checked["taken"] >= 20, checked
