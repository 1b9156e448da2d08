"""The exact model of one (D, P) shape, written once for two back ends.

The mathematics is in formulations/exact.md; the names below follow it. A back
end (CP-SAT or PuLP) only knows how to make variables, how to state
``lhs >= sum(coef * var) + const`` or ``sum(coef * var) <= rhs`` under
enforcement literals (CP-SAT: ``only_enforce_if``; MILP: big-M from variable
bounds) and how to minimise. Every continuous quantity is declared with a
*unit*: CP-SAT stores it as an integer multiple of that unit and rounds each
coefficient up (so the model never under-estimates a plan's cost), the MILP
stores value/unit as a continuous variable for numerical balance.

Layout: ``spec`` (back-end protocol, BuildSpec, Shape), ``rows`` (the rows, one
method per family), ``classes`` (interchangeable devices), ``readback`` (hints and
solutions); this module builds a model and is the one name the back ends import."""
from __future__ import annotations

from typing import Any

from geotrain_opt.problem.instance import Instance
from geotrain_opt.solvers.exact.classes import (_device_classes, class_twins, device_classes,
                                                interchangeable_classes, unit_order)
from geotrain_opt.solvers.exact.readback import canonical_grid, hint_values, read_plan, read_solution
from geotrain_opt.solvers.exact import gpipe, shared_wan, sync
from geotrain_opt.solvers.exact.rows import _Model
from geotrain_opt.problem.tolerances import LIMIT_MARGIN
from geotrain_opt.solvers.exact.spec import Backend, BuildSpec, BuildTimeout, Shape, Terms

__all__ = ["LIMIT_MARGIN", "Backend", "BuildSpec", "BuildTimeout", "Shape", "Terms", "_device_classes", "build",
           "canonical_grid", "class_twins", "device_classes", "hint_values", "interchangeable_classes", "read_plan",
           "read_solution", "unit_order"]



def build(inst: Instance, D: int, P: int, be: Backend, spec: BuildSpec | None = None, **fields: Any) -> Shape:
    """State the model of formulations/model.md §3 for a fixed (D, P) on back end
    ``be``, as ``spec`` says (or a :class:`BuildSpec` of ``fields``, e.g.
    ``t_unit=..., e_unit=...``). The energy cap of the spec is applied by the
    caller (``exact.run_model``), which states it as the instance's limit.

    The parts follow formulations/exact.md and run in this order (the order in
    which variables are created is part of what a CP-SAT run does, so it is fixed):
    layers per stage, units, assignment and symmetry (§3.1, §3.6, §3.7),
    micro-batches (§4), bounds for domains, stage times, pipeline links and rings
    (GPipe's two phases apart) and rings (§3.2), shared WAN capacity (§3.9, only when
    given), the replicas' times and T over them and the rings (sync.py), memory (§3.3),
    energy (§3.4), objective and limits (§3.5)."""
    m = _Model(inst, D, P, be, spec if spec is not None else BuildSpec(**fields))
    for part in (m.layers, m.units, m.assignment, m.symmetry, m.micro_batches, m.bounds, m.stage_times,
                 m.pipeline, lambda: gpipe.state(m), m.rings, lambda: shared_wan.state(m), m.makespan,
                 lambda: sync.state(m), m.memory, m.energy, m.objective):
        part()
    return Shape(D, P, m.x, m.nl, m.y, m.mu, m.T, m.E_terms, m.obj_terms,
                 dict(t=m.t, lk=m.lk, oc=m.oc, ex=m.ex, tau=m.tau, ring=m.ring, PT=m.PT, eb=m.ebv, om=m.omv),
                 m.unit_members, m.unit_level, bool(m.spec.classes and m.spec.symmetry))
