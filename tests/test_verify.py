"""The verifier finds no inconsistency on the bundled tiny and small instances,
and does find one when a solver lies."""
from __future__ import annotations

import subprocess
import sys


from geotrain_opt import load_instance, solvers
from geotrain_opt.analysis.verifier import render, summary, verify_instance, verify_paths

from .conftest import INSTANCES

ALL = ["memetic", "cpsat", "milp", "bruteforce"]
# a fixed generation budget: deterministic, and well past what these sizes need
# (30/30 tiny instances optimal at 10 generations); the time limit is tested elsewhere
QUICK = {"memetic": {"generations": 15}}


def test_tiny_family_is_consistent():
    paths = sorted((INSTANCES / "tiny").glob("*.yaml"))
    assert len(paths) >= 10
    vers = verify_paths(paths, ALL, time_limit_s=20, seed=0, progress=False, extra=QUICK)
    assert [m for v in vers for m in v.inconsistencies] == []
    # brute force ran on every tiny instance, so every optimum is triple-checked
    assert all(any(r.solver == "bruteforce" and r.status in ("optimal", "infeasible") for r in v.runs) for v in vers)
    assert sum(v.optimum is not None for v in vers) >= 8


def test_bundled_small_instances_are_consistent():
    paths = sorted((INSTANCES / "small").glob("*.yaml"))
    assert len(paths) >= 3
    vers = verify_paths(paths, ALL, time_limit_s=30, seed=0, progress=False, extra=QUICK)
    assert [m for v in vers for m in v.inconsistencies] == []
    for v in vers:
        assert v.optimum is not None, v.instance           # proven by cpsat and milp
        memetic = next(r for r in v.runs if r.solver == "memetic")
        assert v.gap(memetic) is not None and v.gap(memetic) <= 1e-3
        brute = next(r for r in v.runs if r.solver == "bruteforce")
        assert brute.status == "refused" and "over the limit" in brute.note   # said, not skipped silently
    text = render(vers)
    assert "0 inconsistencies" in text and f"{len(vers)} refused" in text
    assert "bruteforce refused: " in text and "over the limit" in text
    brute_row = next(line for line in summary(vers).splitlines() if line.split()[:1] == ["bruteforce"])
    assert "- (refused)" in brute_row and "0/0" not in brute_row


def test_a_lying_solver_is_caught():
    solvers.register("liar", "tests.liar_solver", kind="exact")
    inst = load_instance(INSTANCES / "tiny-4gpu-2region.yaml")
    v = verify_instance(inst, ["bruteforce", "liar"], time_limit_s=10)
    text = " | ".join(v.inconsistencies)
    assert not v.ok
    assert "liar: reported T" in text                        # (a) re-evaluation
    assert "liar: proved optimum" in text                    # (b) exact methods disagree
    # the message names whose proof is beaten and shows both plans
    assert "bruteforce's plan (" in text and "beats the optimum liar proved (" in text
    assert text.count("grid [") >= 2
    assert set(v.plans) == {"bruteforce", "liar"} and "grid" in v.plans["liar"]


def test_cli_verify_exit_codes(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "verify", str(INSTANCES / "tiny-4gpu-2region.yaml"),
                         "--solvers", "cpsat,bruteforce", "--report", str(tmp_path / "r.md"), "--json-out", str(tmp_path / "r.json")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "1 instances verified, 0 inconsistencies" in ok.stdout
    assert (tmp_path / "r.md").read_text().count("| tiny-4gpu-2region |") == 2
    (tmp_path / "empty").mkdir()
    bad = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "verify", "--suite", str(tmp_path / "empty")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no instance files" in bad.stderr
