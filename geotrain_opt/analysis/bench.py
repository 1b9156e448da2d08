"""Benchmark harness: instances x solvers x seeds, one JSON line per run.

A suite file (YAML)::

    name: headline
    time_limit: 30            # default per run, seconds
    seeds: [0, 1, 2]
    objective: time           # optional override of every instance's objective
    instances: [instances/real/dtfm-3-multi-datacenter.yaml, ...]
    solvers:
      - memetic
      - {name: cpsat, time_limit: 60, seeds: [0]}    # deterministic: one seed is enough
      - {name: random-search, extra: {max_evaluations: 5000}}   # solver options
      - {name: memetic, label: memetic-islands, extra: {islands: 2}}  # a variant, reported apart

Results are appended to a JSONL file, one line per finished run, flushed and
synced at once. A run is known by its key: the instance's content hash (not its
path, so a sweep resumed from another directory or after a move finds its rows),
the label, seed, objective, time limit and options; a re-run skips keys already
there, so an interrupted sweep loses nothing and duplicates nothing. Any
exception inside a run becomes a row with status "error" and the sweep goes on. Runs execute in a
local process pool, or on a Dask cluster (``dask="local"`` or a scheduler address).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from geotrain_opt.solvers.cluster import dask_client, worker_guard
from geotrain_opt.common.outputs import exclusive
from geotrain_opt.errors import GeoTrainError, InstanceError
from geotrain_opt.problem.instance import OBJECTIVES
from geotrain_opt.solvers.result import Status


@dataclass(frozen=True)
class Job:
    instance: str
    solver: str
    seed: int
    time_limit: float
    objective: str | None = None
    extra: str = "{}"          # solver options (JSON), e.g. an evaluation budget
    label: str = ""            # name in reports (default: the solver's)
    digest: str = ""           # content hash of the instance file

    @property
    def key(self) -> str:
        return json.dumps([self.digest, self.label or self.solver, self.seed, self.objective,
                           self.time_limit, self.extra])


MAX_TIME_LIMIT_S = 1e7        # far above any sweep; keeps the deadline arithmetic finite


def _suite_limit(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_TIME_LIMIT_S:
        raise GeoTrainError(f"{where}: time_limit must be a number of seconds in (0, {MAX_TIME_LIMIT_S:g}], "
                            f"got {str(value)[:40]!r}")
    return float(value)


def _suite_seeds(where: str, value: Any) -> list[int]:
    if not isinstance(value, list) or not value or \
            any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 2 ** 31 for x in value):
        raise GeoTrainError(f"{where} must be a non-empty list of integers in [0, 2^31), "
                            f"got {str(value)[:40]!r}")
    return value


def load_suite(path: str | Path) -> tuple[str, list[Job]]:
    """The suite's jobs; every field checked first, one line naming it (issue 39)."""
    from geotrain_opt.common.inputs import read_text_file
    from geotrain_opt.problem.instance import parse_text
    p = Path(path)
    try:        # bounded, aliases refused, keys given twice refused: as instance files are read
        d = parse_text(read_text_file(p, 16 << 20), str(p))
    except (ValueError, InstanceError) as e:
        raise GeoTrainError(f"suite {path}: cannot read: {str(e)[:200]}") from None
    where = f"suite {path}"
    if not isinstance(d, dict) or not isinstance(d.get("instances"), list) or not d["instances"] \
            or not isinstance(d.get("solvers"), list) or not d["solvers"]:
        raise GeoTrainError(f"{where}: needs non-empty 'instances' and 'solvers' lists")
    base = p.parent
    default_seeds = _suite_seeds(f"{where}: seeds", d.get("seeds", [0]))
    default_limit = _suite_limit(where, d.get("time_limit", 30))
    objective = d.get("objective")
    if objective is not None and objective not in OBJECTIVES:
        raise GeoTrainError(f"{where}: objective must be one of {', '.join(OBJECTIVES)}, got {str(objective)[:40]!r}")
    jobs = []
    for inst in d["instances"]:
        if not isinstance(inst, str) or not inst:
            raise GeoTrainError(f"{where}: instances: expected file names, got {str(inst)[:40]!r}")
        for ipath in _instance_files(where, base, inst):
            jobs += _jobs_of(where, ipath, d, objective, default_seeds, default_limit)
    return str(d.get("name", p.stem)), jobs


