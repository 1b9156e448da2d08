"""The verifier: re-evaluate every plan, cross-check exact methods, measure gaps.

For one instance it runs the requested solvers and checks that
(a) each returned plan re-evaluates from scratch to a feasible plan with the
    reported T and E (1e-9 relative) and within the objective's limits;
(b) the exact methods that claim optimality agree with each other, and no solver
    finds a plan better than a proven optimum (that would expose a wrong
    formulation or a wrong proof), and an instance one exact method proves
    infeasible has no feasible plan from any other;
(c) each heuristic's gap to the proven optimum, and for every plan its
    *certified* gap to the instance's lower bound (geotrain_opt/bounds/, independent of
    every solver), which exists at any size; a plan below that bound is an
    inconsistency too (a wrong bound).
Anything that fails is an *inconsistency*; the CLI exits non-zero on any.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geotrain_opt.cost import objective as objmod
from geotrain_opt import solvers
from geotrain_opt.io.describe import table
from geotrain_opt.errors import SolverError
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance, load_instance
from geotrain_opt.solvers.result import Status
from geotrain_opt.problem.tolerances import PROOF_RTOL, TINY
from geotrain_opt.problem.plan import slot_label

AGREE_RTOL = 1e-6


@dataclass
class SolverRun:
    solver: str
    status: str
    value: float | None
    time_s: float | None
    energy_j: float | None
    wall_s: float
    note: str = ""


@dataclass
class Verification:
    instance: str
    objective: str
    runs: list[SolverRun] = field(default_factory=list)
    optimum: float | None = None
    bound: float | None = None              # the instance's lower bound (geotrain_opt/bounds/)
    inconsistencies: list[str] = field(default_factory=list)
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)    # solver -> plan it returned

    @property
    def ok(self) -> bool:
        return not self.inconsistencies

    def gap(self, run: SolverRun) -> float | None:
        if self.optimum is None or run.value is None:
            return None
        return (run.value - self.optimum) / abs(self.optimum) if self.optimum else 0.0

    def certified_gap(self, run: SolverRun) -> float | None:
        """How far at most the run's plan is from optimal, by the lower bound."""
        if self.bound is None or run.value is None:
            return None
        return max(0.0, (run.value - self.bound) / abs(run.value)) if run.value else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "objective": self.objective, "optimum": self.optimum,
                "lower_bound": self.bound, "ok": self.ok, "inconsistencies": self.inconsistencies,
                "plans": self.plans,
                "runs": [dict(r.__dict__, gap=self.gap(r), certified_gap=self.certified_gap(r)) for r in self.runs]}


def verify_instance(inst: Instance, names: list[str], time_limit_s: float = 60.0, seed: int = 0,
                    extra: dict[str, dict[str, Any]] | None = None) -> Verification:
    """Run every solver of ``names`` (``extra``: per-solver options by name) and cross-check them."""
    ver = Verification(inst.name, inst.objective.kind)
    results = {}
    for name, ex in (extra or {}).items():
        solvers.check_options(name, ex)
    for name in names:
        opts = solvers.build_options(name, (extra or {}).get(name, {}), time_limit_s=time_limit_s, seed=seed)
        t = time.perf_counter()
        try:
            res = solvers.get(name)(inst, opts)
        except SolverError as e:      # e.g. brute force on a large instance: said, not hidden
            ver.runs.append(SolverRun(name, "refused", None, None, None, time.perf_counter() - t, str(e)))
            continue
        results[name] = res
        if res.plan is not None:
            ver.plans[name] = res.plan.to_dict()
        run = SolverRun(name, res.status, res.objective_value,
                        res.evaluation.time_s if res.evaluation else None,
                        res.evaluation.energy_j if res.evaluation else None, res.wall_s)
        ver.runs.append(run)
        # (a) re-evaluate from scratch
        if res.plan is not None:
            ev = evaluate(inst, res.plan)
            if not ev.feasible:
                ver.inconsistencies.append(f"{name}: returned an infeasible plan ({'; '.join(ev.violations)})")
            if not ev.within_limits:
                ver.inconsistencies.append(f"{name}: plan breaks a limit ({'; '.join(ev.limit_violations)})")
            for what, got, want in (("T", res.evaluation.time_s, ev.time_s), ("E", res.evaluation.energy_j, ev.energy_j)):
                if abs(got - want) > PROOF_RTOL * max(abs(want), TINY):
                    ver.inconsistencies.append(f"{name}: reported {what} = {got!r} but re-evaluation gives {want!r}")
            value = float(objmod.of(inst.objective, ev)[0])
            if res.objective_value is None or abs(res.objective_value - value) > PROOF_RTOL * max(abs(value), TINY):
                ver.inconsistencies.append(f"{name}: reported objective {res.objective_value!r} but plan gives {value!r}")
    # (b) the exact methods agree; nobody beats a proof
    proven = {n: r for n, r in results.items() if r.status == Status.OPTIMAL}
    infeasible = [n for n, r in results.items() if r.status == Status.INFEASIBLE]
    if proven:
        ver.optimum = min(r.objective_value for r in proven.values())
        best = min(proven, key=lambda n: proven[n].objective_value)
        for n, r in proven.items():
            if r.objective_value > ver.optimum * (1 + AGREE_RTOL) + TINY:
                ver.inconsistencies.append(f"{n}: proved optimum {r.objective_value:.9g} but "
                                           f"{best} proved {ver.optimum:.9g}")
        for m, r in results.items():
            for n, p in proven.items():
                if r.objective_value is not None and r.objective_value < p.objective_value * (1 - AGREE_RTOL):
                    ver.inconsistencies.append(
                        f"{m}'s plan ({r.objective_value:.9g}: {brief(r.plan)}) beats the optimum {n} proved "
                        f"({p.objective_value:.9g}: {brief(p.plan)}): {n}'s proof is wrong")
    for n in infeasible:
        for m, r in results.items():
            if r.plan is not None:
                ver.inconsistencies.append(f"{n} proved the instance infeasible but {m} returned a feasible plan")
    # (c) the lower bound, the solvers' independent judge at any size
    from geotrain_opt.bounds import INF, instance_bound
    bound, _by = instance_bound(inst)
    ver.bound = bound if bound < INF else None
    if ver.bound is not None and ver.optimum is not None and bound <= ver.optimum * (1 + PROOF_RTOL):
        ver.bound = min(bound, ver.optimum)      # a hair above a proved optimum is rounding
    for m, r in results.items():
        if r.objective_value is not None and (bound == INF or r.objective_value < bound * (1 - PROOF_RTOL)):
            ver.inconsistencies.append(f"{m}'s plan ({r.objective_value:.9g}) is below the instance's lower bound "
                                       f"({bound:.9g}): the bound is wrong")
    return ver


