"""Memetic solver: reaches proven optima, deterministic, honours its limits."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from geotrain_opt import evaluate, instance_from_dict, load_instance
from geotrain_opt.io.generate import generate
from geotrain_opt.analysis.fronts import pareto_front
from geotrain_opt.solvers import SolveOptions, get
from geotrain_opt.analysis.indicators import epsilon, hypervolume, igd_plus

from .conftest import INSTANCES
from .test_exact_agreement import SEEDS, tiny_instance


def test_reaches_proven_optimum_on_95_percent():
    hits, total, misses = 0, 0, []
    for seed in SEEDS:
        inst = tiny_instance(seed)
        exact = get("cpsat")(inst, SolveOptions(time_limit_s=60))
        assert exact.status in ("optimal", "infeasible")
        t = time.perf_counter()
        # 15 generations (all 30 optimal at 10): deterministic, and the suite stays short
        res = get("memetic")(inst, SolveOptions(time_limit_s=5, seed=seed, extra={"generations": 15}))
        assert time.perf_counter() - t < 6.0
        total += 1
        if exact.plan is None:
            hits += res.plan is None
            continue
        ev = evaluate(inst, res.plan)
        assert ev.acceptable and res.evaluation.time_s == pytest.approx(ev.time_s, rel=1e-12)
        # a heuristic never beats a proven optimum
        assert res.objective_value >= exact.objective_value * (1 - 1e-6)
        if res.objective_value <= exact.objective_value * (1 + 1e-3):
            hits += 1
        else:
            misses.append(seed)
    assert hits >= 0.95 * total, misses


def test_same_seed_same_result():
    inst = load_instance(INSTANCES / "demo-8gpu.yaml")
    opts = dict(time_limit_s=60, seed=7, extra={"generations": 15})
    a = get("memetic")(inst, SolveOptions(**opts))
    b = get("memetic")(inst, SolveOptions(**opts))
    assert a.plan == b.plan and a.stats["evaluations"] == b.stats["evaluations"]
    assert a.stats["generations"] == 15


def test_time_limit_honoured():
    inst = instance_from_dict(generate("geo", 128, 0))
    t = time.perf_counter()
    res = get("memetic")(inst, SolveOptions(time_limit_s=3, seed=1))
    assert time.perf_counter() - t < 3 + 2.0
    assert res.plan is not None and res.evaluation.feasible


def test_interrupt_returns_best_so_far(monkeypatch):
    import geotrain_opt.solvers.search.memetic.toolbox as mm      # where the toolbox takes it from
    inst = load_instance(INSTANCES / "demo-8gpu.yaml")
    calls = {"n": 0}
    real = mm.local_search

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] > 40:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(mm, "local_search", flaky)
    res = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=0))
    assert res.stats["interrupted"] is True
    assert res.plan is not None and evaluate(inst, res.plan).feasible


def test_pareto_mode_front_is_non_dominated_and_near_exact():
    inst = tiny_instance(57)
    exact = pareto_front(inst, "bruteforce", SolveOptions())
    heur = pareto_front(inst, "memetic", SolveOptions(time_limit_s=5, seed=0))
    pts = [(r.evaluation.time_s, r.evaluation.energy_j) for r in heur.pareto]
    ex = [(r.evaluation.time_s, r.evaluation.energy_j) for r in exact.pareto]
    assert len(pts) >= 3
    for p in pts:   # nothing the heuristic finds lies beyond the true front
        assert not any(q[0] < p[0] * (1 - 1e-9) and q[1] < p[1] * (1 - 1e-9) for q in pts)
        assert any(q[0] <= p[0] * (1 + 1e-9) and q[1] <= p[1] * (1 + 1e-9) for q in ex)
    ref = (max(t for t, _ in ex + pts) * 1.1, max(e for _, e in ex + pts) * 1.1)
    assert hypervolume(pts, ref) >= 0.95 * hypervolume(ex, ref)
    assert epsilon(pts, ex) <= 1.05 and igd_plus(pts, ex) >= 0
    assert heur.stats["hypervolume"] > 0


def test_indicators_by_hand():
    # two points (1, 3), (2, 1) under reference (4, 4): 3*1 + 2*2 = 7
    assert hypervolume([(1, 3), (2, 1)], (4, 4)) == pytest.approx(7.0)
    assert hypervolume([(5, 1)], (4, 4)) == 0.0                       # outside the box
    # front {(2, 2)} against reference {(1, 2), (2, 1)}: scale by 2 to dominate (1, 2)
    assert epsilon([(2, 2)], [(1, 2), (2, 1)]) == pytest.approx(2.0)
    # IGD+: distance from (1, 2) to the region (2, 2) dominates is 1, from (2, 1) also 1
    assert igd_plus([(2, 2)], [(1, 2), (2, 1)]) == pytest.approx(1.0)
    assert epsilon([(1, 2), (2, 1)], [(1, 2), (2, 1)]) == pytest.approx(1.0)


def test_parallel_map_gives_the_serial_result():
    inst = instance_from_dict(generate("geo", 64, 2))
    extra = {"generations": 4, "population": 80, "ls_rate": 0.0}
    serial = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=3, extra=dict(extra)))
    par = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=3, workers=2, extra=dict(extra, parallel=True)))
    assert par.plan == serial.plan and par.stats["evaluations"] == serial.stats["evaluations"]


def test_cli_memetic_solve(tmp_path):
    import json
    import subprocess
    import sys
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "solve", str(INSTANCES / "demo-8gpu.yaml"),
                        "--solver", "memetic", "--time-limit", "20", "--generations", "10", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["solver"] == "memetic" and d["evaluation"]["feasible"] and d["stats"]["generations"] == 10


def test_baseline_plans_as_seeds_are_never_lost():
    """``seed_solvers``: a baseline's plan enters generation 0, so the result is at least as good."""
    inst = load_instance(INSTANCES / "real" / "vldb-t4-a10-crosscloud.yaml")
    base = get("dtfm")(inst, SolveOptions(time_limit_s=1, seed=0))
    res = get("memetic")(inst, SolveOptions(time_limit_s=10, seed=0, extra={"seed_solvers": ["dtfm"], "generations": 1}))
    assert res.objective_value <= base.objective_value * (1 + 1e-12)
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "solve", str(INSTANCES / "tiny-4gpu-2region.yaml"),
                        "--solver", "memetic", "--seed-solvers", "nosuch", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown solver 'nosuch'" in r.stderr


