"""The benchmark library (issue 41): ``instances/lib/``, a versioned set of instances,
each with its record: the best known plan and its value, the best lower bound, the
status (optimal, or open with its gap), which solver and version found each and the
command that reproduces it — as MIPLIB and QAPLIB keep theirs.

Layout: ``instances/lib/index.yaml`` (version and records), ``instances/lib/instances/
NAME.yaml``, ``instances/lib/plans/NAME.json``. A record is trusted only after
``check``: its plan evaluated again on its instance must give its value, and its bound
may not exceed it. ``update`` records a better plan or a higher bound after that same
check, never a worse one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geotrain_opt.errors import GeoTrainError

LIB = Path(__file__).resolve().parents[2] / "instances" / "lib"
REL_TOL = 1e-9          # a record's value as its plan evaluates, to this relative tolerance


class LibraryError(GeoTrainError):
    """A record that does not verify, or a library file that cannot be read."""


@dataclass
class Check:
    name: str
    ok: bool
    message: str


def load_index(root: Path = LIB) -> dict[str, Any]:
    import yaml
    from geotrain_opt.common.inputs import read_text_file
    try:
        idx = yaml.safe_load(read_text_file(root / "index.yaml", 16 << 20))
    except (ValueError, yaml.YAMLError) as e:
        raise LibraryError(f"library: {root / 'index.yaml'}: {str(e)[:200]}") from None
    if not isinstance(idx, dict) or not isinstance(idx.get("records"), list):
        raise LibraryError(f"library: {root / 'index.yaml'}: expected a mapping with a list of records")
    return idx


def record(idx: dict[str, Any], name: str) -> dict[str, Any]:
    for r in idx["records"]:
        if r["name"] == name:
            return r
    raise LibraryError(f"library: no instance {name!r} (geotrain-opt lib list)")


def _value(inst: Any, plan: Any) -> tuple[float, Any]:
    from geotrain_opt.cost import objective as objmod
    from geotrain_opt.cost.evaluator import evaluate
    ev = evaluate(inst, plan)
    if not ev.acceptable:
        raise LibraryError("the plan is infeasible or outside the instance's limits: " + "; ".join(ev.violations)[:200])
    return float(objmod.of(inst.objective, ev)[0]), ev


def check_record(rec: dict[str, Any], root: Path = LIB) -> Check:
    """Re-evaluate the record's plan on its instance: the value must match and the
    bound may not exceed it; an "optimal" record needs its bound equal to it."""
    from geotrain_opt.problem.instance import load_instance
    from geotrain_opt.problem.plan import Plan
    name = rec["name"]
    try:
        inst = load_instance(root / rec["instance"])
        if rec.get("best") is None:
            return Check(name, rec.get("status") == "open", "no plan known" + ("" if rec.get("status") == "open"
                                                                              else ", yet not marked open"))
        value, _ = _value(inst, Plan.load(root / rec["best"]["plan"]))
    except GeoTrainError as e:
        return Check(name, False, str(e))
    want = float(rec["best"]["value"])
    if abs(value - want) > REL_TOL * max(abs(want), 1e-300):
        return Check(name, False, f"the plan evaluates to {value:.12g}, the record says {want:.12g}")
    bound = rec.get("bound", {}).get("value")
    if bound is not None and float(bound) > value * (1 + REL_TOL):
        return Check(name, False, f"bound {bound} above the plan's value {value:.12g}")
    if rec.get("status") == "optimal" and (bound is None or float(bound) < value * (1 - 1e-6)):
        return Check(name, False, "marked optimal without a bound equal to its value")
    return Check(name, True, f"{value:.6g} ({rec.get('status')})")


def compare(name: str, plan_path: str, root: Path = LIB) -> tuple[str, float, float | None]:
    """A plan of library instance ``name`` against its record: ("beats" | "matches" |
    "worse", its value, the record's value)."""
    from geotrain_opt.problem.instance import load_instance
    from geotrain_opt.problem.plan import Plan
    rec = record(load_index(root), name)
    value, _ = _value(load_instance(root / rec["instance"]), Plan.load(plan_path))
    best = None if rec.get("best") is None else float(rec["best"]["value"])
    if best is None or value < best * (1 - REL_TOL):
        return "beats", value, best
    return ("matches" if value <= best * (1 + REL_TOL) else "worse"), value, best


def update(name: str, plan_path: str | None, bound: float | None, by: dict[str, Any],
           root: Path = LIB) -> list[str]:
    """Record a better plan and/or a higher bound (each verified first; never a worse
    one); returns what changed. ``by``: solver, version, command of the new result."""
    from geotrain_opt.common.outputs import write_text
    from geotrain_opt.problem.plan import Plan
    idx = load_index(root)
    rec = record(idx, name)
    changed = []
    if plan_path is not None:
        verdict, value, best = compare(name, plan_path, root)
        if verdict == "beats":
            target = root / "plans" / f"{name}.json"
            write_text(target, json.dumps(Plan.load(plan_path).to_dict(), indent=2) + "\n", "plan")
            rec["best"] = {"value": value, "plan": f"plans/{name}.json", **by}
            changed.append(f"best {best} -> {value:.12g}")
    if bound is not None:
        bound = float(bound)
        value = None if rec.get("best") is None else float(rec["best"]["value"])
        if value is not None and bound > value * (1 + REL_TOL):
            raise LibraryError(f"library: bound {bound} above the best known value {value:.12g}: not a lower bound")
        if bound > float(rec.get("bound", {}).get("value") or float("-inf")):
            rec["bound"] = {"value": bound, **by}
            changed.append(f"bound -> {bound:.12g}")
    if changed:
        _restatus(rec)
        write_text(root / "index.yaml", dump_index(idx), "index")
    return changed


def rebase(name: str, root: Path = LIB) -> str:
    """After a change of the cost model: the record's plan valued again, and its bound
    dropped (it was proved under the model before; `update --bound` records a new one).
    Only a record whose value moved is touched; returns what happened."""
    from geotrain_opt.common.outputs import write_text
    from geotrain_opt.problem.instance import load_instance
    from geotrain_opt.problem.plan import Plan
    idx = load_index(root)
    rec = record(idx, name)
    if rec.get("best") is None:
        return "no plan known: nothing to value"
    value, _ = _value(load_instance(root / rec["instance"]), Plan.load(root / rec["best"]["plan"]))
    old = float(rec["best"]["value"])
    if abs(value - old) <= REL_TOL * max(abs(old), 1e-300):
        return f"{value:.12g}, as recorded: kept"
    rec["best"]["value"] = value
    rec.pop("bound", None)
    _restatus(rec)
    write_text(root / "index.yaml", dump_index(idx), "index")
    return f"best {old:.12g} -> {value:.12g} (the same plan under the model now); bound dropped"


def _restatus(rec: dict[str, Any]) -> None:
    value = None if rec.get("best") is None else float(rec["best"]["value"])
    bound = rec.get("bound", {}).get("value")
    if value is None or bound is None:
        rec["status"], rec["gap"] = "open", None
        return
    gap = max(0.0, (value - float(bound)) / value) if value else 0.0
    rec["gap"] = gap
    rec["status"] = "optimal" if gap <= 1e-6 else "open"


def best_known(root: Path = LIB) -> dict[str, tuple[str, float]]:
    """Instance file hash (as bench rows carry it, ``instance_hash``) -> (objective,
    best known value): the references of a benchmark run on the library."""
    import hashlib
    out = {}
    for r in load_index(root)["records"]:
        path = root / r["instance"]
        if r.get("best") is not None and path.is_file():
            out[hashlib.sha256(path.read_bytes()).hexdigest()[:16]] = (r.get("objective"), float(r["best"]["value"]))
    return out


def dump_index(idx: dict[str, Any]) -> str:
    import yaml
    return "# geotrain-opt benchmark library: records verified by `geotrain-opt lib check`\n" + yaml.safe_dump(
        idx, sort_keys=False, width=120)


def table(idx: dict[str, Any], status: str | None = None, min_gpus: int = 0) -> list[dict[str, Any]]:
    rows = []
    for r in idx["records"]:
        if (status and r.get("status") != status) or r.get("gpus", 0) < min_gpus:
            continue
        rows.append({"name": r["name"], "gpus": r.get("gpus"), "structure": r.get("structure", ""),
                     "objective": r.get("objective"), "status": r.get("status"),
                     "best": None if r.get("best") is None else r["best"]["value"],
                     "bound": r.get("bound", {}).get("value"), "gap": r.get("gap"),
                     "found_by": None if r.get("best") is None else r["best"].get("solver")})
    return rows


def markdown(rows: list[dict[str, Any]], version: str) -> str:
    out = [f"Library version {version}: {len(rows)} instances, "
           f"{sum(r['status'] == 'optimal' for r in rows)} optimal, {sum(r['status'] == 'open' for r in rows)} open.",
           "", "| instance | GPUs | structure | objective | status | best known | lower bound | gap | found by |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.6g}"  # noqa: E731
        gap = "-" if r["gap"] is None else f"{r['gap']:.2%}"
        out.append(f"| {r['name']} | {r['gpus']} | {r['structure']} | {r['objective']} | {r['status']} | "
                   f"{fmt(r['best'])} | {fmt(r['bound'])} | {gap} | {r['found_by'] or '-'} |")
    return "\n".join(out) + "\n"
