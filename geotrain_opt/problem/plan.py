"""The plan every solver returns (formulations/model.md §2) and its JSON form."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from geotrain_opt.common.inputs import read_text_file
from geotrain_opt.errors import PlanError
from geotrain_opt.common.provenance import PLAN_SCHEMA, PLAN_SCHEMA_TP

# every field of a plan file (io/schema.py's plan schema lists exactly these)
PLAN_FIELDS = ("schema", "stages", "replicas", "grid", "cuts", "micro_batches", "micro_batch", "recompute", "clocks")


def split_micro_batches(M: int, D: int) -> list[int]:
    """The even split of M micro-batches over D replicas (the first M mod D get one more)."""
    base, extra = divmod(M, D)
    return [base + (1 if k < extra else 0) for k in range(D)]


def _slot(g: Any) -> "str | tuple[str, ...]":
    """A grid entry as the plan keeps it: a device id, or a tuple of two or more."""
    if isinstance(g, (list, tuple)):
        return str(g[0]) if len(g) == 1 else tuple(str(x) for x in g)
    return str(g)


def slot_id(g: "str | tuple[str, ...]") -> str:
    """The id of a slot's device in the instance that costs it (a group's: §14)."""
    return g if isinstance(g, str) else "+".join(g)


def slot_label(g: "str | tuple[str, ...]") -> str:
    """A slot as people read it: a device id, or a group's ids in brackets."""
    return g if isinstance(g, str) else "[" + " ".join(g) + "]"


