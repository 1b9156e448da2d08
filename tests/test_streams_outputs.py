"""Issue 39, the second campaign (benchmarks/fuzz_campaign.py): what it found, pinned.

Outputs never replace anything but a regular file (a FIFO, /dev/null, a link stay what
they are); inputs that are pipes never hang; calibration CSVs, plan and result files
and empty flag values are one-line errors; no infinite number reaches a result file.
"""
from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from geotrain_opt.common import inputs, outputs

from .conftest import TINY
from .test_fuzz import _run

PLAN = {"grid": [["e0", "w0"]], "cuts": [0, 2, 4], "micro_batches": [4]}


def _solve_to(target: str) -> tuple[int, str, str]:
    return _run("solve", TINY, "--solver", "greedy", "--quiet", "--out", target)


def test_a_fifo_nobody_reads_is_an_error_and_stays_a_fifo(tmp_path):
    """The campaign: ``--out FIFO`` replaced the FIFO by a regular file (as it did
    /dev/null, run as root). Nobody reads it: one line, and the FIFO is still there."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    rc, out, err = _solve_to(str(fifo))
    assert rc == 2 and err.strip() == f"error: --out: cannot write {fifo}: nothing reads this FIFO"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_with_a_reader_gets_the_whole_result(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    ready = threading.Event()

    def read() -> None:
        # a reader from the start (open without blocking), reading until the writer closes
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        ready.set()
        chunks: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                b = os.read(fd, 1 << 16)
            except BlockingIOError:      # a writer, no data yet
                time.sleep(0.01)
                continue
            if b:
                chunks.append(b)
            elif chunks:                 # the writer closed after writing
                break
            else:                        # no writer yet
                time.sleep(0.01)
        os.close(fd)
        got.append(b"".join(chunks))
    t = threading.Thread(target=read)
    t.start()
    ready.wait(10)
    rc, out, err = _solve_to(str(fifo))
    t.join(30)
    assert rc == 0, err
    assert json.loads(got[0])["plan"]["grid"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_stays_a_link_and_its_file_gets_the_result(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    rc, out, err = _solve_to(str(link))
    assert rc == 0, err
    assert link.is_symlink() and json.loads(real.read_text())["plan"]["grid"]


@pytest.mark.parametrize("kind,words", [("slash", "names a folder (it ends in '/'), not a file"),
                                        ("folder", "is a folder, not a file"),
                                        ("broken", "is a link to nothing")])
def test_outputs_that_are_no_file_are_one_line(tmp_path, kind, words):
    target = {"slash": str(tmp_path / "x.json") + "/", "folder": str(tmp_path),
              "broken": str(tmp_path / "dangling.json")}[kind]
    if kind == "broken":
        Path(target).symlink_to(tmp_path / "missing" / "x.json")
    rc, out, err = _solve_to(target)
    assert rc == 2 and err.startswith("error: --out: ") and words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("out", ["", " ", "DIR", "DIR/", "DIR/.png"])
def test_figure_outputs_name_a_file(tmp_path, out):
    """``plot --out ""`` wrote .png.png, ``--out DIR`` wrote DIR.png."""
    (tmp_path / "DIR").mkdir()
    target = out.replace("DIR", str(tmp_path / "DIR"))
    rc, _, err = _run("plot", TINY, "--kind", "map", "--out", target)
    assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["DIR"]


def test_write_never_replaces_a_special_file(tmp_path):
    """The unit under every writer: a FIFO is written in place or refused, never renamed over."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(outputs.OutputError, match="nothing reads this FIFO"):
        outputs.write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not list(tmp_path.glob(".*.tmp"))


def test_a_pipe_nobody_writes_to_is_an_error_not_a_hang(tmp_path, monkeypatch):
    """The campaign: a FIFO as the instance hung every command (open blocks until a writer comes)."""
    monkeypatch.setattr(inputs, "STREAM_IDLE_S", 0.2)
    fifo = tmp_path / "inst.yaml"
    os.mkfifo(fifo)
    rc, out, err = _run("validate", fifo)
    assert rc == 2 and err.strip().endswith("nothing arrived for 0.2 s (a pipe no one writes to?)")


def test_an_instance_from_a_pipe_is_read_once(tmp_path):
    """``validate <(cat inst.yaml)`` read the pipe twice (reader, then schema) and failed."""
    r, w = os.pipe()
    data = TINY.read_bytes()

    def feed() -> None:
        with os.fdopen(w, "wb") as f:
            f.write(data)
    t = threading.Thread(target=feed)
    t.start()
    try:
        rc, out, err = _run("validate", f"/dev/fd/{r}")
    finally:
        t.join(10)
        os.close(r)
    assert rc == 0 and out.startswith("ok: tiny-4gpu-2region: 4 devices"), err


