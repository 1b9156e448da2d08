"""Real-world instances load, admit a feasible plan, and carry the cited figures."""
from __future__ import annotations

import subprocess
import sys

import pytest

from geotrain_opt import evaluate, load_instance
from geotrain_opt.construct.pieces import smallest_feasible_plan
from geotrain_opt.io.describe import describe_instance
from geotrain_opt.io.generate import FAMILIES, generate, to_yaml

from .conftest import INSTANCES

REAL = sorted((INSTANCES / "real").glob("*.yaml"))


def test_there_are_the_promised_instances():
    names = {p.stem for p in REAL}
    assert {n for n in names if n.startswith("dtfm-")} == {
        "dtfm-1-datacenter-ondemand", "dtfm-2-datacenter-spot", "dtfm-3-multi-datacenter",
        "dtfm-4-regional-geo", "dtfm-5-worldwide-geo", "dtfm-5b-worldwide-unbalanced"}
    assert sum(n.startswith("vldb-") for n in names) >= 2 and sum(n.startswith("mixed-gen") for n in names) >= 2


@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_loads_and_has_a_feasible_plan(path):
    assert path.read_text().startswith("# "), "header naming the sources"
    inst = load_instance(path)
    plan = smallest_feasible_plan(inst)
    assert plan is not None and evaluate(inst, plan).feasible
    assert "fits: yes" in describe_instance(inst)


def link(inst, a, b):
    u = next(i for i, d in enumerate(inst.devices) if d.region == a)
    v = next(i for i, d in enumerate(inst.devices) if d.region == b)
    return inst.alpha[u, v] * 1e3, inst.beta[u, v] * 8 / 1e9


def test_dtfm_figures():
    for p in REAL:
        if p.stem.startswith("dtfm-"):
            inst = load_instance(p)
            assert inst.n == 64 and {d.type for d in inst.devices} == {"V100-SXM2-16GB"}
            # the workload of DT-FM's measured runs
            assert inst.model.preset == "gpt3-xl" and inst.model.heads == 16 and inst.model.recompute == "full"
            assert inst.options.schedule == "gpipe" and inst.options.accumulation_steps == 2
    w = load_instance(INSTANCES / "real" / "dtfm-5-worldwide-geo.yaml")
    assert {r: sum(d.region == r for d in w.devices) for r in w.regions} == {r: 8 for r in w.regions}
    assert link(w, "virginia", "tokyo") == pytest.approx((143, 0.524))
    assert link(w, "seoul", "london") == pytest.approx((238, 0.342))
    assert link(w, "virginia", "ohio") == pytest.approx((11, 1.12))
    assert link(w, "oregon", "virginia") == pytest.approx((67, 0.79))
    assert link(w, "tokyo", "london") == pytest.approx((210, 0.366))      # all 28 pairs from DT-FM's table
    u = next(i for i, d in enumerate(w.devices) if d.region == "tokyo")
    assert w.alpha[u, u + 1] * 1e3 == pytest.approx(5) and w.beta[u, u + 1] * 8 / 1e9 == pytest.approx(2)
    r = load_instance(INSTANCES / "real" / "dtfm-4-regional-geo.yaml")
    assert link(r, "oregon", "virginia") == pytest.approx((67, 1.15))     # their regional scenario
    u = next(i for i, d in enumerate(r.devices) if d.region == "ohio")
    assert r.alpha[u, u + 1] * 1e3 == pytest.approx(5) and r.beta[u, u + 1] * 8 / 1e9 == pytest.approx(2)
    assert link(r, "california", "ohio") == pytest.approx((52, 1.02))
    m = load_instance(INSTANCES / "real" / "dtfm-3-multi-datacenter.yaml")
    assert {r: sum(d.region == r for d in m.devices) for r in m.regions} == {"ohio": 32, "virginia": 32}
    assert m.alpha[0, 1] * 1e3 == pytest.approx(1) and m.beta[0, 1] * 8 / 1e9 == pytest.approx(5)
    # Case 1: 3.125 Gbit/s between instances = the 25 Gbit/s NIC over 8 GPUs, 100 inside
    c = load_instance(INSTANCES / "real" / "dtfm-1-datacenter-ondemand.yaml")
    assert 8 / (c.arrays.inv_beta[0, 8] * 1e9) == pytest.approx(3.125)
    assert 8 / (c.arrays.inv_beta[0, 1] * 1e9) == pytest.approx(100)
    s = load_instance(INSTANCES / "real" / "dtfm-2-datacenter-spot.yaml")
    assert 8 / (s.arrays.inv_beta[0, 1] * 1e9) == pytest.approx(100)       # inside a quad
    assert 8 / (s.arrays.inv_beta[0, 4] * 1e9) == pytest.approx(1.25)      # quad to quad
    assert 8 / (s.arrays.inv_beta[40, 41] * 1e9) == pytest.approx(1.25)    # standalone machines
    u = load_instance(INSTANCES / "real" / "dtfm-5b-worldwide-unbalanced.yaml")
    counts = {r: sum(d.region == r for d in u.devices) for r in u.regions}
    assert counts == {"london": 13, "oregon": 13, "ohio": 9, "virginia": 7, "tokyo": 7, "frankfurt": 6,
                      "seoul": 5, "ireland": 4}


def test_vldb_figures():
    v = load_instance(INSTANCES / "real" / "vldb-t4-intercontinental.yaml")
    assert link(v, "us", "eu") == pytest.approx((51.5, 0.215))
    assert link(v, "eu", "australia") == pytest.approx((136, 0.069))
    assert {d.type for d in v.devices} == {"T4"} and v.n == 8


def test_describe_cli_on_real_instance():
    r = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "describe",
                        str(INSTANCES / "real" / "mixed-gen-3region-16.yaml")], capture_output=True, text=True)
    assert r.returncode == 0
    rows = [l.split() for l in r.stdout.splitlines()]
    assert ["virginia", "A100-SXM4-40GB", "4"] in [row[:3] for row in rows]
    assert ["oregon", "T4", "4"] in [row[:3] for row in rows]
    assert ["virginia", "-", "ohio", "11", "1.12"] in rows


@pytest.mark.parametrize("family,n", [("tiny", 4), ("small", 10), ("geo", 64), ("mixed-power", 8), ("memory-tight", 8), ("nodes", 6)])
def test_generated_families_are_byte_reproducible(family, n):
    assert family in FAMILIES
    a, b = to_yaml(generate(family, n, 5)), to_yaml(generate(family, n, 5))
    assert a == b and a != to_yaml(generate(family, n, 6))
