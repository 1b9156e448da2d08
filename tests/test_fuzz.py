"""Fuzzing the command line with mutated instance and plan files.

Every run must end in one of two ways: a clean one-line error with exit code 2,
or a result whose numbers are finite and re-evaluate (exit 0 or 1). Never an
internal error (exit 70, a traceback of ours), never ``inf``/``NaN`` in the output.
The default suite runs a fast profile; ``-m slow`` runs the long campaign.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import random
import re
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geotrain_opt import cli

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "instances" / "tiny-4gpu-2region.yaml", ROOT / "instances" / "demo-8gpu.yaml",
           ROOT / "instances" / "real" / "vldb-t4-intercontinental.yaml"]
WEIRD = [None, -1, 0, 1, 3, -1e-300, 1e-30, 0.5, 1e30, 10**30, 2**63, float("nan"), float("inf"),
         -float("inf"), "", " ", "x", "1e3", [], {}, True, [1, 2], {"a": 1}, [[[[]]]]]
NONFINITE = re.compile(r"\b(nan|NaN|inf|Infinity)\b")


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, data):
    """One to three random edits of a parsed document: replace a node by an odd
    value, scale a number, delete a node, or wrap it in a list."""
    for _ in range(data.draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return doc
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        kind = data.draw(st.sampled_from(["set", "set", "scale", "scale", "scale", "scale", "delete", "wrap"]))
        value = parent[last]
        if kind == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool):
            # plausible-looking numbers: these get past the reader and into the solvers
            f = data.draw(st.sampled_from([0, -1, 1e-9, 1e-3, 0.5, 2, 10, 1e3, 1e6, 1e12]))
            parent[last] = type(value)(value * f) if isinstance(value, int) and float(f).is_integer() else value * f
        elif kind in ("set", "scale"):
            parent[last] = copy.deepcopy(data.draw(st.sampled_from(WEIRD)))   # never share WEIRD itself
        elif kind == "delete":
            del parent[last]
        else:
            parent[last] = [parent[last]]
    return doc


def _run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as e:          # argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def _check(rc: int, out: str, err: str, argv: str) -> None:
    assert rc in (0, 1, 2, 3), f"{argv}: exit {rc}: {err.strip()}"
    if rc == 2:
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, f"{argv}: {err!r}"
    assert "Traceback" not in err and "internal error" not in err, f"{argv}: {err}"
    assert not NONFINITE.search(out), f"{argv}: non-finite number in output:\n{out[:2000]}"


STATS: dict[str, int] = {}


def _campaign(data) -> None:
    src = data.draw(st.sampled_from(SOURCES))
    doc = _mutate(yaml.safe_load(src.read_text()), data)
    with tempfile.TemporaryDirectory() as tmp:
        inst = Path(tmp) / "inst.yaml"
        inst.write_text(yaml.safe_dump(doc, allow_unicode=True))
        rc, out, err = _run("validate", inst)
        _check(rc, out, err, f"validate {src.name}")
        STATS[f"validate rc {rc}"] = STATS.get(f"validate rc {rc}", 0) + 1
        if rc != 0:
            return
        result = Path(tmp) / "r.json"
        rc, out, err = _run("solve", inst, "--solver", "greedy", "--time-limit", "2", "--quiet", "--out", result)
        _check(rc, out, err, f"solve {src.name}")
        if rc != 0:
            return
        plan = json.loads(result.read_text())["plan"]
        if data.draw(st.booleans()):
            plan = _mutate(plan, data)
        pfile = Path(tmp) / "plan.json"
        pfile.write_text(json.dumps(plan))
        for cmd in (("evaluate", inst, pfile, "--json"), ("simulate", inst, pfile, "--json"),
                    ("evaluate", inst, pfile)):
            rc, out, err = _run(*cmd)
            _check(rc, out, err, f"{cmd[0]} {src.name}")
            STATS[f"{cmd[0]} rc {rc}"] = STATS.get(f"{cmd[0]} rc {rc}", 0) + 1
            if rc in (0, 1) and "--json" in cmd:
                d = json.loads(out, parse_constant=lambda c: pytest.fail(f"{cmd[0]}: {c} in JSON"))
                t = d["time_s"] if cmd[0] == "evaluate" else d["simulated"]["time_s"]
                assert math.isfinite(t) and t > 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_fuzz_fast(data):
    _campaign(data)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 3000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzz_long(data):
    _campaign(data)


@pytest.mark.slow
def test_fuzz_long_report():
    """Prints the campaign's counts (run after test_fuzz_long, with -s)."""
    print("fuzz campaign:", json.dumps(STATS, sort_keys=True))
    assert sum(v for k, v in STATS.items() if k.startswith("validate")) > 0


