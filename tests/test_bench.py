"""Baselines are feasible and re-evaluate; the harness resumes without losing or
duplicating rows; the same suite runs on a real Dask LocalCluster."""
from __future__ import annotations


import pytest

from geotrain_opt import evaluate, load_instance
from geotrain_opt.analysis.bench import load_suite, run_suite
from geotrain_opt.analysis.report import load_rows, markdown, summarize
from geotrain_opt.solvers import SolveOptions, get, names

from .conftest import INSTANCES

SMALL = [INSTANCES / "demo-8gpu.yaml", INSTANCES / "real" / "mixed-gen-3region-16.yaml"]


@pytest.mark.parametrize("solver", names("baseline"))
@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_baseline_plans_are_feasible_and_reevaluate(solver, path):
    inst = load_instance(path)
    res = get(solver)(inst, SolveOptions(time_limit_s=3, seed=1))
    assert res.plan is not None, solver
    ev = evaluate(inst, res.plan)
    assert ev.feasible and ev.acceptable
    assert res.evaluation.time_s == pytest.approx(ev.time_s, rel=1e-9)
    assert res.evaluation.energy_j == pytest.approx(ev.energy_j, rel=1e-9)
    if solver in ("megatron-uniform", "proportional", "dtfm"):
        assert len(res.plan.devices) == inst.n          # these use every GPU


def test_megatron_uniform_by_hand():
    inst = load_instance(INSTANCES / "tiny-4gpu-2region.yaml")
    res = get("megatron-uniform")(inst, SolveOptions())
    # all four GPUs, id order, uniform cuts; shapes 1x4, 2x2, 4x1 -> checked against each
    cands = [evaluate(inst, p) for p in (
        __import__("geotrain_opt").Plan.make([["e0", "e1", "w0", "w1"]], [0, 1, 2, 3, 4], [4]),
        __import__("geotrain_opt").Plan.make([["e0", "e1"], ["w0", "w1"]], [0, 2, 4], [2, 2]),
        __import__("geotrain_opt").Plan.make([["e0"], ["e1"], ["w0"], ["w1"]], [0, 4], [1, 1, 1, 1]))]
    assert res.evaluation.time_s == pytest.approx(min(c.time_s for c in cands if c.feasible), rel=1e-12)


def _suite(tmp_path, seeds=(0, 1)):
    p = tmp_path / "suite.yaml"
    p.write_text(f"""name: t
time_limit: 2
seeds: {list(seeds)}
instances: [{INSTANCES / 'tiny-4gpu-2region.yaml'}, {INSTANCES / 'demo-8gpu.yaml'}]
solvers:
  - greedy
  - {{name: cpsat, seeds: [0]}}
  - {{name: random-search, extra: {{max_evaluations: 3000}}}}
""")
    return p