@pytest.mark.parametrize("text,words", [
    ("instance,plan,measured_s\n" + "x" * 200_000 + ",p.json,1\n", "malformed CSV: field larger than field limit"),
    ("instance,plan,measured_s\nt.yaml\n", "line 2.plan: empty"),
    ("instance,plan,measured_s\nt.yaml,p.json,1,9\n", "line 2.columns: more fields than the 3 columns"),
    ("instance,plan,measured_s\n,p.json,1\n", "line 2.instance: empty"),
])
def test_calibration_csv_shapes_are_one_line(tmp_path, text, words):
    """The campaign: a 200 KB field was a csv.Error traceback; short and long rows a TypeError."""
    (tmp_path / "t.yaml").write_text(TINY.read_text())
    (tmp_path / "p.json").write_text(json.dumps(PLAN))
    (tmp_path / "runs.csv").write_text(text)
    rc, out, err = _run("calibrate", tmp_path / "runs.csv")
    assert rc == 2 and words in err and len(err.splitlines()) == 1, err


def test_calibrate_reads_no_endless_stream():
    rc, out, err = _run("calibrate", "/dev/zero")
    assert rc == 2 and err.strip().endswith("/dev/zero is longer than 16 MiB (an endless stream?)")


def test_a_misspelt_plan_field_is_an_error(tmp_path):
    """The campaign: ``stagess`` was ignored and the plan simulated (exit 0)."""
    (tmp_path / "p.json").write_text(json.dumps({**PLAN, "stagess": 2}))
    rc, out, err = _run("evaluate", TINY, tmp_path / "p.json")
    assert rc == 2 and "stagess: unknown field (a plan has schema, stages, replicas, grid" in err


@pytest.mark.parametrize("change,where", [({"solver_": "x"}, "<result> <root>"), ({"stats": []}, "<result> stats"),
                                          ({"status": "\x00"}, "<result> status")])
def test_a_broken_result_file_is_an_error(tmp_path, change, where):
    """The campaign: export-plan took the plan out of a result file whatever the rest held."""
    rc, out, err = _run("solve", TINY, "--solver", "greedy", "--quiet", "--out", tmp_path / "r.json")
    assert rc == 0
    d = json.loads((tmp_path / "r.json").read_text())
    rc, out, err = _run("export-plan", TINY, tmp_path / "r.json", "--to", "hostfile")
    assert rc == 0 and "slots=" in out                              # the untouched file exports
    (tmp_path / "bad.json").write_text(json.dumps({**d, **change}))
    rc, out, err = _run("export-plan", TINY, tmp_path / "bad.json", "--to", "hostfile")
    assert rc == 2 and f"error: plan: {where}: breaks geotrain_opt/io/schemas/result.schema.json" in err, err


@pytest.mark.parametrize("argv", [["evaluate", TINY, "P", "--calibration", ""], ["solve", "", "--solver", "greedy"],
                                  ["solve", TINY, "--seed-solvers", " "], ["pareto", TINY, "--solver", ""]])
def test_an_empty_flag_value_is_an_error(tmp_path, argv):
    """The campaign: ``--calibration ''`` was read as "no calibration" (exit 0)."""
    (tmp_path / "p.json").write_text(json.dumps(PLAN))
    rc, out, err = _run(*[tmp_path / "p.json" if a == "P" else a for a in argv])
    assert rc == 2 and err.strip().endswith(": empty value") and len(err.splitlines()) == 1, err


def test_results_hold_no_infinite_number():
    """The campaign: a TP case without a greedy plan printed ``"greedy_value": Infinity``."""
    from geotrain_opt.solvers.result import _finite
    assert _finite({"a": [1.0, float("inf"), {"b": float("nan")}], "c": (2, "x")}) == {"a": [1.0, None, {"b": None}],
                                                                                       "c": [2, "x"]}


def test_component_plans_stop_when_told():
    """The campaign: on 124 TP groups the memetic's component seeds took 0.9 s of a
    0.25-s share, with no look at the deadline."""
    from geotrain_opt.construct.heuristics import component_plans
    from geotrain_opt.problem.instance import load_instance
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "llama7b-3region-28.yaml")
    every = component_plans(inst)
    first = component_plans(inst, stop=lambda: True)
    assert 1 <= len(first) < len(every)
    assert all((a[0] == b[0]).all() for a, b in zip(first, every))   # the same plans, in order, cut short


def test_the_time_limit_bounds_the_wait_for_a_pipe(tmp_path):
    """The campaign: ``solve FIFO --time-limit 2`` waited the 20 s a silent stream gets."""
    import re
    fifo = tmp_path / "inst.yaml"
    os.mkfifo(fifo)
    rc, out, err = _run("solve", fifo, "--solver", "greedy", "--time-limit", "1")
    m = re.search(r"nothing arrived for ([0-9.e-]+) s", err)
    assert rc == 2 and m and float(m.group(1)) <= 1.0, err
    assert inputs.READ_DEADLINE is not None
    rc, out, err = _run("validate", TINY)            # the next command has no deadline of the last
    assert rc == 0 and inputs.READ_DEADLINE is None