@dataclass(frozen=True)
class Plan:
    """``grid[k][j]`` is the device id of replica ``k``, stage ``j``, or the ids of its
    tensor-parallel group (a tuple, model.md §14)."""

    grid: tuple[tuple[Any, ...], ...]
    cuts: tuple[int, ...]
    micro_batches: tuple[int, ...]
    # (device id, clock fraction) of the devices not at their full clock (model.md §10), sorted
    clocks: tuple[tuple[str, float], ...] = ()
    # §11: the plan's micro-batch size and recomputation (None: the model's own)
    micro_batch: int | None = None
    recompute: str | None = None

    def clock(self, device: str) -> float:
        return dict(self.clocks).get(device, 1.0)

    @property
    def stages(self) -> int:
        return len(self.grid[0])

    @property
    def replicas(self) -> int:
        return len(self.grid)

    @property
    def devices(self) -> list[str]:
        """Every GPU the plan uses (a group's members one by one)."""
        return [d for row in self.grid for g in row for d in ((g,) if isinstance(g, str) else g)]

    @property
    def groups(self) -> list[tuple[str, ...]]:
        """Its tensor-parallel groups (none: every slot is one GPU)."""
        return [g for row in self.grid for g in row if not isinstance(g, str)]

    @property
    def tp(self) -> int:
        """Its tensor-parallel degree (1 without groups; the largest where they differ)."""
        return max((len(g) for g in self.groups), default=1)

    def to_dict(self) -> dict[str, Any]:
        d = {"schema": PLAN_SCHEMA_TP if self.groups else PLAN_SCHEMA, "stages": self.stages, "replicas": self.replicas,
             "grid": [[g if isinstance(g, str) else list(g) for g in r] for r in self.grid], "cuts": list(self.cuts),
             "micro_batches": list(self.micro_batches)}
        if self.clocks:
            d["clocks"] = dict(self.clocks)
        if self.micro_batch is not None:
            d["micro_batch"] = self.micro_batch
        if self.recompute is not None:
            d["recompute"] = self.recompute
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @staticmethod
    def make(grid: Sequence[Sequence[Any]], cuts: Sequence[int], micro_batches: Sequence[int],
             clocks: dict[str, float] | None = None) -> "Plan":
        return Plan(tuple(tuple(_slot(g) for g in row) for row in grid), tuple(int(c) for c in cuts),
                    tuple(int(m) for m in micro_batches),
                    tuple(sorted((str(g), float(f)) for g, f in (clocks or {}).items() if float(f) != 1.0)))

    @staticmethod
    def from_dict(d: Any) -> "Plan":
        """A plan from its JSON form (formulations/model.md §2); PlanError names the field."""
        if not isinstance(d, dict):
            raise PlanError("<root>", "expected a JSON object with grid, cuts, micro_batches")
        if "schema" in d and d["schema"] not in (PLAN_SCHEMA, PLAN_SCHEMA_TP):
            raise PlanError("schema", f"{d['schema']!r:.80} is not a plan format this version reads "
                                      f"({PLAN_SCHEMA}, {PLAN_SCHEMA_TP})")
        for key in ("grid", "cuts", "micro_batches"):
            if key not in d:
                raise PlanError(key, "missing required field")
        extra = [str(k) for k in d if k not in PLAN_FIELDS]
        if extra:                   # a misspelt field would otherwise be ignored in silence
            raise PlanError(extra[0][:60], f"unknown field (a plan has {', '.join(PLAN_FIELDS)})")
        grid = d["grid"]
        if not isinstance(grid, list) or not grid or not all(isinstance(r, list) and r for r in grid):
            raise PlanError("grid", "expected a non-empty list of non-empty lists of device ids")
        if len({len(r) for r in grid}) != 1:
            raise PlanError("grid", "every replica (row) must have the same number of stages")
        for row in grid:
            for g in row:
                if isinstance(g, list) and (not g or not all(isinstance(x, (str, int)) and not isinstance(x, bool)
                                                             for x in g)):
                    raise PlanError("grid", "a tensor-parallel group is a non-empty list of device ids, "
                                            f"got {g!r:.80}")
                if not isinstance(g, (str, int, list)) or isinstance(g, bool):
                    raise PlanError("grid", f"a slot is a device id or a list of them, got {g!r:.80}")
        for key in ("cuts", "micro_batches"):
            v = d[key]
            if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise PlanError(key, "expected a list of integers")
        clocks = d.get("clocks", {})
        if not isinstance(clocks, dict) or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool) for f in clocks.values()):
            raise PlanError("clocks", "expected a mapping of device id to clock fraction")
        b, r = d.get("micro_batch"), d.get("recompute")
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise PlanError("micro_batch", f"expected a positive integer, got {b!r}")
        if r is not None and r not in ("none", "full", "selective"):
            raise PlanError("recompute", f"must be none, full or selective, got {r!r}")
        plan = replace(Plan.make(grid, d["cuts"], d["micro_batches"], clocks), micro_batch=b, recompute=r)
        unknown = sorted(set(dict(plan.clocks)) - set(plan.devices))
        if unknown:
            raise PlanError("clocks", f"device {unknown[0]!r} is not in the grid")
        for key in ("stages", "replicas"):
            if isinstance(d.get(key), bool):         # True == 1: a one-stage plan would pass
                raise PlanError(key, f"expected an integer, got {d[key]!r}")
        if "stages" in d and d["stages"] != plan.stages:
            raise PlanError("stages", f"says {d['stages']} but the grid has {plan.stages} columns")
        if "replicas" in d and d["replicas"] != plan.replicas:
            raise PlanError("replicas", f"says {d['replicas']} but the grid has {plan.replicas} rows")
        if len(plan.cuts) != plan.stages + 1:
            raise PlanError("cuts", f"expected {plan.stages + 1} cut points for {plan.stages} stages, got {len(plan.cuts)}")
        if len(plan.micro_batches) != plan.replicas:
            raise PlanError("micro_batches", f"expected {plan.replicas} entries (one per replica), got {len(plan.micro_batches)}")
        return plan

    @staticmethod
    def load(path: str | Path) -> "Plan":
        return Plan.read(path)[0]

    @staticmethod
    def read(path: str | Path) -> tuple["Plan", Any]:
        """The plan of a plan file or a solver result file, and the document read."""
        try:
            text = read_text_file(path, 256 << 20)
        except ValueError as e:
            raise PlanError("<file>", str(e)) from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError("<file>", f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        except RecursionError:
            raise PlanError("<file>", "nested too deeply") from None
        d = doc
        if isinstance(d, dict) and "plan" in d and "grid" not in d:
            d = d["plan"]   # a solver result file holds its plan under "plan"
        return Plan.from_dict(d), doc

    # ---- index form used by the vectorised evaluator and the solvers
    def grid_indices(self, index: dict[str, int]) -> np.ndarray:
        try:
            return np.array([[index[slot_id(g)] for g in row] for row in self.grid], dtype=np.int64)
        except KeyError as e:
            raise PlanError("grid", f"unknown device id {e.args[0]!r}") from None

    @staticmethod
    def from_indices(ids: Sequence[str], grid: Any, cuts: Any, micro_batches: Any,
                     clocks: dict[str, float] | None = None) -> "Plan":
        return Plan.make([[ids[int(g)] for g in row] for row in np.asarray(grid)],
                         [int(c) for c in cuts], [int(m) for m in micro_batches], clocks)