def brief(plan: Any) -> str:
    """One line that identifies a plan: shape, cuts, split and the grid."""
    if plan is None:
        return "no plan"
    rows = "; ".join(" > ".join(map(slot_label, row)) for row in plan.grid)
    return f"D={plan.replicas} P={plan.stages} cuts {list(plan.cuts)} m {list(plan.micro_batches)} grid [{rows}]"


def render(vers: list[Verification]) -> str:
    """Markdown report: one row per instance and solver, then every inconsistency."""
    rows = []
    for v in vers:
        for r in v.runs:
            g, c = v.gap(r), v.certified_gap(r)
            rows.append([v.instance, v.objective, r.solver, r.status,
                         "-" if r.value is None else f"{r.value:.6g}",
                         "-" if g is None else f"{g:.4%}", "-" if c is None else f"≤ {c:.2%}", f"{r.wall_s:.2f}"])
    out = ["| " + " | ".join(h) + " |" for h in [["instance", "objective", "solver", "status", "value",
                                                   "gap to optimum", "certified gap", "wall s"]]]
    out.append("|" + "---|" * 8)
    out += ["| " + " | ".join(r) + " |" for r in rows]
    bad = [f"- {v.instance}: {msg}" for v in vers for msg in v.inconsistencies]
    refused = [f"- {v.instance}: {r.solver} refused: {r.note}" for v in vers for r in v.runs if r.status == Status.REFUSED]
    out.append("")
    out.append(f"{len(vers)} instances, {sum(len(v.runs) for v in vers)} runs, {len(bad)} inconsistencies"
               + (f", {len(refused)} refused" if refused else ""))
    out += bad + refused
    return "\n".join(out) + "\n"


def summary(vers: list[Verification]) -> str:
    """Per-solver summary for the terminal."""
    names = sorted({r.solver for v in vers for r in v.runs})
    rows = []
    for n in names:
        runs = [(v, r) for v in vers for r in v.runs if r.solver == n]
        gaps = [v.gap(r) for v, r in runs if v.gap(r) is not None]
        opt = sum(1 for g in gaps if g <= 1e-3)
        refused = sum(1 for _, r in runs if r.status == Status.REFUSED)
        # "0/0" would read as a failure; say why there is nothing to compare
        within = f"{opt}/{len(gaps)}" if gaps else ("- (refused)" if refused == len(runs) else "- (no optimum known)")
        cert = [v.certified_gap(r) for v, r in runs if v.certified_gap(r) is not None]
        rows.append([n, str(len(runs)), str(refused), str(sum(1 for _, r in runs if r.status == Status.OPTIMAL)),
                     within, "-" if not gaps else f"{max(gaps):.3%}", "-" if not cert else f"≤ {max(cert):.2%}",
                     f"{sum(r.wall_s for _, r in runs):.1f}"])
    return table(rows, ["solver", "runs", "refused", "proved optimal", "within 0.1% of optimum", "worst gap",
                        "worst certified gap", "wall s"])


def verify_paths(paths: list[Path], names: list[str], time_limit_s: float, seed: int,
                 progress: bool = True, extra: dict[str, dict[str, Any]] | None = None) -> list[Verification]:
    out = []
    for i, p in enumerate(paths):
        v = verify_instance(load_instance(p), names, time_limit_s, seed, extra)
        out.append(v)
        if progress:
            print(f"[{i + 1}/{len(paths)}] {p.name}: {'ok' if v.ok else 'INCONSISTENT'}", flush=True, file=sys.stderr)
    return out


def write_reports(vers: list[Verification], md: str | None, js: str | None) -> None:
    from geotrain_opt.common.outputs import write_text
    if md:
        write_text(md, render(vers), "--report")
    if js:
        write_text(js, json.dumps([v.to_dict() for v in vers], indent=2) + "\n", "--json")
