"""Fit the cost model to measured iterations: GPU efficiency curves and exposed communication.

A user with a few measured iterations of their own cluster (``RUNS.csv``:
``instance,plan,measured_s``, paths relative to the CSV) gets the model fitted to
them: for every GPU type the runs use, its saturated fraction of peak
(``efficiency``) and the tokens per micro-batch at which it reaches half of that
(``half_tokens``, model.md §1), the exposed-communication fraction kappa and the
rate gamma of the hosts' network stack that a pipeline message between nodes
passes through (model.md §3), by bounded least
squares on the relative error (scipy's ``least_squares``).

A parameter the runs cannot pin down is not fitted silently: one that no run
varies (a curve measured at one micro-batch size, kappa without a pipeline link, kappa
apart from gamma with every message between nodes equally long)
is held at its given value, fewer runs than parameters is an error, as many is a
warning (the fit is then exact by construction), and after the fit the Jacobian's
near-null directions name the parameters the runs leave loose (model.md §7).
``apply_calibration`` puts a fit into an instance; ``solve``/``evaluate
--calibration`` do that before anything else.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from geotrain_opt.common.inputs import read_text_file
from geotrain_opt.errors import InstanceError
from geotrain_opt.cost.evaluator import BatchEvaluator, evaluate, resolve
from geotrain_opt.problem.instance import Instance, load_instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.problem.units import GBIT_PER_S, s_per_byte_to_gbps

FITTABLE = ("efficiency", "half_tokens", "exposed_comm", "host_stack_gbps")
TYPE_FIELDS = ("efficiency", "half_tokens")        # fitted per GPU type
# options a calibration may set: its key -> the instance option and the value there
OPTION_FIELDS = {"exposed_comm": ("exposed_comm", float),
                 "host_stack_gbps": ("stack_s_per_byte", lambda g: 1.0 / (float(g) * GBIT_PER_S))}
# gamma is fitted as its inverse, nanoseconds per byte (0: no host-stack cost), in [0, 1000]
MAX_NS_PER_BYTE = 1000.0
# a direction of the scaled Jacobian this much weaker than the strongest moves the
# fit's error by under a millionth of what the strongest does: the runs leave it loose
LOOSE_RATIO = 1e-3


@dataclass
class Run:
    instance: Instance
    plan: Plan
    measured_s: float
    label: str


# an iteration measured between a microsecond and about 30 years: anything else is a typo
MIN_MEASURED_S, MAX_MEASURED_S = 1e-6, 1e9


RUNS_LIMIT = 16 << 20        # a runs CSV: 100,000s of rows fit


def read_runs(path: str | Path) -> list[Run]:
    """Rows of a runs CSV; lines starting with '#' are comments."""
    p = Path(path)
    try:
        text = read_text_file(p, RUNS_LIMIT)
    except ValueError as e:
        raise InstanceError("<runs>", str(e)) from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        rows = list(csv.DictReader(lines))
    except csv.Error as e:
        raise InstanceError("<runs>", f"{path}: malformed CSV: {e}") from None
    if not rows:
        raise InstanceError("<runs>", f"{path}: no runs (need columns instance,plan,measured_s)")
    missing = {"instance", "plan", "measured_s"} - set(rows[0])
    if missing:
        raise InstanceError("<runs>", f"{path}: missing column(s) {', '.join(sorted(missing))}")
    cache: dict[str, Instance] = {}
    runs = []
    for i, r in enumerate(rows, start=2):
        gaps = [k for k in ("instance", "plan", "measured_s") if not (r.get(k) or "").strip()]
        if gaps or None in r:       # a short row leaves fields None, a long one files extras under None
            raise InstanceError(f"<runs> line {i}.{gaps[0] if gaps else 'columns'}",
                                "empty" if gaps else f"more fields than the {len(r) - 1} columns")
        try:
            measured = float(r["measured_s"])
        except (TypeError, ValueError):
            raise InstanceError(f"<runs> line {i}.measured_s", f"expected a number, got {r['measured_s']!r}") from None
        if not np.isfinite(measured) or measured <= 0:
            raise InstanceError(f"<runs> line {i}.measured_s", f"must be a positive number, got {measured}")
        if not MIN_MEASURED_S <= measured <= MAX_MEASURED_S:    # outside, the fit's arithmetic overflows
            raise InstanceError(f"<runs> line {i}.measured_s",
                                f"must be in [{MIN_MEASURED_S:g}, {MAX_MEASURED_S:g}] seconds, got {measured:g}")
        ip = str(p.parent / r["instance"])
        inst = cache.get(ip) or cache.setdefault(ip, load_instance(ip))
        plan = Plan.load(str(p.parent / r["plan"]))
        ev = evaluate(inst, plan)
        if not ev.feasible:
            raise InstanceError(f"<runs> line {i}.plan", f"plan {r['plan']} is infeasible: {ev.violations[0]}")
        runs.append(Run(inst, plan, measured, f"{r['instance']} {r['plan']}"))
    return runs


@dataclass(frozen=True)
class Param:
    """One fitted number: its field, its GPU type (None: an option), start and range."""
    name: str
    gpu_type: str | None
    x0: float
    lo: float
    hi: float
    scale: float                 # its typical size, to compare sensitivities

    @property
    def label(self) -> str:
        return f"{self.name} of {self.gpu_type}" if self.gpu_type else self.name


def _tokens(run: Run) -> float:
    """Tokens per micro-batch of a run (its plan's micro-batch choice, §11)."""
    m = run.instance.model
    return float((run.plan.micro_batch or m.micro_batch) * m.seq_len)


def identifiable(runs: list[Run], fit: tuple[str, ...], warnings: list[str]) -> list[Param]:
    """The parameters asked for that the runs can identify at all; each one held
    instead gets a line in ``warnings`` saying why."""
    by_type: dict[str, list[Run]] = {}
    for r in runs:
        for t in dict.fromkeys(r.instance.devices[r.instance.index[g]].type for g in r.plan.devices):
            by_type.setdefault(t, []).append(r)
    params = []
    for t, used in by_type.items():
        d = next(d for d in used[0].instance.devices if d.type == t)
        tokens = sorted({_tokens(r) for r in used})
        if "efficiency" in fit:
            params.append(Param("efficiency", t, d.efficiency, 0.01, 1.0, 0.5))
        if "half_tokens" in fit:
            if len(tokens) < 2:
                warnings.append(f"half_tokens of {t} held at {d.half_tokens:g}: every run gives {t} micro-batches "
                                f"of {tokens[0]:g} tokens, so a curve and a constant fit alike (measure two "
                                "micro-batch sizes or more)")
            else:
                params.append(Param("half_tokens", t, d.half_tokens, 0.0, 100.0 * tokens[-1], float(np.median(tokens))))
    params += _option_params(runs, fit, warnings)
    return params


def _hops(runs: list[Run]) -> tuple[list[float], list[float]]:
    """Occupancies A/beta of the runs' pipeline hops between nodes and within nodes."""
    across, within = [], []
    for r in runs:
        inst, plan = resolve(r.instance, r.plan)          # a tensor-parallel group's links (§14)
        a = inst.arrays
        for row in plan.grid:
            for u, v in zip(row, row[1:]):
                gu, gv = inst.index[u], inst.index[v]
                same = inst.devices[gu].node == inst.devices[gv].node
                (within if same else across).append(float(a.A * a.inv_beta[gu, gv]))
    return across, within


def _option_params(runs: list[Run], fit: tuple[str, ...], warnings: list[str]) -> list[Param]:
    """kappa and gamma (model.md §3): kappa needs a pipeline link, gamma one between nodes, and
    the two are told apart only by messages of different sizes in time (different
    bandwidths, or links inside a node): otherwise kappa is held and gamma fitted."""
    opts = runs[0].instance.options
    across, within = _hops(runs)
    out = []
    held = f"{s_per_byte_to_gbps(opts.stack_s_per_byte):g}" if opts.stack_s_per_byte > 0 else "none"
    mu = "host_stack_gbps" in fit and bool(across)
    if "host_stack_gbps" in fit and not across:
        warnings.append(f"host_stack_gbps held at {held}: no run has a pipeline link between nodes, "
                        "so no run depends on it")
    if "exposed_comm" in fit:
        top = max(across, default=0.0)
        apart = len({float(f"{o:.6g}") for o in across}) > 1 or any(o >= 0.1 * top for o in within)
        if not across and not within:
            warnings.append(f"exposed_comm held at {opts.exposed_comm:g}: no run has a pipeline link, "
                            "so no run depends on it")
        elif mu and not apart:
            warnings.append(f"exposed_comm held at {opts.exposed_comm:g}: every pipeline message between nodes "
                            "takes the same time on its link, so kappa and host_stack_gbps fit alike "
                            "(measure runs at two bandwidths or more); host_stack_gbps is fitted")
        else:
            out.append(Param("exposed_comm", None, opts.exposed_comm, 0.0, 1.0, 0.5))
    if mu:      # fitted as ns per byte; its scale: a host stack as fast as the median link
        scale = 1e9 * float(np.median(across)) / runs[0].instance.arrays.A
        out.append(Param("host_stack_gbps", None, opts.stack_s_per_byte * 1e9, 0.0, MAX_NS_PER_BYTE, scale))
    return out


def _starts(params: list[Param]) -> list[np.ndarray]:
    """The given values and the curves all at their runs' median tokens, each with
    kappa as given and at both ends and gamma as given and at its scale (at most 6
    starts, whatever the number of GPU types): the model is piecewise smooth, a
    local fit depends on where it starts."""
    lo, hi = np.array([p.lo for p in params]), np.array([p.hi for p in params])
    x0 = np.clip(np.array([p.x0 for p in params], dtype=float), lo + 1e-9, hi - 1e-9)
    bases = [x0]
    curves = [i for i, p in enumerate(params) if p.name == "half_tokens"]
    if curves:
        y = x0.copy()
        y[curves] = [params[i].scale for i in curves]
        bases.append(y)
    moves: list[dict[int, float]] = [{}]
    for i, p in enumerate(params):
        if p.name == "exposed_comm":
            moves += [{i: 0.1}, {i: 0.9}]
        elif p.name == "host_stack_gbps":
            moves += [{**m, i: p.scale} for m in moves]
    starts = []
    for m in moves:
        for b in bases:
            y = b.copy()
            for i, v in m.items():
                y[i] = v
            starts.append(y)
    return starts[:6]


def _cal(params: list[Param], x: np.ndarray, base: dict[str, Any]) -> dict[str, Any]:
    cal = json.loads(json.dumps(base))
    for p, v in zip(params, x):
        if p.name == "host_stack_gbps":     # fitted in ns per byte
            if v > 0:
                cal.setdefault("options", {})[p.name] = 8.0 / float(v)
            else:
                cal.get("options", {}).pop(p.name, None)
        elif p.gpu_type is None:
            cal.setdefault("options", {})[p.name] = float(v)
        else:
            cal.setdefault("gpu_types", {}).setdefault(p.gpu_type, {})[p.name] = float(v)
    return cal


def loose(params: list[Param], x: np.ndarray, jac: np.ndarray) -> list[str]:
    """Lines naming the parameters the runs leave loose at the fit ``x``: the
    Jacobian of the relative errors, each column scaled by its parameter's size,
    has a direction (a combination of parameters) along which the error barely
    moves; the parameters that make up most of it are named together."""
    size = np.array([max(abs(v), p.scale) for p, v in zip(params, x)])
    J = np.asarray(jac, dtype=float) * size[None, :]
    strength = np.linalg.norm(J, axis=0)
    top = float(strength.max()) if strength.size else 0.0
    out = [f"{p.label} is not determined by the runs (their times do not depend on it at the fit)"
           for p, s in zip(params, strength) if s <= LOOSE_RATIO * top]
    if top == 0.0 or len(params) < 2:
        return out
    _, sv, vt = np.linalg.svd(J, full_matrices=False)
    if sv[-1] <= LOOSE_RATIO * sv[0] and not out:
        v = np.abs(vt[-1])
        names = [params[i].label for i in np.argsort(-v) if v[i] >= 0.3 * v.max()]
        out.append(f"{' and '.join(names)} are not separately determined by the runs (changed together they "
                   "fit as well): measure runs that vary them apart, or fit fewer")
    return out


def apply_calibration(inst: Instance, cal: dict[str, Any]) -> Instance:
    """The instance with fitted efficiencies and curves (by GPU type) and options."""
    fitted = {t: {k: float(v[k]) for k in TYPE_FIELDS if k in v} for t, v in cal.get("gpu_types", {}).items()}
    devices = [replace(d, **fitted[d.type]) if fitted.get(d.type) else d for d in inst.devices]
    opts = {OPTION_FIELDS[k][0]: OPTION_FIELDS[k][1](v) for k, v in cal.get("options", {}).items()}
    out = replace(inst, devices=devices, _cache={})
    return out.with_options(**opts) if opts else out


def load_calibration(path: str | Path) -> dict[str, Any]:
    from geotrain_opt.common.inputs import read_text_file
    try:
        cal = json.loads(read_text_file(path, 16 << 20))
    except (ValueError, RecursionError) as e:      # JSONDecodeError is a ValueError
        raise InstanceError("<calibration>", f"cannot read {path}: {str(e)[:200]}") from None
    if not isinstance(cal, dict):
        raise InstanceError("<calibration>", "expected a JSON object")
    for key in ("gpu_types", "options"):
        if not isinstance(cal.get(key, {}), dict):
            raise InstanceError(f"<calibration>.{key}", "expected an object")
    for t, v in cal.get("gpu_types", {}).items():
        if not isinstance(v, dict):
            raise InstanceError(f"<calibration>.gpu_types.{t}", "expected an object")
        e = v.get("efficiency", 0.5)
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not 0 < e <= 1:
            raise InstanceError(f"<calibration>.gpu_types.{t}.efficiency", f"must be in (0, 1], got {e!r}")
        h = v.get("half_tokens", 0.0)
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 <= h < float("inf"):
            raise InstanceError(f"<calibration>.gpu_types.{t}.half_tokens", f"must be a number >= 0, got {h!r}")
    k = cal.get("options", {}).get("exposed_comm", 0.5)
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not 0 <= k <= 1:
        raise InstanceError("<calibration>.options.exposed_comm", f"must be in [0, 1], got {k!r}")
    g = cal.get("options", {}).get("host_stack_gbps", 1.0)
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g < float("inf"):
        raise InstanceError("<calibration>.options.host_stack_gbps", f"must be a number > 0, got {g!r}")
    unknown = set(cal.get("options", {})) - set(OPTION_FIELDS)
    if unknown:
        raise InstanceError("<calibration>.options", f"unknown field(s) {', '.join(sorted(unknown))}")
    return cal


def predict(runs: list[Run], cal: dict[str, Any]) -> np.ndarray:
    """The model's T of every run under ``cal``: the calibration applied once per
    instance and its runs' plans evaluated in batches (the least-squares fit calls this
    for every step and Jacobian column: run by run, 9,000 runs took minutes)."""
    out = np.empty(len(runs))
    by_inst: dict[int, list[int]] = {}
    for i, r in enumerate(runs):
        by_inst.setdefault(id(r.instance), []).append(i)
    for members in by_inst.values():
        inst = apply_calibration(runs[members[0]].instance, cal)
        plain = [i for i in members if not runs[i].plan.groups]
        for i in set(members) - set(plain):       # tensor-parallel plans (§14): each its own instance
            out[i] = evaluate(inst, runs[i].plan).time_s
        rows = BatchEvaluator(inst).evaluate_plans([runs[i].plan for i in plain]) if plain else []
        for i, row in zip(plain, rows):
            out[i] = float(row.time_s[0])
    return out


def fit_errors(runs: list[Run], cal: dict[str, Any]) -> dict[str, Any]:
    rel = predict(runs, cal) / np.array([r.measured_s for r in runs]) - 1.0
    worst = int(np.argmax(np.abs(rel)))
    return {"median_abs_rel_err": float(np.median(np.abs(rel))), "worst_rel_err": float(rel[worst]),
            "points": len(runs)}


def calibrate(runs: list[Run], fit: tuple[str, ...] = FITTABLE, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Least squares on relative error over the parameters the runs identify; returns
    the calibration, with ``warnings`` naming every parameter held or left loose."""
    from scipy.optimize import least_squares
    unknown = set(fit) - set(FITTABLE)
    twice = sorted({f for f in fit if list(fit).count(f) > 1})
    if twice:
        raise InstanceError("--fit", f"{twice[0]} given twice")
    if unknown or not fit:
        raise InstanceError("--fit", f"choose from {', '.join(FITTABLE)}, got {', '.join(sorted(unknown)) or 'nothing'}")
    warnings: list[str] = []
    params = identifiable(runs, fit, warnings)
    if not params:
        raise InstanceError("--fit", "the runs identify none of the parameters asked for: " + "; ".join(warnings))
    if len(params) > len(runs):
        raise InstanceError("--fit", f"{len(params)} parameters ({', '.join(p.label for p in params)}) but only "
                                     f"{len(runs)} measured run(s): measure more or fit fewer (--fit)")
    if len(params) == len(runs):
        n = len(params)
        warnings.append(f"{n} parameter{'s' * (n > 1)} on {n} run{'s' * (n > 1)}: the fit reproduces the runs by construction, "
                        "so its error says nothing of the model's; hold runs out to validate")
    base = base or {}
    meas = np.array([r.measured_s for r in runs])
    lo, hi = np.array([p.lo for p in params]), np.array([p.hi for p in params])

    def resid(x: np.ndarray) -> np.ndarray:
        return predict(runs, _cal(params, x, base)) / meas - 1.0

    # the model is piecewise smooth (max terms): start from the given values and
    # from the ends of the loose ones, and keep the best local fit
    sols = [least_squares(resid, x, bounds=(lo, hi), x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12)
            for x in _starts(params)]
    sol = min(sols, key=lambda r: r.cost)
    warnings += loose(params, sol.x, sol.jac)
    cal = _cal(params, sol.x, base)
    cal["fit"] = fit_errors(runs, cal)
    cal["warnings"] = warnings
    return cal