def _instance_files(where: str, base: Path, inst: str) -> list[Path]:
    """An entry of a suite's instances: a file, or a benchmark library's folder (its
    index.yaml lists the instances, in its order)."""
    ipath = Path(inst)
    if not ipath.is_absolute() and not ipath.exists():
        ipath = base / inst
    if ipath.is_dir() and (ipath / "index.yaml").is_file():
        from geotrain_opt.analysis.library import load_index
        return [ipath / r["instance"] for r in load_index(ipath)["records"]]
    if not ipath.is_file():
        raise GeoTrainError(f"{where}: instances: no such file {inst}")
    return [ipath]


def _jobs_of(where: str, ipath: Path, d: dict[str, Any], objective: str | None, default_seeds: list[int],
             default_limit: float) -> list[Job]:
    """The jobs of one instance file: every solver entry at each of its seeds."""
    from geotrain_opt import solvers
    jobs = []
    from geotrain_opt.common.inputs import read_bytes_file
    try:
        digest = hashlib.sha256(read_bytes_file(ipath)).hexdigest()[:16]
    except ValueError as e:
        raise GeoTrainError(f"{where}: instances: {e}") from None
    for s in d["solvers"]:
        if not (isinstance(s, str) or (isinstance(s, dict) and isinstance(s.get("name"), str))):
            raise GeoTrainError(f"{where}: solvers: expected a name or {{name, ...}}, got {str(s)[:40]!r}")
        spec = {"name": s} if isinstance(s, str) else dict(s)
        if not isinstance(spec.get("extra", {}), dict):
            raise GeoTrainError(f"{where}: solvers: {spec['name']}: extra must be a mapping")
        try:                            # unknown solver or option: clear error now, not mid-sweep
            solvers.check_options(spec["name"], spec.get("extra", {}))
        except GeoTrainError as e:
            raise GeoTrainError(f"{where}: solvers: {e}") from None
        seeds = _suite_seeds(f"{where}: solvers: {spec['name']}: seeds", spec.get("seeds", default_seeds))
        limit = _suite_limit(f"{where}: solvers: {spec['name']}", spec.get("time_limit", default_limit))
        for seed in seeds:
            jobs.append(Job(str(ipath), spec["name"], seed, limit, objective,
                            json.dumps(spec.get("extra", {}), sort_keys=True),
                            str(spec.get("label", spec["name"])), digest))
    return jobs


def done_keys(results: Path) -> set[str]:
    keys = set()
    if results.exists():
        for line in results.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue        # a line cut by a crash: that run is simply done again
            if isinstance(r, dict) and isinstance(r.get("key"), str):
                keys.add(r["key"])
    return keys


