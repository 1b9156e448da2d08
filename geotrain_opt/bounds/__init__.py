"""Lower bounds on the objective of every plan of a shape (D, P), and of the instance.

Each bound relaxes the cost model of formulations/model.md §3 in a way a reader
can check in a line (formulations/proofs.md §8 states them with proofs):


- ``memory``: the stage that needs the most memory under the best cut still
  needs D devices that hold it; otherwise no plan of the shape exists;
- ``compute``: the busiest replica works at least M W / (sum of the D P fastest
  speeds); every replica's micro-batch period is at least the best integer
  cut's largest stage on the fastest device;
- ``tiers``: the links a plan may use. A replica's P devices are joined by its
  pipeline links and a ring's D devices by its ring links, so each lies in one
  connected component of the graph of links no slower than its slowest one.
  Over the tiers (distinct bandwidths) of the network this gives the slowest
  pipeline link x and ring link y that some replica and ring must have, jointly
  (a replica and a ring share a device, so they lie in one component);
- the time bound is max(compute, pipeline(x)) + ring(y), minimised over the
  feasible (x, y), less the longest drain a replica can have where D > 1 (a ring
  overlaps the drain of the stages before it, model.md §3.3); energy adds the busy energy of the work at the least
  J/FLOP and the waiting power of the D P lowest-waiting devices over that time.

All are cheap (numpy over the tiers), so the exact driver prunes shapes with them
before building a model, and every solver reports the instance's bound, the least
over its shapes, with the gap of its plan to it.

Layout: ``knobs`` (search budgets), ``cuts`` (the per-instance cut problems,
:class:`ShapeBounds`), ``shape`` (one shape's bound), ``merge`` (the merge tier's
cases); the network's tiers are ``problem/tiers.py`` (the constructive seeds read
them too); this module: every shape, the instance, a result.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from geotrain_opt.bounds.cuts import ShapeBounds
from geotrain_opt.bounds.knobs import INF
from geotrain_opt.bounds.shape import ShapeBound
from geotrain_opt.problem.tiers import Stopped, link_tiers
from geotrain_opt.construct.pieces import feasible_shapes
from geotrain_opt.decisions.choices import variants
from geotrain_opt.decisions.tensor import at_degrees
from geotrain_opt.problem.instance import tensor
from geotrain_opt.problem.tolerances import PROOF_RTOL

if TYPE_CHECKING:                     # pragma: no cover
    from geotrain_opt.problem.instance import Instance

__all__ = ["INF", "ShapeBound", "ShapeBounds", "attach_bound", "instance_bound", "link_tiers", "shape_bounds"]


# ShapeBounds' per-instance work (tiers, least links) against one pass over the n x n
# inverse bandwidths: 160-210 passes at 1,024 and 4,096 GPUs (measured, 2 cores; 1,000
# before the links' sorts went, issue 39), with a margin
PRECOMPUTE_PASSES = 300.0


def precompute_estimate(inst: "Instance") -> float:
    """Seconds ShapeBounds(inst) would take, from one timed pass over its links (0
    below 512 devices, where it takes milliseconds)."""
    if inst.n < 512:
        return 0.0
    t = time.perf_counter()
    # the instance's own links: as large as the arrays', and never a reason to build
    # them (a micro-batch variant's arrays cost 0.3 s at 4,096 GPUs, §11)
    float(inst.beta.min())
    return PRECOMPUTE_PASSES * (time.perf_counter() - t)


def shape_bounds(inst: "Instance", shapes: list[tuple[int, int]] | None = None,
                 stop: Callable[[], bool] | None = None) -> dict[tuple[int, int], ShapeBound]:
    """The bound of every shape (default: every feasible shape of the instance).
    ``stop()`` true: the shapes not reached yet get the trivial bound 0 ("not
    computed"; at thousands of GPUs every shape's bound takes longer than a short
    time limit), and nothing is kept for the next call."""
    # once per instance: the exact driver, ``solve`` and ``verify`` all ask for them
    every = inst._cache.get("shape_bounds")
    if every is None and stop is not None:
        try:
            if hasattr(stop, "left") and stop.left() < precompute_estimate(inst):
                raise Stopped   # it would not finish in the time left: not started at all
            sb = ShapeBounds(inst, stop)
        except Stopped:         # the time ran out before the per-instance work was done
            return {s: ShapeBound(*s, 0.0, "not computed", 0.0, 0.0) for s in (shapes or feasible_shapes(inst))}
        out, late = {}, False
        for s in dict.fromkeys(feasible_shapes(inst) + list(shapes or [])):
            late = late or stop()
            try:
                out[s] = ShapeBound(*s, 0.0, "not computed", 0.0, 0.0) if late else sb(*s)
            except Stopped:     # a shape's own precomputation would outlast the time left
                late, out[s] = True, ShapeBound(*s, 0.0, "not computed", 0.0, 0.0)
        if all(b.by != "not computed" for b in out.values()):
            inst._cache["shape_bounds"] = dict(out)
        return dict(out) if shapes is None else {s: out[s] for s in shapes}
    if every is None:
        sb = ShapeBounds(inst)
        every = inst._cache["shape_bounds"] = {s: sb(*s) for s in feasible_shapes(inst)}
    if shapes is None:
        return dict(every)
    missing = [s for s in shapes if s not in every]
    out = {s: every[s] for s in shapes if s in every}
    if missing:
        sb = ShapeBounds(inst)
        out.update({s: sb(*s) for s in missing})
    return out


def instance_bound(inst: "Instance", stop: Callable[[], bool] | None = None) -> tuple[float, dict[str, int]]:
    """(a lower bound on the primary objective of every plan, how many shapes each
    bound decided). inf when no shape admits a plan. With micro-batch size or
    recomputation to choose (model.md §11): the least over the choices; with
    tensor-parallel degrees to choose (§14), the least over the degrees. ``stop()``
    true: the shapes not reached get the trivial bound 0 (``by["not computed"]``)."""
    if tensor.degrees(inst) != (1,):
        value, by = INF, {}
        for _, at in at_degrees(inst):
            v, n = instance_bound(at, stop)
            value = min(value, v)
            for k, c in n.items():
                by[k] = by.get(k, 0) + c
        return value, by
    if inst.has_choices:
        value, by = INF, {}
        for v_inst in variants(inst)[1]:
            v, n = instance_bound(v_inst, stop)
            value = min(value, v)
            for k, c in n.items():
                by[k] = by.get(k, 0) + c
        return value, by
    bounds = inst._cache.get("shape_bounds")
    if bounds is None:          # not computed for an exact solver: the least, cheap shapes first
        return _least_bound(inst, stop)
    by: dict[str, int] = {}
    for b in bounds.values():
        by[b.by] = by.get(b.by, 0) + 1
    return min((b.value for b in bounds.values()), default=INF), by


def _least_bound(inst: "Instance", stop: Callable[[], bool] | None) -> tuple[float, dict[str, int]]:
    """The least shape bound without every shape's full bound: each shape's cheap
    bound (memory and compute, valid alone) first, then the full bound of the shapes
    in increasing order of it, until the next cheap bound is no lower than the least
    full one found: the rest cannot set the least (their plans are no better than
    their cheap bound). ``stop()`` true: the shapes not reached count their cheap
    bound (``by["compute only (time)"]``), still a valid bound, not 0."""
    if stop is not None and hasattr(stop, "left") and stop.left() < precompute_estimate(inst):
        return 0.0, {"not computed": len(feasible_shapes(inst))}
    try:
        sb = ShapeBounds(inst, stop)
    except Stopped:
        return 0.0, {"not computed": len(feasible_shapes(inst))}
    shapes = feasible_shapes(inst)
    cheap = []
    for s in shapes:
        if stop is not None and stop():        # not every shape has even its cheap bound
            return 0.0, {"not computed": len(shapes)}
        cheap.append(sb.cheap(*s))
    cheap.sort(key=lambda b: (b.value, b.D, b.P))
    best, by = INF, {}
    for i, c in enumerate(cheap):
        b = None
        if c.value < best and not (stop is not None and stop()):
            try:
                b = sb(c.D, c.P)
            except Stopped:     # its precomputation would outlast the time left: as if stopped here
                pass
        if b is None:
            # this one and the rest keep their cheap bound, each at least c's
            late = c.value < best
            for r in cheap[i:]:
                key = "compute only (time)" if late and r.by == "compute" else r.by
                by[key] = by.get(key, 0) + 1
            best = min(best, c.value)
            break
        by[b.by] = by.get(b.by, 0) + 1
        best = min(best, b.value)
    return best, by


def attach_bound(inst: "Instance", res, stop: Callable[[], bool] | None = None) -> None:
    """Give a result the instance's certified lower bound: ``stats["lower_bound"]``
    (value, seconds, how many shapes each bound decided) and ``best_bound`` (the
    larger of the solver's own and this one), so ``res.gap`` says how far at most
    the plan is from optimal, for any solver. ``stop()`` true (the command's time is
    up): the shapes not bounded yet count 0, which ``shapes_by`` says."""
    t = time.perf_counter()
    value, by = instance_bound(inst, stop)
    res.stats["lower_bound"] = {"value": value if value < INF else None, "seconds": round(time.perf_counter() - t, 3),
                                "shapes_by": by}
    if value < INF and res.objective_value is not None:
        # a bound above the plan is a wrong bound: kept as it is, so that the verifier sees it
        if value <= res.objective_value * (1 + PROOF_RTOL):
            value = min(value, res.objective_value)
        res.best_bound = value if res.best_bound is None else max(res.best_bound, value)
