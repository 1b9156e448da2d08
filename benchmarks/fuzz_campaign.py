"""Issue 39's fuzz campaign: every command run as a user runs it (a fresh process),
on inputs built by the strategies the issue names, each run judged by oracles that
do not trust the program.

    python benchmarks/fuzz_campaign.py --runs 1600 --seed 11 --workers 2 \
        --out benchmarks/results/fuzz_campaign.md

Strategies (``STRATEGIES``): structure-aware mutations of every bundled instance
(the planning levers and TP instances included); mutated plans, results, calibration
CSVs and bench suites; flags at odd values; raw bytes and endless streams; YAML
anchor bombs; extreme valid instances; output targets that are not regular files;
signals (SIGINT, SIGTERM, SIGKILL) at random moments; and whole-command time limits
on generated instances of 8-4,096 GPUs with and without levers (run alone, after
the rest, so that the other runs do not take their cores).

A run fails the campaign when it: prints a traceback or exits 70 ("traceback");
has not ended long after its limit ("hang"); exits 2 without exactly one line
``error: ...`` of at most 600 characters ("bad error"); prints a non-finite number
or a negative time, energy, cost or carbon ("number"); exits 0 on input an
independent oracle calls invalid ("nonsense": the published JSON schema, or the
strategy's own rule, e.g. a suite's ``time_limit: nan``); ends past its time limit
+ max(10 %, 1 s) ("overrun"); or loses or replaces what was already written
("clobber"). Reproducers of failures are kept under ``--keep``.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from geotrain_opt.io.schema import schema_errors  # noqa: E402

SOLVERS = ["greedy", "memetic", "cpsat", "milp", "dtfm", "random-search", "simulated-annealing", "plain-ga",
           "megatron-uniform", "proportional", "sailor-like", "bruteforce"]
WEIRD = [None, -1, 0, 1, 3, -1e-300, 1e-320, 1e-30, 0.5, 1e30, 1e308, 10**30, 2**63, float("nan"), float("inf"),
         -float("inf"), "", " ", "x", "1e3", "\x00", "é" * 3, "a" * 5000, [], {}, True, False, [1, 2], {"a": 1},
         [[[[]]]]]
NONFINITE = re.compile(r"(?<![\w.])(-?nan|NaN|-?inf|-?Infinity)(?![\w])")
NONNEG_KEYS = re.compile(r"(^|_)(time_s|energy_j|cost_usd|carbon_g|seconds|joules|bound|value)$")
MAX_ERROR = 600


@dataclass
class Case:
    """One run: its argv (after ``geotrain-opt``), what judges it, and how it is driven."""
    strategy: str
    argv: list[str]
    invalid: str = ""                       # why an oracle calls the input invalid ("" = no verdict)
    limit: float | None = None              # the command's --time-limit (overrun check)
    signal_at: tuple[int, float] | None = None    # (signal, seconds after start)
    protect: dict[str, bytes | None] = field(default_factory=dict)   # path -> bytes that must survive
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)              # reproducer files


# ---------------------------------------------------------------- inputs

def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def mutate(doc: Any, rng: random.Random, edits: int | None = None) -> Any:
    """One to three structure-aware edits: an odd value, a scaled number, a deleted,
    duplicated, wrapped or renamed node, or two siblings swapped."""
    doc = copy.deepcopy(doc)
    for _ in range(edits or rng.choice([1, 1, 1, 2, 3])):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return doc
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last, value = path[-1], parent[path[-1]]
        kind = rng.choice(["set", "scale", "scale", "scale", "delete", "wrap", "dup", "rename", "swap"])
        if kind == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool):
            f = rng.choice([0, -1, 1e-9, 1e-3, 0.5, 2, 10, 1e3, 1e6, 1e12])
            parent[last] = type(value)(value * f) if isinstance(value, int) and float(f).is_integer() else value * f
        elif kind == "delete":
            del parent[last]
        elif kind == "wrap":
            parent[last] = [value]
        elif kind == "dup" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(value))
        elif kind == "rename" and isinstance(parent, dict):
            parent[str(last) + rng.choice(["_", "s", "X"])] = parent.pop(last)
        elif kind == "swap" and isinstance(parent, list) and len(parent) > 1:
            j = rng.randrange(len(parent))
            parent[last], parent[j] = parent[j], parent[last]
        else:
            parent[last] = copy.deepcopy(rng.choice(WEIRD))
    return doc


def dump_yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode()


def anchor_bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i-1}"] * 9) + "]")
    return "\n".join(lines)


class Pool:
    """The campaign's inputs: bundled instances with a good plan and result for each."""

    def __init__(self, work: Path, max_devices: int = 300) -> None:
        self.work = work
        self.instances: list[tuple[Path, dict]] = []
        for p in sorted(ROOT.glob("instances/**/*.yaml")):
            if p.name == "index.yaml":
                continue
            doc = yaml.safe_load(p.read_text())
            if isinstance(doc, dict) and len(doc.get("devices") or doc.get("nodes") or []) <= max_devices:
                self.instances.append((p, doc))
        self.results: dict[Path, dict] = {}

    def result(self, path: Path) -> dict | None:
        """A greedy result of this instance (cached; None where it has no plan)."""
        if path not in self.results:
            out = self.work / (f"r{len(self.results)}.json")
            subprocess.run(_cmd(["solve", str(path), "--solver", "greedy", "--time-limit", "5", "--quiet",
                                 "--out", str(out)]), capture_output=True, timeout=120)
            self.results[path] = json.loads(out.read_text()) if out.exists() else None
        return self.results[path]

    def with_result(self, rng: random.Random) -> tuple[Path, dict]:
        while True:
            path, _ = rng.choice(self.instances)
            res = self.result(path)
            if res and res.get("plan"):
                return path, res


