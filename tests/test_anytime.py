"""Issue 41: incumbent trajectories in bench rows and the anytime measures drawn from
them (time to target, ECDF, primal integral), by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geotrain_opt.analysis import anytime
from geotrain_opt.analysis.bench import Job, run_job
from geotrain_opt.problem.instance import load_instance
from geotrain_opt.solvers import trace
from geotrain_opt.solvers.base import Incumbent

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "instances" / "demo-8gpu.yaml"


def test_primal_integral_and_hit_times_by_hand():
    # plans at 1 s (12), 3 s (10.5), 6 s (10); reference 10; budget 10 s:
    #   [0, 1): no plan, gap 1        -> 1
    #   [1, 3): |12 - 10| / 12 = 1/6  -> 2/6
    #   [3, 6): 0.5 / 10.5 = 1/21     -> 3/21
    #   [6, 10): 0                    -> 0
    # integral 1 + 1/3 + 1/7 over 10 s
    traj = [(1.0, 12.0), (3.0, 10.5), (6.0, 10.0)]
    assert anytime.primal_integral(traj, 10.0, 10.0) == pytest.approx((1 + 1 / 3 + 1 / 7) / 10)
    # a budget that ends before the last plan: [0,1) 1, [1,3) 1/6, [3,4) 1/21
    assert anytime.primal_integral(traj, 10.0, 4.0) == pytest.approx((1 + 2 / 6 + 1 / 21) / 4)
    assert anytime.primal_integral([], 10.0, 5.0) == 1.0
    assert anytime.hit_time(traj, 10.5) == 3.0 and anytime.hit_time(traj, 10.0) == 6.0
    assert anytime.hit_time(traj, 9.99) is None
    assert anytime.primal_gap(-1.0, 2.0) == 1.0 and anytime.primal_gap(None, 2.0) == 1.0


def _row(inst, solver, traj, limit=10.0, h="h"):
    return {"instance_name": inst, "instance_hash": h, "solver": solver, "label": solver, "status": "heuristic",
            "objective": "time", "objective_value": traj[-1][1] if traj else None, "time_limit_s": limit,
            "wall_s": limit, "trajectory": [list(p) for p in traj], "time_s": 1.0, "energy_j": 1.0, "n_gpus": 4}


def _rows():
    # instance a (reference 10): x one run reaching 10 at 2 s; y two runs, one reaching
    # 11 at 1 s and 10 at 4 s, the other only 12 at 1 s
    # instance b (reference 5): x reaches 6 at 1 s; y reaches 5 at 3 s
    return [_row("a", "x", [(2.0, 10.0)]), _row("a", "y", [(1.0, 11.0), (4.0, 10.0)]), _row("a", "y", [(1.0, 12.0)]),
            _row("b", "x", [(1.0, 6.0)]), _row("b", "y", [(3.0, 5.0)])]


def test_ecdf_weighs_each_instance_alike_whatever_its_runs():
    ref = anytime.references(_rows())
    assert ref == {"a": 10.0, "b": 5.0}
    targets = (0.0, 0.1, 0.2)       # a: 10, 11, 12; b: 5, 5.5, 6
    pairs = anytime.hits(_rows(), ref, targets)
    # x: a hits all three at 2 s; b hits only 6 (eps 0.2) at 1 s -> 4 of 6 by the end
    assert anytime.ecdf_at(pairs["x"], 1.5) == pytest.approx(1 / 6)
    assert anytime.ecdf_at(pairs["x"], 100) == pytest.approx(4 / 6)
    # y on a: run 1 hits 11 and 12 at 1 s and 10 at 4 s, run 2 only 12 at 1 s, each weight 1/2
    #   -> by 1.5 s: (2 + 1) / 2 = 1.5 of a's 3; by the end (3 + 1) / 2 = 2; b: all three at 3 s
    assert anytime.ecdf_at(pairs["y"], 1.5) == pytest.approx(1.5 / 6)
    assert anytime.ecdf_at(pairs["y"], 100) == pytest.approx(5 / 6)
    table = {r["solver"]: r for r in anytime.table(_rows(), ref, targets)}
    # within 1 %: x on a at 2 s (b never), y run 1 on a at 4 s and b at 3 s
    assert table["x"]["reached_1pct"] == 1 and table["x"]["median_s_to_1pct"] == 2.0
    assert table["y"]["reached_1pct"] == 2 and table["y"]["median_s_to_1pct"] == 3.5
    # x's primal integrals: a 2/10; b: 1/10 + 9 * (1/6) / 10
    assert table["x"]["primal_integral"] == pytest.approx((0.2 + (1 + 9 / 6) / 10) / 2)


def test_known_references_lower_than_every_run_count():
    ref = anytime.references(_rows(), {"a": 8.0, "b": 6.0})
    assert ref == {"a": 8.0, "b": 5.0}


def test_incumbents_note_their_improvements_only_while_recorded():
    inst = load_instance(DEMO)
    from geotrain_opt.solvers import get, SolveOptions
    plan = get("greedy")(inst, SolveOptions(time_limit_s=5)).plan
    inc = Incumbent(inst)
    inc.offer_plan(plan)                         # outside a recording: nothing to note into
    with trace.recording() as tr:
        Incumbent(inst).offer_plan(plan)
        Incumbent(inst).offer_plan(plan)         # the same value again: no new point
    assert len(tr.points) == 1 and tr.points[0][1] == pytest.approx(inc.key[0])


@pytest.mark.parametrize("solver", ["greedy", "random-search", "memetic"])
def test_bench_rows_carry_a_decreasing_trajectory_ending_at_the_plan(solver):
    extra = {"max_evaluations": 3000} if solver != "greedy" else {}
    row = run_job(Job(str(DEMO), solver, 0, 30.0, extra=json.dumps(extra)))
    traj = row["trajectory"]
    assert traj, row
    times, values = [p[0] for p in traj], [p[1] for p in traj]
    assert times == sorted(times) and all(0 <= t <= row["wall_s"] for t in times)
    assert all(b < a for a, b in zip(values, values[1:]))
    assert values[-1] == pytest.approx(row["objective_value"], rel=1e-9)


def test_report_anytime_table_and_figures(tmp_path):
    res = tmp_path / "r.jsonl"
    res.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    p = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "report", str(res), "--anytime",
                        "--ecdf-plot", str(tmp_path / "ecdf"), "--anytime-plot", str(tmp_path / "any")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # x: 2 runs, 1 within 1 % after 2.00 s; targets hit over the default ten
    assert "| x | 2 | 2 |" in p.stdout and "| 1/2 | 2.00 |" in p.stdout
    assert (tmp_path / "ecdf.png").stat().st_size > 1000 and (tmp_path / "any.png").stat().st_size > 1000
    p = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "report", str(res), "--anytime-plot",
                        str(tmp_path / "one"), "--anytime-instances", "b,nope"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "--anytime-instances: no runs with a trajectory on nope" in p.stderr
    assert not (tmp_path / "one.png").exists()
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "trajectory"}) + "\n" for r in _rows()))
    p = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "report", str(old), "--anytime"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "no row has a trajectory" in p.stderr and "Traceback" not in p.stderr


def test_a_suite_may_name_a_library_folder(tmp_path):
    """The protocol suites name instances/lib: its index's instances, in order."""
    from geotrain_opt.analysis.bench import load_suite
    from geotrain_opt.analysis.library import load_index
    lib_dir = ROOT / "instances" / "lib"
    suite = tmp_path / "s.yaml"
    suite.write_text(f"instances: [{lib_dir}]\nseeds: [0, 1]\nsolvers: [greedy, {{name: cpsat, seeds: [0]}}]\n")
    _name, jobs = load_suite(suite)
    recs = load_index(lib_dir)["records"]
    assert len(jobs) == 3 * len(recs)
    assert [Path(j.instance).name for j in jobs[:3]] == [Path(recs[0]["instance"]).name] * 3
    assert {j.solver for j in jobs} == {"greedy", "cpsat"}


def test_the_api_time_limit_is_the_whole_call_as_the_commands():
    """gt.solve's time_limit covers loading and the bound too (issue 39): the solver
    gets what is left less the bound's reserve, and the trajectory's clock starts with
    the call."""
    import geotrain_opt as gt
    from geotrain_opt.solvers.budget import BOUND_RESERVE
    res = gt.solve(DEMO, "greedy", time_limit=30)
    assert res.stats["command_time_limit_s"] == 30
    assert 0 < res.settings["time_limit_s"] <= 30 * (1 - BOUND_RESERVE)
    assert res.stats["trajectory"][-1][1] == pytest.approx(res.objective_value, rel=1e-9)
