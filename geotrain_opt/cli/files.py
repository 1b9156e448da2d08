"""The plan and result files a command is given (one reader for every command)."""
from __future__ import annotations

from geotrain_opt.errors import PlanError
from geotrain_opt.problem.plan import Plan


def read_plan(path: str) -> Plan:
    """A plan file, or a result file whose every field the result schema accepts
    (the plan alone would otherwise carry a broken result along in silence)."""
    plan, doc = Plan.read(path)
    # a result file (a bare {"plan": ...} wrapper aside) is checked whole
    if isinstance(doc, dict) and "plan" in doc and "grid" not in doc and set(doc) != {"plan"}:
        from geotrain_opt.io.schema import schema_errors
        errs = schema_errors(doc, "result")
        if errs:
            where, msg = (errs[0].split(": ", 1) + [""])[:2]
            raise PlanError(f"<result> {where}"[:80], f"breaks geotrain_opt/io/schemas/result.schema.json: {msg[:200]}")
    return plan