@pytest.mark.parametrize("argv", [
    ["solve", "instances/tiny-4gpu-2region.yaml", "--lambda", "nan"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--lambda", "2"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--time-limit", "-5"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--workers", "-2"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--max-time-s", "nan"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--population", "0"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--seed", "-1"],
    ["solve", "instances/tiny-4gpu-2region.yaml", "--out", "/nonexistent/r.json"],
    ["pareto", "instances/tiny-4gpu-2region.yaml", "--out", "/nonexistent/r.json"],
    ["generate", "--family", "geo", "--gpus", "8", "--out", "/nonexistent/g.yaml"],
    ["report", "/nonexistent/results.jsonl"],
    ["verify", "--suite", "/nonexistent"],
    ["verify", "instances/tiny-4gpu-2region.yaml", "--report", "/nonexistent/v.md"],
    ["bench", "benchmarks/suites/headline.yaml", "--results", "/nonexistent/r.jsonl"],
    ["plot", "instances/tiny-4gpu-2region.yaml", "--kind", "scaling", "--out", "/tmp/x"],
    ["plot", "instances/tiny-4gpu-2region.yaml", "--kind", "map", "--out", "/nonexistent/x"],
])
def test_bad_flags_and_outputs_are_one_line_errors(argv, monkeypatch):
    """Flags get the instance file's rules, and outputs are checked before any work."""
    monkeypatch.chdir(ROOT)
    rc, out, err = _run(*argv)
    assert rc == 2, (argv, out, err)
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_non_utf8_deep_nesting_duplicates_and_nulls(tmp_path):
    base = (ROOT / "instances" / "tiny-4gpu-2region.yaml").read_text()
    cases = {
        "bytes.yaml": (b"name: \xff\xfe\n" + base.encode(), "not UTF-8 text"),
        "deep.yaml": ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        "deep.json": ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        "dup.yaml": (base + "\nname: again\n", "name: duplicate key"),
        "null.yaml": (base.replace("global_batch:", "global_batch: null #"), "model.global_batch: is null"),
    }
    for name, (text, msg) in cases.items():
        p = tmp_path / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        rc, out, err = _run("validate", p)
        assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, (name, err)


def test_output_write_failure_keeps_the_plan(tmp_path, monkeypatch):
    """If the result cannot be written after all, it is printed whole, then one error line."""
    from geotrain_opt.common import outputs
    def refuse(*a, **k):
        raise outputs.OutputError("--out: cannot write r.json: disk full")
    monkeypatch.setattr(outputs, "write_text", refuse)
    rc, out, err = _run("solve", ROOT / "instances" / "tiny-4gpu-2region.yaml", "--solver", "greedy",
                        "--quiet", "--out", tmp_path / "r.json")
    assert rc == 2 and "disk full" in err
    assert json.loads(out)["plan"]["grid"]


# ---- issue 39's second campaign (benchmarks/fuzz_campaign.py): its file strategies, in
# a fast derandomized profile; the campaign itself runs them by the thousand
sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_campaign as fc  # noqa: E402

FAST = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
BAD_SUITE_CASES = [(k, v) for k, vs in fc.SUITE_BAD.items() for v in vs]


@FAST
@given(st.sampled_from(BAD_SUITE_CASES))
def test_fuzz_bad_suites_are_one_line_errors(case):
    """A suite with a bad time limit, seeds, objective, solvers or instances: exit 2."""
    key, value = case
    suite = {"name": "fz", "time_limit": 1, "seeds": [0], "instances": [str(ROOT / "instances" / "tiny-4gpu-2region.yaml")],
             "solvers": [{"name": "greedy", "seeds": [0]}], key: value}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "s.yaml").write_bytes(fc.dump_yaml(suite))
        rc, out, err = _run("bench", Path(tmp) / "s.yaml", "--results", Path(tmp) / "r.jsonl", "--workers", "1")
        _check(rc, out, err, f"bench {key}={value!r}")
        assert rc == 2, f"bench accepted {key}: {value!r}"
        assert not (Path(tmp) / "r.jsonl").exists() or not (Path(tmp) / "r.jsonl").read_text().strip()


