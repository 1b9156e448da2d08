"""Fit the cost model to measured iterations: GPU efficiencies and exposed communication.

A user with a few measured iterations of their own cluster (``RUNS.csv``:
``instance,plan,measured_s``, paths relative to the CSV) gets the model fitted to
them: the achievable fraction of peak of every GPU type the runs use, and the
exposed-communication fraction kappa, by bounded least squares on the relative
error (scipy's ``least_squares``). ``apply_calibration`` puts a fit into an
instance; ``solve``/``evaluate --calibration`` do that before anything else.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from geotrain_opt.errors import InstanceError
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance, load_instance
from geotrain_opt.problem.plan import Plan

FITTABLE = ("efficiency", "exposed_comm")


@dataclass
class Run:
    instance: Instance
    plan: Plan
    measured_s: float
    label: str


def read_runs(path: str | Path) -> list[Run]:
    """Rows of a runs CSV; lines starting with '#' are comments."""
    p = Path(path)
    try:
        lines = [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as e:
        raise InstanceError("<runs>", f"cannot read {path}: {e}") from None
    rows = list(csv.DictReader(lines))
    if not rows:
        raise InstanceError("<runs>", f"{path}: no runs (need columns instance,plan,measured_s)")
    missing = {"instance", "plan", "measured_s"} - set(rows[0])
    if missing:
        raise InstanceError("<runs>", f"{path}: missing column(s) {', '.join(sorted(missing))}")
    cache: dict[str, Instance] = {}
    runs = []
    for i, r in enumerate(rows, start=2):
        try:
            measured = float(r["measured_s"])
        except (TypeError, ValueError):
            raise InstanceError(f"<runs> line {i}.measured_s", f"expected a number, got {r['measured_s']!r}") from None
        if not np.isfinite(measured) or measured <= 0:
            raise InstanceError(f"<runs> line {i}.measured_s", f"must be a positive number, got {measured}")
        ip = str(p.parent / r["instance"])
        inst = cache.get(ip) or cache.setdefault(ip, load_instance(ip))
        plan = Plan.load(str(p.parent / r["plan"]))
        ev = evaluate(inst, plan)
        if not ev.feasible:
            raise InstanceError(f"<runs> line {i}.plan", f"plan {r['plan']} is infeasible: {ev.violations[0]}")
        runs.append(Run(inst, plan, measured, f"{r['instance']} {r['plan']}"))
    return runs


def apply_calibration(inst: Instance, cal: dict[str, Any]) -> Instance:
    """The instance with fitted efficiencies (by GPU type) and options."""
    eff = {t: float(v["efficiency"]) for t, v in cal.get("gpu_types", {}).items() if "efficiency" in v}
    devices = [replace(d, efficiency=eff[d.type]) if d.type in eff else d for d in inst.devices]
    opts = cal.get("options", {})
    out = replace(inst, devices=devices, _cache={})
    return out.with_options(**opts) if opts else out


def load_calibration(path: str | Path) -> dict[str, Any]:
    try:
        cal = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InstanceError("<calibration>", f"cannot read {path}: {e}") from None
    if not isinstance(cal, dict):
        raise InstanceError("<calibration>", "expected a JSON object")
    for t, v in cal.get("gpu_types", {}).items():
        e = v.get("efficiency") if isinstance(v, dict) else None
        if not isinstance(e, (int, float)) or not 0 < e <= 1:
            raise InstanceError(f"<calibration>.gpu_types.{t}.efficiency", f"must be in (0, 1], got {e!r}")
    k = cal.get("options", {}).get("exposed_comm", 0.5)
    if not isinstance(k, (int, float)) or not 0 <= k <= 1:
        raise InstanceError("<calibration>.options.exposed_comm", f"must be in [0, 1], got {k!r}")
    unknown = set(cal.get("options", {})) - {"exposed_comm"}
    if unknown:
        raise InstanceError("<calibration>.options", f"unknown field(s) {', '.join(sorted(unknown))}")
    return cal


def predict(runs: list[Run], cal: dict[str, Any]) -> np.ndarray:
    return np.array([evaluate(apply_calibration(r.instance, cal), r.plan).time_s for r in runs])


def _types_used(runs: list[Run]) -> list[str]:
    seen: dict[str, None] = {}
    for r in runs:
        for g in r.plan.devices:
            seen.setdefault(r.instance.devices[r.instance.index[g]].type, None)
    return list(seen)


def _cal(types: list[str], fit: tuple[str, ...], x: np.ndarray, base: dict[str, Any]) -> dict[str, Any]:
    cal = json.loads(json.dumps(base))
    i = 0
    if "efficiency" in fit:
        for t in types:
            cal.setdefault("gpu_types", {})[t] = {"efficiency": float(x[i])}
            i += 1
    if "exposed_comm" in fit:
        cal.setdefault("options", {})["exposed_comm"] = float(x[i])
    return cal


def fit_errors(runs: list[Run], cal: dict[str, Any]) -> dict[str, Any]:
    rel = predict(runs, cal) / np.array([r.measured_s for r in runs]) - 1.0
    worst = int(np.argmax(np.abs(rel)))
    return {"median_abs_rel_err": float(np.median(np.abs(rel))), "worst_rel_err": float(rel[worst]),
            "points": len(runs)}


def calibrate(runs: list[Run], fit: tuple[str, ...] = FITTABLE, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Least squares on relative error over the fitted parameters; returns the calibration."""
    from scipy.optimize import least_squares
    unknown = set(fit) - set(FITTABLE)
    if unknown or not fit:
        raise InstanceError("--fit", f"choose from {', '.join(FITTABLE)}, got {', '.join(sorted(unknown)) or 'nothing'}")
    base = base or {}
    types = _types_used(runs)
    x0, lo, hi = [], [], []
    if "efficiency" in fit:
        for t in types:
            d = next(d for r in runs for d in r.instance.devices if d.type == t)
            x0.append(d.efficiency)
            lo.append(0.01)
            hi.append(1.0)
    if "exposed_comm" in fit:
        x0.append(runs[0].instance.options.exposed_comm)
        lo.append(0.0)
        hi.append(1.0)
    if len(x0) > len(runs):
        raise InstanceError("--fit", f"{len(x0)} parameters but only {len(runs)} measured run(s)")
    meas = np.array([r.measured_s for r in runs])
    x0 = np.clip(np.array(x0, dtype=float), np.array(lo) + 1e-9, np.array(hi) - 1e-9)

    def resid(x: np.ndarray) -> np.ndarray:
        return predict(runs, _cal(types, fit, x, base)) / meas - 1.0

    # the model is piecewise smooth (max terms): start from the given values and,
    # for kappa, from both ends too, and keep the best local fit
    starts = [x0]
    if "exposed_comm" in fit:
        for k in (0.1, 0.9):
            x = x0.copy()
            x[-1] = k
            starts.append(x)
    sols = [least_squares(resid, x, bounds=(lo, hi), x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12)
            for x in starts]
    sol = min(sols, key=lambda r: r.cost)
    cal = _cal(types, fit, sol.x, base)
    cal["fit"] = fit_errors(runs, cal)
    return cal