def test_layouts_by_site_are_in_generation_0_on_cases_5_and_5_2():
    """On single-GPU machines spread over cities the layouts that win keep every
    ring inside a city or a pair of close ones (``site_rings``), or every replica
    inside a city (``site_replicas``), which none of the constructive seeds
    builds: generation 0 holds the plan site_rings gives at 8x6 (DT-FM Case 5,
    27.0434 s, 25.1797 s before GPipe's two phases; under cost model v2 30.8735 s,
    where the other seeds alone led to 33.2173 s), and site_replicas' at 16x3 on Case 5-2."""
    from geotrain_opt.construct.site_layouts import site_rings
    from geotrain_opt.problem.plan import Plan
    inst = load_instance(INSTANCES / "real" / "dtfm-5-worldwide-geo.yaml")
    want = evaluate(inst, Plan.from_indices(inst.ids, *site_rings(inst, 8, 6))).time_s
    res = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=0, extra={"generations": 1}))
    assert res.objective_value <= want * (1 + 1e-12) and want == pytest.approx(27.0434123791476, rel=1e-9)
    assert res.evaluation.time_s == pytest.approx(evaluate(inst, res.plan).time_s, rel=1e-12)
    # and a replica per city on Case 5-2 (16x3, 29.8278 s; v2: 31.2459 s, from the other seeds 33.3-37.3 s)
    from geotrain_opt.construct.site_layouts import site_replicas
    inst = load_instance(INSTANCES / "real" / "dtfm-5b-worldwide-unbalanced.yaml")
    want = evaluate(inst, Plan.from_indices(inst.ids, *site_replicas(inst, 16, 3))).time_s
    res = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=0, extra={"generations": 1}))
    assert res.objective_value <= want * (1 + 1e-12) and want == pytest.approx(29.82781390334511, rel=1e-9)