@FAST
@given(st.integers(0, 2**32 - 1))
def test_fuzz_mutated_suites(seed):
    """Structure-aware edits of a good suite: a clean run or a clean error, never more."""
    suite = {"name": "fz", "time_limit": 1, "seeds": [0], "instances": [str(ROOT / "instances" / "tiny-4gpu-2region.yaml")],
             "solvers": [{"name": "greedy", "seeds": [0]}]}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "s.yaml").write_bytes(fc.dump_yaml(fc.mutate(suite, random.Random(seed))))
        rc, out, err = _run("bench", Path(tmp) / "s.yaml", "--results", Path(tmp) / "r.jsonl", "--workers", "1")
        _check(rc, out, err, "bench mutated")


@FAST
@given(st.sampled_from(fc.CAL_BAD), st.integers(1, 3))
def test_fuzz_bad_measurements_are_one_line_errors(measured, rows):
    tiny = ROOT / "instances" / "tiny-4gpu-2region.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "t.yaml").write_text(tiny.read_text())
        (Path(tmp) / "p.json").write_text(json.dumps({"grid": [["e0", "w0"]], "cuts": [0, 2, 4], "micro_batches": [4]}))
        lines = ["instance,plan,measured_s"] + ["t.yaml,p.json,0.05"] * (rows - 1) + [f"t.yaml,p.json,{measured}"]
        (Path(tmp) / "runs.csv").write_text("\n".join(lines) + "\n")
        rc, out, err = _run("calibrate", Path(tmp) / "runs.csv")
        _check(rc, out, err, f"calibrate {measured!r}")
        assert rc == 2 and "measured_s" in err


_RESULT: dict = {}


@FAST
@given(st.integers(0, 2**32 - 1))
def test_fuzz_mutated_result_files(seed):
    """A result file the schema refuses is refused; any other is exported or refused cleanly."""
    from geotrain_opt.io.schema import schema_errors
    tiny = ROOT / "instances" / "tiny-4gpu-2region.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        if not _RESULT:
            rc, out, err = _run("solve", tiny, "--solver", "greedy", "--quiet", "--out", Path(tmp) / "r.json")
            _RESULT.update(json.loads((Path(tmp) / "r.json").read_text()))
        bad = fc.mutate(_RESULT, random.Random(seed))
        (Path(tmp) / "bad.json").write_text(json.dumps(bad))
        rc, out, err = _run("export-plan", tiny, Path(tmp) / "bad.json", "--to", "hostfile")
        _check(rc, out, err, "export-plan mutated result")
        if schema_errors(bad, "result") if isinstance(bad, dict) and "plan" in bad and "grid" not in bad else False:
            assert rc == 2, f"accepted a result the schema refuses: {schema_errors(bad, 'result')[0]}"


@FAST
@given(st.sampled_from([3, 6, 9, 12]), st.sampled_from(["name", "description", "source", "model", "devices"]))
def test_fuzz_alias_bombs_anywhere(levels, key):
    """Nested YAML aliases wherever they land: one short line, at once."""
    text = (ROOT / "instances" / "tiny-4gpu-2region.yaml").read_text()
    bomb = "x-anchors:\n" + "\n".join("  " + ln for ln in fc.anchor_bomb(levels).splitlines()) + "\n"
    body = re.sub(rf"(?m)^{key}:.*(\n[ \-].*)*", f"{key}: *a{levels - 1}", text, count=1)
    if body == text:
        body = text + f"\n{key}: *a{levels - 1}\n"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "b.yaml").write_text(bomb + body)
        rc, out, err = _run("validate", Path(tmp) / "b.yaml")
        _check(rc, out, err, f"alias bomb {levels} in {key}")
        assert rc == 2 and len(err) < 600


@pytest.mark.parametrize("sig,delay", [(signal.SIGKILL, 0.4), (signal.SIGKILL, 1.2), (signal.SIGTERM, 0.8),
                                       (signal.SIGINT, 1.0)])
def test_a_signal_never_leaves_half_a_result(tmp_path, sig, delay):
    """Killed at any moment, ``--out`` holds its old bytes or a whole new result."""
    import subprocess
    import time
    out = tmp_path / "r.json"
    out.write_text('{"keep": true}\n')
    proc = subprocess.Popen([sys.executable, "-m", "geotrain_opt.cli", "solve", str(ROOT / "instances" / "demo-8gpu.yaml"),
                             "--solver", "memetic", "--time-limit", "3", "-q", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    text = out.read_text()
    assert text == '{"keep": true}\n' or json.loads(text)["plan"]["grid"]
    assert not list(tmp_path.glob(".*.tmp")) or sig == signal.SIGKILL      # a kill cannot clean up
