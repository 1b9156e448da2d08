"""Write the exact model of one shape (D replicas x P stages) for other solvers:
MPS or LP (the MILP, via PuLP: Gurobi, SCIP, CPLEX, HiGHS, MIPLIB-style sets) or
the CP-SAT model as a protocol buffer (``.pb`` binary, ``.pbtxt`` text).

The model is the one `solve` builds for that shape (formulations/exact.md), in
the same units: time in T_ref * 2^-RES_BITS (MILP: T_ref), energy likewise, with
T_ref, E_ref the cost of the smallest feasible plan; no cutoff, no hint.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from geotrain_opt.construct.pieces import feasible_shapes, smallest_feasible_plan
from geotrain_opt.errors import SolverError
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance

FORMATS = ("mps", "lp", "cpsat")


def export_model(inst: Instance, D: int, P: int, fmt: str, path: str | Path) -> dict[str, Any]:
    """Build the (D, P) model and write it; returns its size and units."""
    from geotrain_opt.solvers.exact.driver import RES_BITS, reference_units, run_model
    if fmt not in FORMATS:
        raise SolverError(f"--format: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    shapes = feasible_shapes(inst)
    if (D, P) not in shapes:
        raise SolverError(f"--shape: {D}x{P} is not a feasible shape of {inst.name} "
                          f"(feasible: {', '.join(f'{d}x{p}' for d, p in shapes[:12])}{', …' if len(shapes) > 12 else ''})")
    ref = smallest_feasible_plan(inst)
    ev = evaluate(inst, ref) if ref is not None else None
    units = reference_units(ev)
    path = Path(path)
    if fmt == "cpsat":
        from geotrain_opt.solvers.exact.cpsat import CpSatBackend
        be, _, _ = run_model(CpSatBackend, inst, D, P, units)
        proto = be.m.Proto()
        if not be.m.ExportToFile(str(path)):
            raise SolverError(f"--out: cannot write {path}")
        return {"format": "cpsat", "variables": len(proto.variables), "constraints": len(proto.constraints),
                "t_unit_s": units.t_unit, "e_unit_j": units.e_unit, "text": path.suffix == ".pbtxt"}
    from geotrain_opt.solvers.exact.milp import PulpBackend
    units = units.scaled(2.0 ** RES_BITS)
    be, _, _ = run_model(PulpBackend, inst, D, P, units)
    try:
        if fmt == "mps":
            be.m.writeMPS(str(path))
        else:
            be.m.writeLP(str(path))
    except OSError as e:
        raise SolverError(f"--out: cannot write {path}: {e.strerror or e}") from None
    return {"format": fmt, "variables": be.m.numVariables(), "constraints": be.m.numConstraints(),
            "t_unit_s": units.t_unit, "e_unit_j": units.e_unit}