def test_islands_are_deterministic_and_migrate():
    inst = load_instance(INSTANCES / "demo-8gpu.yaml")
    opts = dict(time_limit_s=60, seed=4, extra={"islands": 3, "generations": 25, "migration_interval": 5})
    a, b = get("memetic")(inst, SolveOptions(**opts)), get("memetic")(inst, SolveOptions(**opts))
    assert a.plan.grid == b.plan.grid and a.objective_value == b.objective_value
    one = get("memetic")(inst, SolveOptions(time_limit_s=60, seed=4, extra={"generations": 25}))
    # three populations did more work than one (most evaluations are local search, whose
    # amount follows the landscape: 1.6x one population's under cost model v3, 3.2x under v2)
    assert a.stats["evaluations"] > one.stats["evaluations"]
    exact = get("cpsat")(inst, SolveOptions(time_limit_s=60))
    assert a.objective_value == pytest.approx(exact.objective_value, rel=1e-6)
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "solve", str(INSTANCES / "tiny-4gpu-2region.yaml"),
                        "--solver", "memetic", "--islands", "0", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 2 and "argument --islands: must be >= 1, got 0" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("backend", ["processes", "dask"])
def test_island_backends_give_the_inline_result(backend):
    """Each island's run depends on its own state only, so where it runs changes nothing."""
    if backend == "dask":
        pytest.importorskip("dask.distributed", reason="the test extra installs dask; CI has it")
    inst = load_instance(INSTANCES / "real" / "vldb-t4-a10-crosscloud.yaml")
    extra = {"islands": 3, "generations": 12, "migration_interval": 4}
    inline = get("memetic")(inst, SolveOptions(time_limit_s=120, seed=4, extra=dict(extra)))
    other = get("memetic")(inst, SolveOptions(time_limit_s=120, seed=4, workers=2,
                                              extra=dict(extra, island_backend=backend, dask="local")))
    assert other.stats["island_backend"] == backend and other.stats["generations"] == 12
    assert other.plan == inline.plan and other.stats["evaluations"] == inline.stats["evaluations"]
    assert [h[2:4] for h in other.stats["history"]] == [h[2:4] for h in inline.stats["history"]][3::4]


@pytest.mark.parametrize("flags", [[], ["--parallel"], ["--islands", "2", "--island-backend", "processes"]],
                         ids=["serial", "parallel", "island-pool"])
def test_ctrl_c_keeps_the_best_plan_and_writes_out(tmp_path, flags):
    """SIGINT at any moment (here: during generation 0 on 1,024 GPUs) returns the best
    plan known, constructive seeds included, writes --out, and leaves no worker behind."""
    import json
    import signal
    from geotrain_opt.io.generate import to_yaml
    inst = tmp_path / "geo1024.yaml"
    inst.write_text(to_yaml(generate("geo", 1024, 0)))
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "geotrain_opt.cli", "solve", str(inst), "--solver", "memetic",
                             "--time-limit", "120", "--quiet", "--out", str(out), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(6)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    d = json.loads(out.read_text())
    assert d["stats"]["interrupted"] and d["evaluation"]["feasible"] and d["plan"]["grid"]
    assert d["wall_s"] < 30
    # the process group is gone: no orphaned pool workers
    import os
    for _ in range(50):
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        left = subprocess.run(["ps", "-o", "pid,args", "-g", str(proc.pid)], capture_output=True, text=True).stdout
        pytest.fail(f"processes left behind:\n{left}")


@pytest.mark.parametrize("what", ["island-pool", "bench"])
def test_pool_workers_exit_when_the_parent_is_killed(tmp_path, what):
    """SIGKILL of the parent (OOM killer, kill -9) runs no clean-up; a worker busy
    with a long job (an island epoch of 10,000 generations, a 60-s bench run) must
    notice by itself and exit rather than finish its job as an orphan."""
    import os
    import signal
    inst = INSTANCES / "real" / "vldb-t4-a10-crosscloud.yaml"
    cli = [sys.executable, "-m", "geotrain_opt.cli"]
    if what == "bench":
        suite = tmp_path / "suite.yaml"
        suite.write_text(f"name: orphans\ntime_limit: 60\nseeds: [0, 1]\ninstances: [{inst}]\nsolvers: [memetic]\n")
        cmd = cli + ["bench", str(suite), "--results", str(tmp_path / "r.jsonl"), "--workers", "2", "--quiet"]
    else:
        cmd = cli + ["solve", str(inst), "--solver", "memetic", "--time-limit", "120", "--quiet", "--workers", "2",
                     "--islands", "2", "--island-backend", "processes", "--migration-interval", "10000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(300):       # until the pool is up: the group holds the parent and two workers
        if len(_group(proc.pid)) >= 3:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the worker pool never started")
    time.sleep(3)              # the workers are inside their jobs now
    proc.kill()
    proc.wait()
    for _ in range(50):
        left = _group(proc.pid)
        if not left:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"orphaned workers: {left}")


def _group(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    from pathlib import Path
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out
