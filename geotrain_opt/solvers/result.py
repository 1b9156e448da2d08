"""The one result type every solver returns (formulations/model.md §5)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from geotrain_opt.cost.evaluator import Evaluation, evaluate
from geotrain_opt.problem.instance import Instance
from geotrain_opt.problem.plan import Plan
from geotrain_opt.common.provenance import RESULT_SCHEMA, provenance

class Status(str, Enum):
    """How a run ended. A ``str`` too, so ``res.status == "optimal"`` and JSON keep working."""

    OPTIMAL = "optimal"          # proven optimal (exact solvers)
    FEASIBLE = "feasible"        # a plan, not proven optimal, by an exact solver
    INFEASIBLE = "infeasible"    # proven: no plan meets the constraints
    TIME_LIMIT = "time_limit"    # an exact solver stopped at its limit
    UNKNOWN = "unknown"          # no plan found, nothing proven
    HEURISTIC = "heuristic"      # a plan from a heuristic (never a proof)
    PARTIAL = "partial"          # a front cut at the requested number of points
    REFUSED = "refused"          # the solver declined the instance (e.g. too many plans)
    ERROR = "error"              # the run crashed (bench rows)

    # plain strings in f-strings and str() on every Python (3.12 changed Enum formatting)
    __str__ = str.__str__
    __format__ = str.__format__


STATUSES = tuple(s.value for s in Status)


@dataclass
class SolverResult:
    solver: str
    status: str
    plan: Plan | None
    evaluation: Evaluation | None
    objective: str
    objective_value: float | None = None
    best_bound: float | None = None
    seed: int | None = None
    wall_s: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    pareto: list["SolverResult"] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=provenance)

    def __post_init__(self) -> None:
        self.status = Status(self.status)     # a misspelt status is an error here, not a silent new value

    @property
    def gap(self) -> float | None:
        if self.objective_value is None or self.best_bound is None:
            return None
        if self.objective_value == 0:
            return 0.0
        return max(0.0, (self.objective_value - self.best_bound) / abs(self.objective_value))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": RESULT_SCHEMA, "solver": self.solver, "status": self.status, "objective": self.objective,
            "objective_value": self.objective_value, "best_bound": self.best_bound, "gap": self.gap,
            "seed": self.seed, "wall_s": self.wall_s, "settings": _finite(self.settings), "stats": _finite(self.stats),
            "plan": self.plan.to_dict() if self.plan else None,
            "evaluation": self.evaluation.to_dict() if self.evaluation else None,
            "provenance": self.provenance,
        }
        if self.pareto:
            d["pareto"] = [p.to_dict() for p in self.pareto]
        return d

    def save(self, path: str | Path, flag: str = "--out") -> None:
        from geotrain_opt.common.outputs import write_text
        write_text(path, json.dumps(self.to_dict(), indent=2) + "\n", flag)

    @staticmethod
    def from_dict(d: dict[str, Any], inst: Instance | None = None) -> "SolverResult":
        plan = Plan.from_dict(d["plan"]) if d.get("plan") else None
        ev = None
        if plan is not None and inst is not None:
            ev = evaluate(inst, plan)
        elif d.get("evaluation"):
            e = d["evaluation"]
            ev = Evaluation(**{k: e[k] for k in Evaluation.__dataclass_fields__ if k in e})
        return SolverResult(
            solver=d["solver"], status=d["status"], plan=plan, evaluation=ev,
            objective=d["objective"], objective_value=d.get("objective_value"),
            best_bound=d.get("best_bound"), seed=d.get("seed"), wall_s=d.get("wall_s", 0.0),
            settings=d.get("settings", {}), stats=d.get("stats", {}),
            pareto=[SolverResult.from_dict(p, inst) for p in d.get("pareto", [])],
            provenance=d.get("provenance", {}),
        )

    @staticmethod
    def load(path: str | Path, inst: Instance | None = None) -> "SolverResult":
        from geotrain_opt.common.inputs import read_text_file
        from geotrain_opt.errors import GeoTrainError
        try:
            return SolverResult.from_dict(json.loads(read_text_file(path, 256 << 20)), inst)
        except (ValueError, RecursionError) as e:      # JSONDecodeError is a ValueError
            raise GeoTrainError(f"result {path}: {str(e)[:200]}") from None


def _finite(node: Any) -> Any:
    """``node`` with every non-finite float as None: JSON has no inf or NaN, and a
    solver's statistics may hold one (a case with no plan has no value)."""
    if isinstance(node, float):
        return node if math.isfinite(node) else None
    if isinstance(node, dict):
        return {k: _finite(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_finite(v) for v in node]
    return node
