"""Second opinions on exact claims: re-prove an "optimal" or "infeasible" result
with the other exact engine (CP-SAT <-> MILP).

The two back ends share the formulation but not the arithmetic (CP-SAT works on
a rounded integer relaxation, the MILP in floating point), so a wrong proof in
one (formulations/exact.md §5 tells how one happened) is very unlikely to be
repeated by the other. A result is *certified* when the other engine reaches
the same status and, for an optimum, the same objective value within
``AGREE_RTOL``; any other outcome (a better plan, a different value, a time
limit) leaves it uncertified, and ``stats["certificate"]`` says why.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from geotrain_opt import solvers
from geotrain_opt.solvers.result import SolverResult
from geotrain_opt.solvers.base import SolveOptions
from geotrain_opt.solvers.result import Status
from geotrain_opt.problem.tolerances import TINY

AGREE_RTOL = 1e-6
OTHER = {"cpsat": "milp", "milp": "cpsat"}


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= AGREE_RTOL * max(abs(a), abs(b), TINY)


def certify(inst: Any, res: SolverResult, opts: SolveOptions) -> SolverResult:
    """Run the other exact engine on ``inst`` and record the verdict in
    ``res.stats["certified"]`` (True/False) and ``res.stats["certificate"]``.
    ``res`` keeps its plan and status: certification only adds evidence."""
    if res.solver not in OTHER:
        raise ValueError(f"--certify needs an exact solver (cpsat or milp), not {res.solver!r}")
    if res.status not in (Status.OPTIMAL, Status.INFEASIBLE):
        res.stats["certified"] = False
        res.stats["certificate"] = {"reason": f"nothing to certify: status is {res.status}"}
        return res
    other = OTHER[res.solver]
    second = solvers.get(other)(inst, replace(opts, hint=None, extra=solvers.options_taken(other, opts.extra)))
    cert: dict[str, Any] = {"solver": other, "status": second.status, "objective_value": second.objective_value,
                            "best_bound": second.best_bound, "wall_s": second.wall_s}
    if second.status != res.status:
        ok = False
        cert["reason"] = f"{other} ended with status {second.status}, not {res.status}"
    elif res.status == Status.INFEASIBLE:
        ok = True
        cert["reason"] = f"{other} also proves the instance infeasible"
    elif _close(second.objective_value, res.objective_value):
        ok = True
        cert["reason"] = f"{other} proves the same optimum {second.objective_value:.9g}"
    else:
        ok = False
        better = "better" if second.objective_value < res.objective_value else "worse"
        cert["reason"] = (f"{other} proves {second.objective_value:.9g}, {better} than "
                          f"{res.solver}'s {res.objective_value:.9g}")
    if second.plan is not None and not ok:
        cert["plan"] = second.plan.to_dict()
    res.stats["certified"] = ok
    res.stats["certificate"] = cert
    return res
