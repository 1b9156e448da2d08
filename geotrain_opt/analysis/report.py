"""Tables from benchmark results (JSONL): per solver T and E, reduction against each
baseline, gap to the proven optimum, run time. Medians over seeds."""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from geotrain_opt.common.provenance import RESULT_SCHEMA
from geotrain_opt.errors import GeoTrainError
from geotrain_opt import solvers


_NEEDED = ("instance_name", "solver", "status")


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a bench JSONL; lines that are cut, not JSON or not result rows are
    skipped (a crash can leave half a line), a missing file is one error line."""
    from geotrain_opt.common.inputs import read_bytes_file
    try:
        text = read_bytes_file(path).decode("utf-8", errors="replace")
    except ValueError as e:
        raise GeoTrainError(f"results {path}: {e}") from None
    rows = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(r, dict) and "schema" in r and r["schema"] != RESULT_SCHEMA:
            raise GeoTrainError(f"results {path}: schema {str(r['schema'])[:60]!r} is not {RESULT_SCHEMA!r}")
        if isinstance(r, dict) and all(isinstance(r.get(k), str) for k in _NEEDED):
            for k in ("time_s", "energy_j", "objective_value", "wall_s", "devices_used"):
                v = r.get(k)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    r[k] = None         # NaN and infinities are no values to take medians of
            if not isinstance(r.get("objective"), str):
                r["objective"] = None
            if not isinstance(r.get("n_gpus"), int) or isinstance(r.get("n_gpus"), bool):
                r["n_gpus"] = None
            rows.append(r)
    if not rows:
        raise GeoTrainError(f"results {path}: no result rows (JSON lines with "
                            f"{', '.join(_NEEDED)}, as bench writes them)")
    return rows


def _med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (instance, solver) with medians, gap and reductions."""
    # ours: what the tool plans with; baselines: what it is compared against (a run's
    # label, e.g. a variant "memetic-islands", is neither and is reported apart)
    our_names = set(solvers.names("exact") + solvers.names("heuristic"))
    baselines = set(solvers.names("baseline"))
    by: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        by[(r["instance_name"], r.get("label") or r["solver"])].append(r)
    out = []
    instances = sorted({k[0] for k in by})
    for inst in instances:
        recs = {}
        proven = [r["objective_value"] for (i, _s), rs in by.items() if i == inst for r in rs
                  if r["status"] == "optimal" and r["objective_value"] is not None]
        optimum = min(proven) if proven else None
        for (i, s), rs in sorted(by.items()):
            if i != inst:
                continue
            rec = {"instance": inst, "n_gpus": rs[0]["n_gpus"], "solver": s, "runs": len(rs),
                   "objective": rs[0]["objective"],
                   "T": _med([r["time_s"] for r in rs]), "E": _med([r["energy_j"] for r in rs]),
                   "value": _med([r["objective_value"] for r in rs]),
                   "devices": _med([r["devices_used"] for r in rs]),
                   "wall_s": _med([r["wall_s"] for r in rs]),
                   "optimal": sum(r["status"] == "optimal" for r in rs)}
            rec["gap"] = (None if optimum is None or rec["value"] is None
                          else (rec["value"] - optimum) / abs(optimum))
            recs[s] = rec
        ours = [r for s, r in recs.items() if s in our_names and r["value"] is not None]
        best = min(ours, key=lambda r: r["value"]) if ours else None
        for s, rec in recs.items():
            rec["best_solver"] = best["solver"] if best else None
            if best and s in baselines and rec["T"] and rec["E"]:
                rec["T_reduction"] = (rec["T"] - best["T"]) / rec["T"]
                rec["E_reduction"] = (rec["E"] - best["E"]) / rec["E"]
            out.append(rec)
    return out


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def markdown(recs: list[dict[str, Any]]) -> str:
    lines = ["| instance | GPUs | solver | runs | T (s) | E (J) | GPUs used | gap to optimum | "
             "T reduction by best | E reduction by best | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        lines.append(f"| {r['instance']} | {'-' if r['n_gpus'] is None else r['n_gpus']} | {r['solver']} | {r['runs']} | {_f(r['T'], '.4f')} | "
                     f"{_f(r['E'], ',.0f')} | {_f(r['devices'], '.0f')} | {_f(r['gap'], '.2%')} | "
                     f"{_f(r.get('T_reduction'), '.1%')} | {_f(r.get('E_reduction'), '.1%')} | {_f(r['wall_s'], '.1f')} |")
    lines.append("")
    ours = "/".join(solvers.names("heuristic") + solvers.names("exact"))
    lines.append(f"Reductions: (baseline - best of {ours}) / baseline, medians over seeds;"
                 " gap: (value - proven optimum) / optimum where an exact solver proved one.")
    red = defaultdict(list)
    for r in recs:
        if r.get("T_reduction") is not None:
            red[r["solver"]].append((r["T_reduction"], r["E_reduction"]))
    if red:
        lines += ["", "| baseline | instances | max T reduction | median T reduction | max E reduction | median E reduction |",
                  "|---|---|---|---|---|---|"]
        for s, xs in sorted(red.items()):
            t, e = [x[0] for x in xs], [x[1] for x in xs]
            lines.append(f"| {s} | {len(xs)} | {max(t):.1%} | {statistics.median(t):.1%} | {max(e):.1%} | "
                         f"{statistics.median(e):.1%} |")
    return "\n".join(lines) + "\n"


def to_csv(recs: list[dict[str, Any]]) -> str:
    keys = ["instance", "n_gpus", "solver", "runs", "objective", "T", "E", "value", "devices", "gap",
            "T_reduction", "E_reduction", "wall_s", "optimal", "best_solver"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in recs:
        w.writerow(r)
    return buf.getvalue()
