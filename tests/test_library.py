"""Issue 41: the benchmark library's records verify from scratch, and ``update``
records only what is better and verified."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

import geotrain_opt as gt
from geotrain_opt import Plan
from geotrain_opt.analysis import library as lib

from .conftest import INSTANCES

DEMO_OPT = Plan.make([["va-2", "va-0"], ["va-3", "va-1"]], [0, 14, 24], [4, 4])     # proven (test_ecosystem)
WORSE = Plan.make([["va-0", "va-1"]], [0, 12, 24], [8])


def test_every_record_of_the_bundled_library_verifies():
    idx = lib.load_index(INSTANCES / "lib")
    assert idx["records"], "the library is empty"
    checks = [lib.check_record(r, INSTANCES / "lib") for r in idx["records"]]
    assert [c for c in checks if not c.ok] == []
    names = [r["name"] for r in idx["records"]]
    assert len(names) == len(set(names))
    for r in idx["records"]:
        assert (r["status"] == "optimal") == (r.get("gap") is not None and r["gap"] <= 1e-6)
        if r.get("best"):
            # the command that reproduces it: the CLI, or a script of benchmarks/ (a layout no solver builds)
            assert r["best"]["solver"] and r["best"]["command"].startswith(("geotrain-opt ", "python benchmarks/"))


@pytest.fixture
def small_lib(tmp_path):
    root = tmp_path / "lib"
    (root / "instances").mkdir(parents=True)
    (root / "plans").mkdir()
    shutil.copyfile(INSTANCES / "demo-8gpu.yaml", root / "instances" / "demo.yaml")
    (root / "plans" / "demo.json").write_text(json.dumps(WORSE.to_dict()))
    inst = gt.load_instance(root / "instances" / "demo.yaml")
    worse = float(gt.evaluate(inst, WORSE).time_s)
    (root / "index.yaml").write_text(yaml.safe_dump({"version": "t", "records": [
        {"name": "demo", "instance": "instances/demo.yaml", "gpus": 8, "objective": "time", "status": "open",
         "gap": None, "best": {"value": worse, "plan": "plans/demo.json", "solver": "hand", "command": "x"}}]}))
    return root, inst, worse


def test_update_takes_only_better_and_verified(small_lib, tmp_path):
    root, inst, worse = small_lib
    assert lib.check_record(lib.record(lib.load_index(root), "demo"), root).ok
    (tmp_path / "opt.json").write_text(json.dumps(DEMO_OPT.to_dict()))
    (tmp_path / "worse.json").write_text(json.dumps(WORSE.to_dict()))
    by = {"solver": "cpsat", "version": "t", "command": "geotrain-opt solve"}
    assert lib.compare("demo", str(tmp_path / "worse.json"), root)[0] == "matches"
    assert lib.update("demo", str(tmp_path / "worse.json"), None, by, root) == []
    opt = float(gt.evaluate(inst, DEMO_OPT).time_s)
    assert lib.compare("demo", str(tmp_path / "opt.json"), root) == ("beats", opt, worse)
    assert lib.update("demo", str(tmp_path / "opt.json"), opt * 0.9, by, root)
    rec = lib.record(lib.load_index(root), "demo")
    assert rec["best"]["value"] == opt and rec["status"] == "open" and rec["gap"] == pytest.approx(0.1)
    assert lib.compare("demo", str(tmp_path / "worse.json"), root)[0] == "worse"
    with pytest.raises(lib.LibraryError, match="not a lower bound"):
        lib.update("demo", None, opt * 1.01, by, root)
    lib.update("demo", None, opt, by, root)                         # the proof closes it
    rec = lib.record(lib.load_index(root), "demo")
    assert rec["status"] == "optimal" and rec["gap"] == 0 and lib.check_record(rec, root).ok
    assert lib.update("demo", None, opt * 0.5, by, root) == []     # a weaker bound is not recorded


def test_a_tampered_record_fails_the_check(small_lib):
    root, inst, worse = small_lib
    idx = lib.load_index(root)
    idx["records"][0]["best"]["value"] = worse * 0.99
    (root / "index.yaml").write_text(lib.dump_index(idx))
    c = lib.check_record(lib.record(lib.load_index(root), "demo"), root)
    assert not c.ok and "the plan evaluates to" in c.message
    idx["records"][0]["best"]["value"] = worse
    idx["records"][0].update(status="optimal", bound={"value": worse * 0.5})
    (root / "index.yaml").write_text(lib.dump_index(idx))
    assert "marked optimal" in lib.check_record(lib.record(lib.load_index(root), "demo"), root).message


def test_cli_lists_and_checks(small_lib):
    root, _, _ = small_lib
    run = lambda *a: subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    r = run("lib", "--lib", root, "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["name"] == "demo", r.stderr
    r = run("lib", "--lib", root, "check")
    assert r.returncode == 0 and "ok   demo" in r.stdout
    r = run("lib", "--lib", root, "check", "nope")
    assert r.returncode == 0 and "0 of 0" in r.stderr
    r = run("lib", "--lib", root, "update", "nope", "--solver", "x")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1


def test_the_docs_show_the_library_as_it_is():
    """docs/library.md renders the records as `geotrain-opt lib list` prints them: an
    update that is not rendered there fails here."""
    from pathlib import Path
    idx = lib.load_index(INSTANCES / "lib")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    assert lib.markdown(lib.table(idx), str(idx.get("version"))) in doc