def run_job(job: Job, root: str = ".") -> dict[str, Any]:
    """Run one job (in a worker process) and return its result row; a run that
    fails with a GeoTrainError becomes a row with status "error", not a dead sweep."""
    from geotrain_opt import solvers
    from geotrain_opt.problem.instance import load_instance
    from geotrain_opt.solvers import trace
    try:        # the solver's module imported before the clock starts: a worker's first run pays no imports
        solve = solvers.get(job.solver)
    except Exception:       # noqa: BLE001  (an unknown solver becomes the error row below)
        solve = None
    t = time.perf_counter()
    from geotrain_opt.common.provenance import provenance
    head = {"key": job.key, "instance": job.instance, "instance_hash": job.digest, "solver": job.solver,
            "label": job.label or job.solver, "seed": job.seed, "time_limit_s": job.time_limit,
            "extra": json.loads(job.extra)}
    try:
        inst = load_instance(Path(root) / job.instance if not Path(job.instance).is_absolute() else job.instance)
        if job.objective:
            inst = inst.with_options(kind=job.objective)
        with trace.recording(t) as tr:      # the run's clock: loading included, as its wall_s
            # the budget is the run's wall time: what loading took comes off the solver's limit
            left = max(0.05, job.time_limit - (time.perf_counter() - t))
            opts = solvers.build_options(job.solver, json.loads(job.extra), time_limit_s=left, seed=job.seed)
            res = (solve or solvers.get(job.solver))(inst, opts)
        trace.attach(tr, res)
    except Exception as e:      # one bad run must not kill the sweep (and again on every resume)
        msg = str(e) if isinstance(e, GeoTrainError) else f"{type(e).__name__}: {e}"
        return {**head, "instance_name": Path(job.instance).stem, "n_gpus": None, "objective": job.objective,
                "status": Status.ERROR, "error": msg.splitlines()[0] if msg else type(e).__name__, "time_s": None,
                "energy_j": None, "objective_value": None, "best_bound": None, "devices_used": None,
                "wall_s": time.perf_counter() - t, "plan": None, "provenance": provenance()}
    ev = res.evaluation
    return {**head, "instance_name": inst.name, "n_gpus": inst.n, "objective": inst.objective.kind,
            "status": res.status, "time_s": ev.time_s if ev else None, "energy_j": ev.energy_j if ev else None,
            "objective_value": res.objective_value, "best_bound": res.best_bound,
            "devices_used": len(res.plan.devices) if res.plan else None,
            "wall_s": time.perf_counter() - t, "plan": res.plan.to_dict() if res.plan else None,
            # [seconds, value] at each improvement (anytime curves, time-to-target ECDFs)
            "trajectory": res.stats["trajectory"], "provenance": res.provenance}


def _append(results: Path, row: dict[str, Any]) -> None:
    # a crash mid-write leaves a partial last line: start on a fresh one
    if results.exists() and results.stat().st_size:
        with open(results, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                with open(results, "a") as g:
                    g.write("\n")
    with open(results, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run_suite(suite: str | Path, results: str | Path, workers: int = 2, dask: str | None = None,
              root: str = ".", progress: bool = True) -> int:
    """Run every job of the suite not yet in ``results``; returns how many ran. The
    results file is locked for the sweep: a second sweep on it stops at once with a
    one-line error instead of running the same jobs and interleaving their lines."""
    _, jobs = load_suite(suite)
    out = Path(results)
    with exclusive(out, "--results"):
        done = done_keys(out)
        todo = [j for j in jobs if j.key not in done]
        if progress:
            print(f"{len(jobs)} runs in the suite, {len(jobs) - len(todo)} already in {out}, {len(todo)} to run",
                  flush=True, file=sys.stderr)
        for i, row in enumerate(_execute(todo, workers, dask, root)):
            _append(out, row)
            if progress:
                print(f"[{i + 1}/{len(todo)}] {row['instance_name']} {row['label']} seed {row['seed']}: "
                      f"{row['status']}, T={row['time_s']}", flush=True, file=sys.stderr)
    return len(todo)


def _execute(jobs: list[Job], workers: int, dask: str | None, root: str) -> Iterator[dict[str, Any]]:
    if not jobs:
        return
    if dask:
        from dask.distributed import as_completed as dask_completed
        client, cluster = dask_client(dask, workers)
        try:
            futures = [client.submit(run_job, j, root, pure=False) for j in jobs]
            for fut in dask_completed(futures):
                yield fut.result()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return
    if workers <= 1:
        for j in jobs:
            yield run_job(j, root)
        return
    # ProcessPoolExecutor, not multiprocessing.Pool: its workers are not daemons,
    # so a memetic run with islands may start its own pool inside one.
    pool = ProcessPoolExecutor(max_workers=workers, initializer=worker_guard)
    try:
        futs = [pool.submit(run_job, j, root) for j in jobs]
        for fut in as_completed(futs):
            yield fut.result()
    except BaseException:
        # Ctrl-C (workers ignore it) or a failed write: stop the runs in flight
        # now rather than wait for their time limits; finished rows are on disk.
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