def _cmd(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "geotrain_opt.cli", *argv]


# ---------------------------------------------------------------- strategies

def s_instance(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, doc = rng.choice(pool.instances)
    bad = mutate(doc, rng)
    f = tmp / "inst.yaml"
    f.write_bytes(dump_yaml(bad))
    errs = schema_errors(bad)
    cmd = rng.choice(["validate", "describe", "describe-json", "solve", "evaluate", "simulate", "pareto"])
    if cmd in ("evaluate", "simulate"):
        res = pool.result(path)
        if not res or not res.get("plan"):
            cmd = "solve"
        else:
            (tmp / "plan.json").write_text(json.dumps(res["plan"]))
            return Case("instance", [cmd, str(f), str(tmp / "plan.json"), "--json"], "; ".join(errs[:1]))
    if cmd == "describe-json":
        return Case("instance", ["describe", str(f), "--json"], "; ".join(errs[:1]))
    if cmd in ("solve", "pareto"):
        lim = rng.choice([1, 2, 3])
        solver = rng.choice(SOLVERS[:-1])
        argv = [cmd, str(f), "--solver", solver, "--time-limit", str(lim), "--json"]
        if cmd == "solve":
            argv += ["--quiet"]
        return Case("instance", argv, "; ".join(errs[:1]), limit=lim)
    return Case("instance", [cmd, str(f)], "; ".join(errs[:1]))


def s_plan(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, res = pool.with_result(rng)
    plan = mutate(res["plan"], rng)
    (tmp / "plan.json").write_text(json.dumps(plan))
    errs = schema_errors(plan, "plan")
    cmd = rng.choice(["evaluate", "simulate", "export-plan", "solve-hint"])
    if cmd == "export-plan":
        bad = dict(res, plan=plan)
        (tmp / "res.json").write_text(json.dumps(bad))
        to = rng.choice(["megatron", "deepspeed", "torch-pipelining", "hostfile", "launch-megatron", "launch-torch"])
        return Case("plan", ["export-plan", str(path), str(tmp / "res.json"), "--to", to,
                             "--out", str(tmp / "export")], "; ".join(errs[:1]))
    if cmd == "solve-hint":
        return Case("plan", ["solve", str(path), "--solver", "memetic", "--time-limit", "2", "--hint",
                             str(tmp / "plan.json"), "--quiet", "--json"], "; ".join(errs[:1]), limit=2)
    return Case("plan", [cmd, str(path), str(tmp / "plan.json"), "--json"], "; ".join(errs[:1]))


def s_result(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, res = pool.with_result(rng)
    bad = mutate(res, rng)
    (tmp / "res.json").write_text(json.dumps(bad))
    errs = schema_errors(bad, "result")
    to = rng.choice(["megatron", "deepspeed", "hostfile", "launch-torch"])
    return Case("result", ["export-plan", str(path), str(tmp / "res.json"), "--to", to,
                           "--out", str(tmp / "export")], "; ".join(errs[:1]))


def _calibration_runs(pool: Pool, rng: random.Random, tmp: Path) -> list[list[str]]:
    rows = []
    for i in range(rng.choice([1, 2, 3, 4, 6])):
        path, res = pool.with_result(rng)
        shutil.copy(path, tmp / f"i{i}.yaml")
        (tmp / f"p{i}.json").write_text(json.dumps(res["plan"]))
        rows.append([f"i{i}.yaml", f"p{i}.json", f"{res['evaluation']['time_s'] * rng.uniform(0.8, 1.6):.6g}"])
    return rows


CAL_BAD = ["nan", "inf", "-1", "0", "1e308", "1e-300", "x", "", "-inf", "1e400"]


def s_calibration(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    rows = _calibration_runs(pool, rng, tmp)
    invalid = ""
    kind = rng.choice(["value", "value", "path", "column", "text", "fit", "none"])
    if kind == "value":
        v = rng.choice(CAL_BAD)
        rows[rng.randrange(len(rows))][2] = v
        invalid = f"measured_s {v!r}"
    elif kind == "path":
        col = rng.choice([0, 1])
        rows[0][col] = rng.choice(["missing.yaml", "", "/dev/urandom", ".."] + (["p0.json"] if col == 0 else []))
        invalid = f"path {rows[0][:2]}"
    head = ["instance", "plan", "measured_s"]
    if kind == "column":
        head[rng.randrange(3)] = rng.choice(["", "inst", "measured"])
        invalid = f"header {head}"
    text = "\n".join([",".join(head)] + [",".join(r) for r in rows]) + "\n"
    if kind == "text":
        text = text[: rng.randrange(len(text))] + rng.choice(["\x00", '"', ",,,,", "\n\n", "é"]) + text[rng.randrange(len(text)):]
    (tmp / "runs.csv").write_text(text)
    argv = ["calibrate", str(tmp / "runs.csv"), "--out", str(tmp / "cal.json")]
    if kind == "fit":
        fit = rng.choice(["", "efficiency,efficiency", "bogus", "exposed_comm", ","])
        argv += ["--fit", fit]
        invalid = f"--fit {fit!r}" if fit != "exposed_comm" else ""
    return Case("calibration", argv, invalid)


SUITE_BAD = {"time_limit": [0, -1, "nan", float("inf"), "x", [], None],
             "seeds": [[-1], "0", [1.5], [], None, {"a": 1}, [True]],
             "objective": ["bogus", 3, []],
             "solvers": [[], ["nope"], "greedy", [{"name": 3}], [{"seeds": [0]}]],
             "instances": [[], ["missing.yaml"], "x", [3], None]}


def s_suite(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, _ = rng.choice([p for p in pool.instances if "tiny" in p[0].name or "demo-8gpu.yaml" == p[0].name])
    suite = {"name": "fz", "time_limit": 1, "seeds": [0], "instances": [str(path)],
             "solvers": [{"name": "greedy", "seeds": [0]}]}
    invalid = ""
    if rng.random() < 0.6:
        key = rng.choice(sorted(SUITE_BAD))
        suite[key] = rng.choice(SUITE_BAD[key])
        invalid = f"{key}: {suite[key]!r}"
    else:
        suite = mutate(suite, rng)
        if isinstance(suite, dict) and not isinstance(suite.get("time_limit", 1), (int, float)):
            invalid = f"time_limit {suite.get('time_limit')!r}"
    (tmp / "suite.yaml").write_bytes(dump_yaml(suite))
    return Case("suite", ["bench", str(tmp / "suite.yaml"), "--results", str(tmp / "rows.jsonl"), "--workers", "1"],
                invalid, limit=None)


def _flag_table() -> list[tuple[str, str, Any]]:
    from geotrain_opt.cli.parser import build_parser
    out = []
    sub = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.option_strings and a.nargs != 0 and a.dest not in ("help", "out", "dask"):
                out.append((name, a.option_strings[-1], a.type))
    return out


FLAG_BAD = ["nan", "inf", "-1", "", "-0.5", "1e400", "x", ",", "0x10", "99x99", " "]


def s_flags(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, res = pool.with_result(rng)
    cmd, flag, typ = rng.choice([f for f in _flag_table() if f[0] in ("solve", "pareto", "simulate", "evaluate",
                                                                       "describe", "verify")])
    value = rng.choice(FLAG_BAD)
    (tmp / "plan.json").write_text(json.dumps(res["plan"]))
    pos = [str(path), str(tmp / "plan.json")] if cmd in ("evaluate", "simulate") else [str(path)]
    argv = [cmd, *pos, flag, value]
    lim = None
    if cmd in ("solve", "pareto", "verify") and flag != "--time-limit":
        argv += ["--time-limit", "2"]
        lim = 2.0 if cmd != "verify" else None       # verify's limit is each solver's
    # empty is never a valid value; nan and inf are none of a number flag's
    kind = getattr(typ, "__name__", "")
    numeric = kind in ("number", "integer", "float", "int")
    listed = kind.startswith("list")                 # "," is an empty list, but a fine file name
    invalid = f"{flag} {value!r}" if value in ("", " ") or (listed and value == ",") or \
        (numeric and value in ("nan", "inf", "1e400", ",")) else ""
    return Case("flags", argv, invalid, limit=lim)


def s_raw(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    kind = rng.choice(["bytes", "text", "empty", "dir", "urandom", "zero", "fifo", "huge-line", "json-junk"])
    f = tmp / "raw.yaml"
    if kind == "bytes":
        f.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000))))
    elif kind == "text":
        f.write_text("".join(rng.choice("ab: -[]{}\n\t&*!|>'\"#%@`,?0123456789") for _ in range(rng.randrange(1, 3000))))
    elif kind == "empty":
        f.write_text("")
    elif kind == "dir":
        f.mkdir()
    elif kind == "urandom":
        f = Path("/dev/urandom")
    elif kind == "zero":
        f = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(f)
    elif kind == "huge-line":
        f.write_text("name: " + "x" * 300_000 + "\ndevices: 3\n")
    else:
        f.write_text(json.dumps(rng.choice(WEIRD)))
    cmd = rng.choice(["validate", "describe", "solve", "evaluate", "simulate", "calibrate", "report", "bench"])
    if cmd in ("evaluate", "simulate"):
        path, res = pool.with_result(rng)
        argv = [cmd, str(path), str(f)] if rng.random() < 0.5 else [cmd, str(f), str(path)]
    elif cmd == "solve":
        argv = ["solve", str(f), "--solver", "greedy", "--time-limit", "2"]
    elif cmd == "bench":
        argv = ["bench", str(f), "--results", str(tmp / "rows.jsonl")]
    else:
        argv = [cmd, str(f)]
    return Case("raw", argv, f"raw {kind}", limit=2 if cmd == "solve" else None)


def s_anchors(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, doc = rng.choice(pool.instances)
    text = path.read_text()
    levels = rng.choice([3, 6, 9, 12])
    key = rng.choice(["name", "description", "source", "model", "devices", "links"])
    bomb = anchor_bomb(levels)
    last = f"*a{levels - 1}"
    body = re.sub(rf"(?m)^{key}:.*(\n[ \-].*)*", f"{key}: {last}", text, count=1)
    if body == text:
        body = text + f"\n{key}: {last}\n"
    (tmp / "bomb.yaml").write_text("x-anchors:\n" + "\n".join("  " + ln for ln in bomb.splitlines()) + "\n" + body)
    cmd = rng.choice(["validate", "describe", "solve"])
    argv = [cmd, str(tmp / "bomb.yaml")] + (["--time-limit", "2", "--solver", "greedy"] if cmd == "solve" else [])
    return Case("anchors", argv, f"anchors {levels} levels in {key}", limit=2 if cmd == "solve" else None)


def s_extreme(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    """Valid but extreme: one GPU, one layer, giant batches, tiny links, odd sizes."""
    gpus = rng.choice([2, 3, 5, 16, 64])
    argv_gen = ["generate", "--family", "tiny" if gpus <= 6 else "geo", "--gpus", str(gpus),
                "--seed", str(rng.randrange(100)), "--out", str(tmp / "g.yaml")]
    r = subprocess.run(_cmd(argv_gen), capture_output=True, timeout=120)
    if r.returncode != 0 or not (tmp / "g.yaml").exists():
        return Case("extreme", argv_gen, "")
    doc = yaml.safe_load((tmp / "g.yaml").read_text())
    m = doc.get("model", {})
    edit = rng.choice(["layers", "global_batch", "micro", "bandwidth", "latency", "one-gpu", "levers", "none"])
    if edit == "one-gpu" and isinstance(doc.get("devices"), list) and doc["devices"]:
        doc["devices"] = [dict(doc["devices"][0], count=1)] if "count" in doc["devices"][0] else doc["devices"][:1]
    if edit == "levers":
        doc = with_levers(doc)
        m = doc["model"]
    if edit == "layers" and isinstance(m, dict):
        m["layers"] = rng.choice([1, 2, 1000])
    elif edit == "global_batch" and isinstance(m, dict):
        m["global_batch"] = rng.choice([1, 3, 10**6])
    elif edit == "micro" and isinstance(m, dict):
        m["micro_batch"] = rng.choice([1, 7, 4096])
    elif edit in ("bandwidth", "latency"):
        net = doc.get("network") or {}
        for ln in [net.get("intra_region"), *(net.get("inter_region") or [])]:
            if isinstance(ln, dict):
                if edit == "bandwidth":
                    ln["bandwidth_gbps"] = rng.choice([1e-3, 1e4])
                else:
                    ln["latency_ms"] = rng.choice([0, 1e4])
    (tmp / "g.yaml").write_bytes(dump_yaml(doc))
    solver = rng.choice(SOLVERS[:-1])
    return Case("extreme", ["solve", str(tmp / "g.yaml"), "--solver", solver, "--time-limit", "2", "--json"],
                "; ".join(schema_errors(doc)[:1]), limit=2)


def s_outputs(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, _ = rng.choice(pool.instances[:20])
    kind = rng.choice(["devnull", "fifo", "dir", "slash", "empty", "long", "symlink-dir", "readonly", "existing"])
    protect: dict[str, bytes | None] = {}
    target: Path | str = tmp / "out.json"
    invalid = f"--out {kind}"
    if kind == "devnull":
        target = Path("/dev/null")
        invalid = ""                      # writing to /dev/null is a user's right; it must stay a device
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "dir":
        target.mkdir()
    elif kind == "slash":
        target = str(target) + "/"        # a Path would drop the slash
    elif kind == "empty":
        target = ""
    elif kind == "long":
        target = tmp / ("x" * 300 + ".json")
    elif kind == "symlink-dir":
        (tmp / "d").mkdir()
        target.symlink_to(tmp / "d")
    elif kind == "readonly":
        (tmp / "ro").mkdir()
        target = tmp / "ro" / "out.json"
        os.chmod(tmp / "ro", 0o500)
        invalid = "" if os.geteuid() == 0 else invalid
    else:
        target.write_text('{"keep": true}\n')
        protect[str(target)] = None       # may be replaced by a whole result, never by a partial one
        invalid = ""
    cmd = rng.choice(["solve", "generate", "plot", "pareto"])
    if cmd == "generate":
        argv = ["generate", "--family", "geo", "--gpus", "8", "--out", str(target)]
    elif cmd == "plot":           # a figure's --out is a stem: out.json -> out.json.png and .svg
        argv = ["plot", str(path), "--kind", "map", "--out", str(target)]
        invalid = "" if kind in ("fifo", "devnull", "existing", "symlink-dir") else invalid
    else:
        argv = [cmd, str(path), "--solver", "greedy", "--time-limit", "2", "--quiet", "--out", str(target)]
    if kind in ("devnull", "fifo"):
        protect[str(target)] = b"<special>"
    return Case("outputs", argv, invalid, limit=None, protect=protect)


def s_signals(pool: Pool, rng: random.Random, tmp: Path) -> Case:
    path, _ = rng.choice(pool.instances)
    solver = rng.choice(["greedy", "memetic", "cpsat", "milp", "dtfm", "random-search"])
    sig = rng.choice([signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
    out = tmp / "out.json"
    out.write_text('{"keep": true}\n')
    return Case("signals", ["solve", str(path), "--solver", solver, "--time-limit", "4", "--quiet", "--json",
                            "--out", str(out)], "", limit=4, signal_at=(sig, rng.uniform(0.0, 3.0)),
                protect={str(out): None})


STRATEGIES: dict[str, tuple[Callable, int]] = {      # name -> (builder, weight)
    "instance": (s_instance, 30), "plan": (s_plan, 12), "result": (s_result, 6), "calibration": (s_calibration, 8),
    "suite": (s_suite, 8), "flags": (s_flags, 12), "raw": (s_raw, 8), "anchors": (s_anchors, 5),
    "extreme": (s_extreme, 5), "outputs": (s_outputs, 6), "signals": (s_signals, 6),
}


# ---------------------------------------------------------------- judging

def _numbers(node: Any, key: str = ""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numbers(v, str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v, key)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield key, node


def judge(case: Case, rc: int | None, out: str, err: str, wall: float, tmp: Path) -> list[str]:
    """The failures of one run (empty: it passed)."""
    fails = []
    if rc is None:
        return [f"hang: no exit after {wall:.0f} s"]
    killed = case.signal_at is not None and case.signal_at[0] == signal.SIGKILL and rc == -signal.SIGKILL
    if rc == 70 or "Traceback" in err or "internal error" in err:
        fails.append("traceback: " + (err.strip().splitlines() or [""])[-1][:200])
    if rc == 2 and not (err.startswith("error: ") and len(err.strip().splitlines()) == 1):
        fails.append("bad error: " + repr(err[:200]))
    if rc == 2 and len(err) > MAX_ERROR:
        fails.append(f"bad error: {len(err)} characters")
    if NONFINITE.search(out):
        fails.append("number: non-finite in output: " + NONFINITE.search(out).group(0))
    try:
        doc = json.loads(out) if out.strip().startswith(("{", "[")) else None
    except ValueError:
        doc = None
    for k, v in _numbers(doc) if doc is not None else ():
        if NONNEG_KEYS.search(k) and v < 0:
            fails.append(f"number: {k} = {v}")
            break
    if rc == 0 and case.invalid and not killed:
        fails.append(f"nonsense: exit 0 on invalid input ({case.invalid[:160]})")
    if case.limit is not None and case.signal_at is None and wall > case.limit + max(0.1 * case.limit, 1.0):
        fails.append(f"overrun: {wall:.1f} s for --time-limit {case.limit:g}")
    if case.signal_at is not None and rc not in (0, 1, 2, 130, 143, -signal.SIGKILL, -signal.SIGINT, -signal.SIGTERM):
        fails.append(f"signal: exit {rc}")
    for p, want in case.protect.items():
        fails += _clobbered(Path(p), want)
    return fails


def _clobbered(p: Path, want: bytes | None) -> list[str]:
    if want == b"<special>":
        st = os.stat(p) if os.path.lexists(p) else None
        return [] if st and not stat.S_ISREG(st.st_mode) else [f"clobber: {p} is no longer special"]
    if not p.exists():
        return [f"clobber: {p} was removed"]
    text = p.read_text(errors="replace")
    if text == '{"keep": true}\n':
        return []
    try:
        json.loads(text)
    except ValueError:
        return [f"clobber: {p} holds a partial write"]
    return []


def execute(case: Case, tmp: Path, hang_after: float) -> tuple[int | None, str, str, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen(_cmd(case.argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=tmp, start_new_session=True)
    if case.signal_at:
        sig, at = case.signal_at
        try:
            proc.wait(timeout=at)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=hang_after)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    return rc, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - t0


# ---------------------------------------------------------------- time limits at size

def with_levers(doc: dict) -> dict:
    """The planning levers on a generated instance: micro-batch and recompute choices,
    every GPU type's modelled clocks and a price, the cost objective."""
    doc = copy.deepcopy(doc)
    doc["model"] = dict(doc["model"], micro_batch_options=[1, 2, 4, 8], recompute_options=["none", "full"])
    types = sorted({d["type"] for d in doc["devices"] if isinstance(d, dict) and "type" in d})
    doc["gpu_types"] = {t: {"price_per_hour": 2.0 + i, "clocks": "default"} for i, t in enumerate(types)}
    doc["objective"] = {"kind": "cost"}
    return doc


def limit_cases(rng: random.Random, work: Path, n: int) -> list[Case]:
    """Whole-command limits from 8 to 4,096 GPUs, with and without the levers."""
    cases = []
    for i in range(n):
        gpus = rng.choice([8, 64, 256, 1024, 4096])
        fam = rng.choice(["geo", "geo-levers"])
        f = work / f"lim-{fam}-{gpus}.yaml"
        if not f.exists():
            plain = work / f"lim-geo-{gpus}.yaml"
            if not plain.exists():       # geo starts at 16 GPUs; 8 is a small cluster
                subprocess.run(_cmd(["generate", "--family", "geo" if gpus >= 16 else "small", "--gpus", str(gpus),
                                     "--seed", "1", "--out", str(plain)]), capture_output=True, timeout=300,
                               check=True)
            if fam == "geo-levers":
                f.write_bytes(dump_yaml(with_levers(yaml.safe_load(plain.read_text()))))
        lim = rng.choice([2, 5, 10])
        solver = rng.choice(SOLVERS[:-1])
        cases.append(Case("limits", ["solve", str(f), "--solver", solver, "--time-limit", str(lim), "--quiet",
                                     "--json"], "", limit=lim))
    return cases


# ---------------------------------------------------------------- the campaign

def run_one(case_of: Callable[[Path], Case], keep: Path, idx: int) -> tuple[Case, list[str], float]:
    tmp = Path(tempfile.mkdtemp(prefix="fz-"))
    try:
        case = case_of(tmp)
        hang_after = 60.0 if case.limit is None else max(60.0, 4 * case.limit)
        rc, out, err, wall = execute(case, tmp, hang_after)
        fails = judge(case, rc, out, err, wall, tmp)
        if fails:
            dest = keep / f"{idx:05d}-{case.strategy}"
            shutil.copytree(tmp, dest, symlinks=True, ignore_dangling_symlinks=True,
                            ignore=lambda d, names: [n for n in names if not (Path(d) / n).is_file()
                                                      and not (Path(d) / n).is_dir()])
            (dest / "CASE.json").write_text(json.dumps({"argv": case.argv, "fails": fails, "rc": rc,
                                                        "stderr": err[-2000:], "stdout": out[-2000:]}, indent=1))
        return case, fails, wall
    finally:
        for p in tmp.rglob("*"):
            with __import__("contextlib").suppress(OSError):
                os.chmod(p, 0o700) if p.is_dir() else None
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1600)
    ap.add_argument("--limit-runs", type=int, default=60, help="time-limit runs at size, run alone after the rest")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated strategies")
    ap.add_argument("--keep", type=Path, default=Path("/tmp/fuzz-failures"))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="fz-work-"))
    a.keep.mkdir(parents=True, exist_ok=True)
    pool = Pool(work)
    names = [n for n in STRATEGIES if not a.only or n in a.only.split(",")]
    weights = [STRATEGIES[n][1] for n in names]
    jobs = []
    for i in range(a.runs if names else 0):
        name = rng.choices(names, weights)[0]
        r = random.Random(rng.random())
        jobs.append((i, (lambda tmp, f=STRATEGIES[name][0], r=r: f(pool, r, tmp))))
    for path, _ in pool.instances if jobs else ():   # every greedy result before the threads share the cache
        pool.result(path)
    t0 = time.monotonic()
    with ThreadPoolExecutor(a.workers) as ex:
        done = list(ex.map(lambda j: run_one(j[1], a.keep, j[0]), jobs))
    if a.limit_runs and (not a.only or "limits" in a.only):
        for i, c in enumerate(limit_cases(rng, work, a.limit_runs)):
            done.append(run_one(lambda tmp, c=c: c, a.keep, a.runs + i))
    text = report(done, a, time.monotonic() - t0)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0 if not any(f for _, f, _ in done) else 1


def report(done: list, a: argparse.Namespace, wall: float) -> str:
    kinds = ["traceback", "hang", "bad error", "number", "nonsense", "overrun", "clobber", "signal"]
    by: dict[str, dict[str, int]] = {}
    for case, fails, _ in done:
        row = by.setdefault(case.strategy, {"runs": 0, "passed": 0, **{k: 0 for k in kinds}})
        row["runs"] += 1
        row["passed"] += not fails
        for k in {f.split(":")[0] for f in fails}:
            row[k] = row.get(k, 0) + 1
    worst: dict[str, float] = {}
    for case, fails, wall_s in done:
        if case.limit and case.signal_at is None:
            worst[case.strategy] = max(worst.get(case.strategy, -1e9), wall_s - case.limit)
    lines = ["# Fuzz campaign (issue 39)", "",
             f"`python benchmarks/fuzz_campaign.py --runs {a.runs} --limit-runs {a.limit_runs} --seed {a.seed} "
             f"--workers {a.workers}` ({len(done)} runs, {wall:.0f} s wall, {os.cpu_count()} CPUs)", "",
             "| strategy | runs | passed | " + " | ".join(kinds) + " | worst wall - limit |",
             "|---|" + "---|" * (len(kinds) + 3)]
    for name in sorted(by):
        r = by[name]
        w = worst.get(name)
        lines.append(f"| {name} | {r['runs']} | {r['passed']} | " + " | ".join(str(r[k]) for k in kinds)
                     + f" | {'%+.2f s' % w if w is not None else '-'} |")
    tot = {k: sum(r[k] for r in by.values()) for k in ["runs", "passed", *kinds]}
    lines.append("| **all** | " + " | ".join(str(tot[k]) for k in ["runs", "passed", *kinds]) + " | |")
    fails = [(c, f) for c, f, _ in done if f]
    if fails:
        lines += ["", "## Failures", ""]
        for c, f in fails[:80]:
            lines.append(f"- `{c.strategy}` `{' '.join(x[:60] for x in c.argv)[:300]}`: {'; '.join(f)[:300]}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
