"""Issue 41: performance profiles (Dolan-Moré) from bench rows, by hand."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from geotrain_opt.analysis.performance import profile, ratios


def _rows():
    # instance a: x 10 (seeds 10, 10), y 11   -> ratios x 1, y 1.1
    # instance b: x 20, y 10                  -> x 2, y 1
    # instance c: x 5 (seeds 4, 6: median 5), y none   -> x 1, y inf
    # instance d: nobody has a plan           -> left out
    r = lambda i, s, v: {"instance_name": i, "solver": s, "status": "heuristic", "objective_value": v}  # noqa: E731
    return [r("a", "x", 10.0), r("a", "x", 10.0), r("a", "y", 11.0), r("b", "x", 20.0), r("b", "y", 10.0),
            r("c", "x", 4.0), r("c", "x", 6.0), r("c", "y", None), r("d", "x", None), r("d", "y", None)]


def test_ratios_and_profile_by_hand():
    rs = ratios(_rows())
    assert rs["x"] == [1.0, 2.0, 1.0] and rs["y"][:2] == [pytest.approx(1.1), 1.0] and math.isinf(rs["y"][2])
    prof = profile(_rows(), taus=(1.0, 1.1, 2.0, 100.0))
    assert prof["x"] == [pytest.approx(2 / 3), pytest.approx(2 / 3), 1.0, 1.0]
    assert prof["y"] == [pytest.approx(1 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3)]


def test_report_prints_and_draws_it(tmp_path):
    rows = [dict(r, status="heuristic", time_s=1.0, energy_j=1.0, wall_s=1.0, objective="time", n_gpus=4)
            for r in _rows()]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "report", str(tmp_path / "r.jsonl"), "--profile",
                        "--profile-plot", str(tmp_path / "prof")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Performance profile over 3 instances" in p.stdout and "| x | 0.67 |" in p.stdout
    assert (tmp_path / "prof.png").stat().st_size > 1000