def test_interrupted_bench_resumes_without_loss_or_duplicates(tmp_path, monkeypatch):
    suite = _suite(tmp_path)
    _, jobs = load_suite(suite)
    assert len(jobs) == 2 * (2 + 1 + 2)
    out = tmp_path / "res.jsonl"
    import geotrain_opt.analysis.bench as bench
    real = bench.run_job
    calls = {"n": 0}

    def dying(job, root="."):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt        # the sweep is interrupted after 3 runs
        return real(job, root)

    monkeypatch.setattr(bench, "run_job", dying)
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, out, workers=1, progress=False)
    first = load_rows(out)
    assert len(first) == 3
    with open(out, "a") as f:
        f.write('{"instance": "cut mid-li')      # a crash mid-write leaves half a line
    monkeypatch.setattr(bench, "run_job", real)
    ran = run_suite(suite, out, workers=1, progress=False)
    assert ran == len(jobs) - 3
    rows = load_rows(out)
    keys = [(r["instance"], r["solver"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(jobs)
    assert rows[:3] == first                     # nothing already written was lost
    assert run_suite(suite, out, workers=1, progress=False) == 0
    recs = summarize(rows)
    md = markdown(recs)
    assert "| tiny-4gpu-2region | 4 | cpsat |" in md and "0.00%" in md


def test_summary_reduces_against_our_best_on_every_instance():
    """Reductions by hand on two instances: (baseline - ours) / baseline, our best
    being the better of two of our solvers' medians (a local of the per-instance
    loop once shadowed the set of our solver names, and every instance after the
    first lost its reductions)."""
    def row(inst, solver, T, E):
        return {"instance_name": inst, "n_gpus": 8, "solver": solver, "label": solver, "objective": "time",
                "status": "heuristic", "time_s": T, "energy_j": E, "objective_value": T, "devices_used": 8,
                "wall_s": 1.0}
    rows = [row("a", "memetic", 10.0, 100.0), row("a", "greedy", 12.5, 200.0),
            row("b", "memetic", 4.0, 50.0), row("b", "cpsat", 3.0, 40.0),
            row("b", "dtfm", 6.0, 80.0)]
    recs = {(r["instance"], r["solver"]): r for r in summarize(rows)}
    assert recs[("a", "greedy")]["T_reduction"] == pytest.approx(0.2)
    assert recs[("a", "greedy")]["E_reduction"] == pytest.approx(0.5)
    assert recs[("b", "dtfm")]["best_solver"] == "cpsat"
    assert recs[("b", "dtfm")]["T_reduction"] == pytest.approx(0.5)
    assert recs[("b", "dtfm")]["E_reduction"] == pytest.approx(0.5)
    assert "T_reduction" not in recs[("b", "memetic")]


def test_process_pool_and_dask_local_cluster_give_the_same_rows(tmp_path):
    pytest.importorskip("dask.distributed", reason="the test extra installs dask; CI has it")
    suite = _suite(tmp_path, seeds=(0,))
    a, b = tmp_path / "pool.jsonl", tmp_path / "dask.jsonl"
    run_suite(suite, a, workers=2, progress=False)
    run_suite(suite, b, workers=2, dask="local", progress=False)
    key = lambda r: (r["instance"], r["solver"], r["seed"])  # noqa: E731
    ra = {key(r): r for r in load_rows(a)}
    rb = {key(r): r for r in load_rows(b)}
    assert ra.keys() == rb.keys() and len(ra) == 6
    for k in ra:   # deterministic solvers and budgets, same seeds: same results on both executors
        assert ra[k]["time_s"] == pytest.approx(rb[k]["time_s"], rel=1e-9)
        assert ra[k]["energy_j"] == pytest.approx(rb[k]["energy_j"], rel=1e-9)
        if k[1] != "cpsat":       # multi-threaded CP-SAT may pick another of equally good plans
            assert ra[k]["plan"] == rb[k]["plan"]


def test_plots_write_png_and_svg(tmp_path):
    from geotrain_opt.io import plots
    from geotrain_opt.solvers import get as g
    inst = load_instance(INSTANCES / "demo-8gpu.yaml")
    plan = g("cpsat")(inst, SolveOptions()).plan
    for fn, args in ((plots.gantt, (inst, plan)), (plots.region_map, (inst, plan)),
                     (plots.pareto, (inst, {"a": [(1.0, 2.0), (2.0, 1.0)]}))):
        out = fn(*args, tmp_path / fn.__name__)
        assert [p[-3:] for p in out] == ["png", "svg"]
        assert all((tmp_path / p).stat().st_size > 1000 for p in out)
    # the Gantt chart draws the simulator's trace: every slot of every replica, all-reduce last
    from geotrain_opt.cost.simulate import simulate
    sim = simulate(inst, plan, record=True)
    assert {d for d, *_ in sim.ops} == set(plan.devices)
    assert max(e for *_, e in sim.ops) == pytest.approx(sim.time_s, rel=1e-12)
    if plan.replicas > 1:
        assert sum(1 for op in sim.ops if op[1] == "AR") == len(plan.devices)


def test_rows_are_keyed_by_content_not_path(tmp_path, monkeypatch):
    """A sweep resumed from another folder, or after the instances moved, finds its rows;
    a changed instance file is a new run."""
    import shutil
    work = tmp_path / "a"
    (work / "inst").mkdir(parents=True)
    shutil.copy(INSTANCES / "tiny-4gpu-2region.yaml", work / "inst" / "t.yaml")
    (work / "s.yaml").write_text("name: k\ntime_limit: 2\nseeds: [0, 1]\ninstances: [inst/t.yaml]\nsolvers: [greedy]\n")
    out = tmp_path / "res.jsonl"
    monkeypatch.chdir(work)
    assert run_suite("s.yaml", out, workers=1, progress=False) == 2
    monkeypatch.chdir(tmp_path)                       # another cwd, the same suite
    assert run_suite(work / "s.yaml", out, workers=1, progress=False) == 0
    moved = tmp_path / "b"
    shutil.move(str(work), str(moved))                # the whole tree moved
    assert run_suite(moved / "s.yaml", out, workers=1, progress=False) == 0
    (moved / "inst" / "t.yaml").write_text((moved / "inst" / "t.yaml").read_text().replace(
        "global_batch: 4", "global_batch: 8"))
    assert run_suite(moved / "s.yaml", out, workers=1, progress=False) == 2
    rows = load_rows(out)
    assert len(rows) == 4 and len({r["instance_hash"] for r in rows}) == 2


def test_a_crashing_run_becomes_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from geotrain_opt.solvers import registry
    monkeypatch.setitem(registry._SPECS, "crash", registry.SolverSpec("crash", "tests.crash_solver", "baseline"))
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: c\ntime_limit: 2\nseeds: [0]\ninstances: [{INSTANCES / 'tiny-4gpu-2region.yaml'}]\n"
                     "solvers: [crash, greedy]\n")
    out = tmp_path / "res.jsonl"
    assert run_suite(suite, out, workers=1, progress=False) == 2
    rows = {r["solver"]: r for r in load_rows(out)}
    assert rows["crash"]["status"] == "error" and rows["crash"]["error"] == "OverflowError: int too large to convert"
    assert rows["greedy"]["status"] == "heuristic" and rows["greedy"]["time_s"] > 0
    assert run_suite(suite, out, workers=1, progress=False) == 0      # an error row counts as done


def test_a_second_sweep_on_the_same_results_stops_with_one_line(tmp_path):
    """The results file is locked while a sweep writes it: a second bench on it (here
    the CLI, in another process, while this one holds the lock) exits 2 with one line
    naming the file, and the file keeps exactly what it had; once the lock is free the
    sweep runs."""
    import subprocess
    import sys
    from geotrain_opt.common.outputs import OutputError, exclusive
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: l\ntime_limit: 2\nseeds: [0]\ninstances: [{INSTANCES / 'tiny-4gpu-2region.yaml'}]\n"
                     "solvers: [greedy]\n")
    out = tmp_path / "res.jsonl"
    out.write_text('{"key": "earlier", "instance": "x"}\n')
    with exclusive(out, "--results"):
        r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "bench", str(suite), "--results", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip().count("\n") == 0 and "in use by another run" in r.stderr and "res.jsonl" in r.stderr
        with pytest.raises(OutputError, match="--results: .* in use"):
            with exclusive(out, "--results"):
                pass
    assert out.read_text() == '{"key": "earlier", "instance": "x"}\n'
    assert run_suite(suite, out, workers=1, progress=False) == 1
    assert len(out.read_text().splitlines()) == 2
