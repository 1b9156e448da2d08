"""Profiled per-layer times, as Sailor and Metis record them, turned into a GPU type's
efficiency curve (model.md §1: eff(n) = efficiency · n / (n + half_tokens), n the
tokens of a micro-batch), written as a calibration file that ``--calibration`` applies.

Formats (both peers profile one GPU type, a few micro-batch sizes and tensor-parallel
degrees, the transformer layers being identical):

- **sailor**: one ``profile.json``, ``{mbs: {tp: {layer: [forward_s, backward_s,
  update_s]}}}``; layer 0 is the embedding, the last one the head, those between
  the transformer layers (eth-easl/sailor, ``Planner/sailor_planner/profiles``).
- **metis**: one file per (tp, mbs), named ``DeviceType.<GPU>_tp<t>_bs<b>.json``, whose
  ``execution_time.layer_compute_total_ms`` lists forward + backward milliseconds per
  layer, the embedding first and the post-process last (Metis, ATC'24).

A point is a layer's forward and backward of one micro-batch of b sequences: achieved
FLOP/s = 3 F(b) / time (model.md §1, no recomputation) on n = b s tokens. Only
degree-1 points are fitted: at degree t the time also holds the group's all-reduces,
which model.md §14 prices separately.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from geotrain_opt.errors import InstanceError
from geotrain_opt.problem.instance import Instance

FORMATS = ("sailor", "metis")
_METIS_NAME = re.compile(r"_tp(\d+)_bs(\d+)\.json$")


@dataclass(frozen=True)
class Point:
    micro_batch: int
    tp: int
    layer_s: float            # one transformer layer's forward + backward, seconds


def _json(path: Path) -> Any:
    from geotrain_opt.common.inputs import read_text_file
    try:
        return json.loads(read_text_file(path, 64 << 20))
    except (ValueError, RecursionError) as e:
        raise InstanceError("profile", f"cannot read {path}: {str(e)[:160]}") from None


def _seconds(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e6:
        raise InstanceError(where, f"expected a positive time, got {v!r:.40}")
    return float(v)


def _inner(times: list[float], where: str) -> float:
    """The transformer layers' time: the median of all but the first (embedding) and
    the last (head) entries."""
    if len(times) < 3:
        raise InstanceError(where, f"expected the embedding, at least one layer and the head, got {len(times)} entries")
    return float(np.median(times[1:-1]))


def read_sailor(path: Path) -> list[Point]:
    data = _json(path)
    if not isinstance(data, dict) or not data:
        raise InstanceError("profile", "expected {micro_batch: {tp: {layer: [forward_s, backward_s, update_s]}}}")
    out = []
    for mbs, by_tp in data.items():
        if not str(mbs).isdigit() or not isinstance(by_tp, dict):
            raise InstanceError(f"profile.{str(mbs)[:20]}", "expected a micro-batch size mapping tensor-parallel degrees")
        for tp, layers in by_tp.items():
            where = f"profile.{mbs}.{str(tp)[:20]}"
            if not str(tp).isdigit() or not isinstance(layers, dict):
                raise InstanceError(where, "expected a degree mapping layers to [forward_s, backward_s, ...]")
            order = sorted(layers, key=lambda k: int(k) if str(k).isdigit() else -1)
            times = []
            for k in order:
                v = layers[k]
                if not str(k).isdigit() or not isinstance(v, list) or len(v) < 2:
                    raise InstanceError(f"{where}.{str(k)[:20]}", "expected [forward_s, backward_s, ...]")
                times.append(_seconds(v[0], f"{where}.{k}[0]") + _seconds(v[1], f"{where}.{k}[1]"))
            out.append(Point(int(mbs), int(tp), _inner(times, where)))
    return out


def read_metis(paths: list[Path]) -> list[Point]:
    files = [f for p in paths for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]
    if not files:
        raise InstanceError("profile", "no Metis profile files (DeviceType.<GPU>_tp<t>_bs<b>.json)")
    out = []
    for f in files:
        m = _METIS_NAME.search(f.name)
        if not m:
            raise InstanceError("profile", f"{f.name}: not a Metis profile name (..._tp<t>_bs<b>.json)")
        d = _json(f)
        try:
            ms = d["execution_time"]["layer_compute_total_ms"]
        except (KeyError, TypeError):
            raise InstanceError(f"{f.name}.execution_time.layer_compute_total_ms", "missing") from None
        if not isinstance(ms, list):
            raise InstanceError(f"{f.name}.execution_time.layer_compute_total_ms", "expected a list of milliseconds")
        times = [_seconds(v, f"{f.name}.layer_compute_total_ms[{i}]") / 1e3 for i, v in enumerate(ms)]
        out.append(Point(int(m.group(2)), int(m.group(1)), _inner(times, f.name)))
    return out


def fit_curve(inst: Instance, gpu_type: str, points: list[Point]) -> dict[str, Any]:
    """The calibration of ``gpu_type`` from profiled points on ``inst``'s model: the
    curve's two parameters by least squares on 1/eff = 1/e + (h/e)(1/n), a constant
    efficiency when the points do not vary the tokens or the fit leaves (0, 1]."""
    peak = next((d.peak_flops for d in inst.devices if d.type == gpu_type), None)
    if peak is None:
        raise InstanceError("--gpu-type", f"no device of type {gpu_type!r} in the instance")
    warnings = []
    used = [p for p in points if p.tp == 1]
    if len(used) < len(points):
        warnings.append(f"{len(points) - len(used)} point(s) at tensor-parallel degree > 1 not fitted: their "
                        "times hold the group's all-reduces, which model.md §14 prices separately")
    if not used:
        raise InstanceError("profile", "no point at tensor-parallel degree 1 to fit the efficiency curve to")
    m = inst.model
    n = np.array([p.micro_batch * m.seq_len for p in used], dtype=float)
    flop = np.array([replace(m, micro_batch=p.micro_batch, recompute="none").layer_work_flop() for p in used])
    eff = flop / np.array([p.layer_s for p in used]) / peak
    if np.any(eff > 1):
        raise InstanceError("profile", f"a layer ran at {eff.max():.2f} x the peak of {gpu_type}: the profile is of "
                                       "another model or sequence length than the instance's")
    e, h = float(np.median(eff)), 0.0        # a constant efficiency unless the curve fits
    if len(set(n)) < 2:
        warnings.append("the points do not vary the micro-batch: a constant efficiency, no curve")
    else:
        slope, icpt = np.polyfit(1.0 / n, 1.0 / eff, 1)
        if icpt > 0 and slope >= 0 and 1.0 / icpt <= 1.0:
            e, h = 1.0 / icpt, slope / icpt
        else:
            warnings.append("efficiency does not rise with the tokens as the curve does: a constant efficiency")
    pred = e * n / (n + h)
    return {"gpu_types": {gpu_type: {"efficiency": e, "half_tokens": h}},
            "fit": {"source": "profile", "points": [
                {"micro_batch": p.micro_batch, "tokens": float(k), "layer_s": p.layer_s, "efficiency": float(x),
                 "fitted": float(y)} for p, k, x, y in zip(used, n, eff, pred)],
                "max_abs_error": float(np.max(np.abs(pred / eff - 1)))},
            "warnings": warnings}


def import_profile(inst: Instance, fmt: str, paths: list[str], gpu_type: str) -> dict[str, Any]:
    """The calibration that a profile in ``fmt`` (one of FORMATS) gives ``gpu_type``."""
    if fmt not in FORMATS:
        raise InstanceError("--format", f"one of {', '.join(FORMATS)}, got {fmt!r}")
    if gpu_type not in {d.type for d in inst.devices}:        # before any file is read
        raise InstanceError("--gpu-type", f"no device of type {gpu_type!r} in the instance")
    ps = [Path(p) for p in paths]
    if fmt == "sailor":
        if len(ps) != 1:
            raise InstanceError("profile", "a Sailor profile is one profile.json")
        points = read_sailor(ps[0])
    else:
        points = read_metis(ps)
    return fit_curve(inst, gpu_type, points)
