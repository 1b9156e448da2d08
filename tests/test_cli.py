"""The command line, end to end, in a subprocess as a user runs it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from geotrain_opt import Plan, SolverResult, evaluate, load_instance

from .conftest import INSTANCES, TINY


def cli(*args):
    return subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_evaluate_json_has_contract_keys(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"stages": 2, "replicas": 1, "grid": [["e0", "w0"]],
                                "cuts": [0, 2, 4], "micro_batches": [4]}))
    r = cli("evaluate", TINY, plan, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("feasible", "violations", "time_s", "energy_j", "pipeline_s", "allreduce_s",
                "busy_j", "wait_j", "network_j", "memory_bytes"):
        assert key in d
    assert d["time_s"] == pytest.approx(0.0684, rel=1e-12)      # hand-computed in test_evaluator_hand (1F1B's window)
    assert d["energy_j"] == pytest.approx(12.24 + 13.02 + 0.16, rel=1e-12)    # busy + wait + network, same test
    human = cli("evaluate", TINY, plan)
    assert human.returncode == 0 and "iteration time T  = 0.0684 s" in human.stdout


def test_evaluate_infeasible_exits_1(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"grid": [["e0"], ["e0"]], "cuts": [0, 4], "micro_batches": [2, 2]}))
    r = cli("evaluate", TINY, plan, "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["feasible"] is False


def test_describe_counts_and_links():
    r = cli("describe", INSTANCES / "demo-8gpu.yaml")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert any(l.split()[:3] == ["virginia", "A100-SXM4-40GB", "4"] for l in lines)
    assert any(l.split()[:3] == ["oregon", "T4", "2"] for l in lines)
    assert any(l.split() == ["virginia", "-", "ohio", "11", "1.12"] for l in lines)
    assert "fits: yes" in r.stdout


@pytest.mark.parametrize("solver", ["bruteforce", "cpsat", "milp"])
def test_solve_writes_a_result_that_reevaluates(tmp_path, solver):
    out = tmp_path / "res.json"
    r = cli("solve", TINY, "--solver", solver, "--time-limit", 30, "--out", out)
    assert r.returncode == 0, r.stderr
    inst = load_instance(TINY)
    res = SolverResult.load(out, inst)
    assert res.status == "optimal" and res.solver == solver
    raw = json.loads(out.read_text())
    ev = evaluate(inst, Plan.load(out))
    # optimum of the tiny instance: 2 replicas of the whole model on e0 and e1 (hand-checked)
    assert raw["evaluation"]["time_s"] == pytest.approx(0.01584 + 1.40104e-3, rel=1e-12)
    assert ev.time_s == pytest.approx(raw["evaluation"]["time_s"], rel=1e-9)
    assert raw["gap"] == 0.0 and raw["seed"] == 0 and raw["stats"]["command_time_limit_s"] == 30
    # the solver's own limit is what loading left of the command's 30 s (issue 39)
    assert 0 < raw["settings"]["time_limit_s"] < 30


def test_pareto_cli(tmp_path):
    r = cli("pareto", TINY, "--solver", "cpsat", "--time-limit", 60)
    assert r.returncode == 0, r.stderr
    assert "non-dominated plans (optimal)" in r.stdout


def test_generate_is_reproducible(tmp_path):
    a = cli("generate", "--family", "small", "--gpus", 10, "--seed", 3)
    b = cli("generate", "--family", "small", "--gpus", 10, "--seed", 3)
    c = cli("generate", "--family", "small", "--gpus", 10, "--seed", 4)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout
    f = tmp_path / "g.yaml"
    f.write_text(a.stdout)
    assert load_instance(f).n == 10


def test_generate_rejects_bad_size():
    r = cli("generate", "--family", "tiny", "--gpus", 50)
    assert r.returncode == 2 and "must be in 2..6" in r.stderr
