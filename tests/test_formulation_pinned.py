"""Pinned-plan tests of the exact formulation, term by term, in both back ends.

For random plans on random instances the model's decisions (x, layers per stage,
split) are fixed to the plan; minimising T first and every other derived variable
a little drives each to its least value, which must equal the evaluator's term:
T, E, each replica time T_k and each ring time R_j. A memory-infeasible plan must
make the pinned model infeasible. CP-SAT's integer model is a relaxation that may
sit below a term by its rounding (formulations/exact.md §5), never above.
"""
from __future__ import annotations

import numpy as np
import pytest
from ortools.sat.python import cp_model

from geotrain_opt import evaluate, instance_from_dict
from geotrain_opt.io.generate import generate
from geotrain_opt.problem.plan import Plan
from geotrain_opt.solvers.exact import formulation
from geotrain_opt.solvers.exact.cpsat import CpSatBackend
from geotrain_opt.solvers.exact.milp import PulpBackend

FAMILIES = ("tiny", "small", "mixed-power", "memory-tight")
CPSAT_RTOL = 2e-4      # relaxation slack at 2^-20 resolution, summed over a T_k row
MILP_RTOL = 1e-6


def random_plan(inst, rng):
    a = inst.arrays
    M, L = a.M, a.L
    n = min(inst.n, 6)
    for _ in range(100):
        D = int(rng.integers(1, n + 1))
        P = int(rng.integers(1, min(L, n // D) + 1))
        if D > M or (a.uniform and M % D):
            continue
        devs = rng.permutation(inst.n)[: D * P].reshape(D, P)
        cuts = [0] + sorted(rng.choice(np.arange(1, L), P - 1, replace=False).tolist()) + [L]
        if a.uniform:
            mb = [M // D] * D
        else:
            parts = sorted(rng.choice(np.arange(1, M), D - 1, replace=False).tolist()) if D > 1 else []
            mb = list(np.diff([0] + parts + [M]).astype(int))
        return Plan.from_indices(inst.ids, devs, cuts, mb)
    return None


def pinned(inst, plan, backend, what):
    be = backend()
    D, P = plan.replicas, plan.stages
    t_ref = evaluate(inst, plan).time_s
    e_ref = evaluate(inst, plan).energy_j
    res = 20 if backend is CpSatBackend else 0
    shape = formulation.build(inst, D, P, be, t_unit=t_ref * 2.0 ** -res, e_unit=e_ref * 2.0 ** -res,
                              symmetry=True)
    grid = plan.grid_indices(inst.index)
    for (g, k, j), var in shape.x.items():
        be.eq_int([(1, var)], int(grid[k][j] == g))
    if shape.n_layers is not None:
        for j, var in enumerate(shape.n_layers):
            be.eq_int([(1, var)], plan.cuts[j + 1] - plan.cuts[j])
    else:
        for (l, j), var in shape.y.items():
            be.eq_int([(1, var)], int(plan.cuts[j] <= l < plan.cuts[j + 1]))
    if shape.mb is not None:
        for k, row in enumerate(shape.mb):
            for v, b in enumerate(row, start=1):
                be.eq_int([(1, b)], int(plan.micro_batches[k] == v))
    V = shape.vars
    small = [v for name in ("t", "lk", "oc", "tau") for v in V[name].values()]
    small += [v for pair in V["ring"].values() for v in pair]
    if what == "time":
        be.minimize([(1.0, shape.T)] + [(1e-3, v) for v in small], t_ref * 2.0 ** -res)
    else:
        be.minimize(shape.E_terms, e_ref * 2.0 ** -res)
    return be, shape


def values(inst, plan, backend):
    out = solved(inst, plan, backend, "time")
    if out is not None:
        out["E"] = solved(inst, plan, backend, "energy")["E"]
    return out


def solved(inst, plan, backend, what):
    be, shape = pinned(inst, plan, backend, what)
    if backend is CpSatBackend:
        s = cp_model.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.max_time_in_seconds = 20
        s.parameters.auto_detect_greater_than_at_least_one_of = False
        st = s.solve(be.m)
        if st == cp_model.INFEASIBLE:
            return None
        assert st == cp_model.OPTIMAL
        val = lambda v: s.value(v) * be.unit.get(v.index, 1.0)  # noqa: E731
    else:
        import pulp
        st = be.m.solve(pulp.HiGHS(msg=False, timeLimit=20, gapRel=0.0))
        if pulp.LpStatus[st] == "Infeasible":
            return None
        assert pulp.LpStatus[st] == "Optimal"
        val = lambda v: (v.value() or 0.0) * be.unit.get(v.name, 1.0)  # noqa: E731
    a = inst.arrays
    V = shape.vars
    D, P = plan.replicas, plan.stages
    Tk = []
    from geotrain_opt.cost import stagecost as sc
    for k in range(D):
        m = plan.micro_batches[k]
        S_k, _q = (int(x) for x in sc.flushes(a, m))
        t = np.array([val(V["t"][k, j]) for j in range(P)])
        x = np.array([val(V["lk"][k, j]) for j in range(P - 1)])
        # exposed time of each hop: its own variable with a host stack, else kappa o
        e = [val(V["ex"][k, j]) if (k, j) in V["ex"] else a.kappa * val(V["oc"][k, j]) for j in range(P - 1)]
        e = np.concatenate([[0.0], e, [0.0]])
        row = t + 2 * (e[:-1] + e[1:])
        fill = row.sum() + 2 * x.sum()          # the fill passes every stage's row (model.md §3)
        tau = val(V["tau"][k])
        T_k = S_k * fill + (m - S_k) * tau
        if not a.gpipe:       # 1F1B's window (model.md §3.1) on the model's own values
            oc = np.array([val(V["oc"][k, j]) for j in range(P - 1)] + [0.0])
            tail = np.maximum((1.0 - a.fwd_share) * t + e[:-1] + e[1:], oc)   # each block's drain: window_time
            T_k = max(T_k, float(sc.window_time(row[None], x[None], np.array([tau]), np.array([fill]),
                                                np.array([float(m)]), np.array([float(S_k)]), tail[None])[0]))
        Tk.append(T_k)
    R = [val(V["ring"][j][0]) + val(V["ring"][j][1]) for j in range(P)] if D > 1 else [0.0] * P
    E = sum(c * val(v) for c, v in shape.E_terms)
    return {"T": val(shape.T), "E": E, "Tk": Tk, "R": R}


def close(model, true, rtol, scale):
    # the CP-SAT relaxation may be below the true term, never above
    return model <= true + rtol * scale and model >= true - rtol * scale


def run_case(seed: int, backend, rtol: float):
    rng = np.random.default_rng(seed)
    fam = FAMILIES[seed % len(FAMILIES)]
    d = generate(fam, int(rng.integers(4, 7)), seed)
    d.setdefault("options", {})
    d["options"]["exposed_comm"] = float(rng.choice([0.0, 0.5, 1.0]))
    d["options"]["accumulation_steps"] = int(rng.choice([1, 2, 3]))
    if seed % 2:        # the hosts' network stack on messages between nodes (model.md §3)
        d["options"]["host_stack_gbps"] = float(rng.choice([2.0, 20.0, 200.0]))
    inst = instance_from_dict(d)
    plan = random_plan(inst, rng)
    assert plan is not None
    # the model keeps one rotation of the ring and one labelling of interchangeable devices
    plan = Plan.from_indices(inst.ids, formulation.canonical_grid(inst, plan.grid_indices(inst.index)),
                             plan.cuts, plan.micro_batches)
    ev = evaluate(inst, plan)
    got = values(inst, plan, backend)
    if not ev.acceptable:
        assert got is None, f"{fam} seed {seed}: model accepts a plan the evaluator rejects"
        return
    assert got is not None, f"{fam} seed {seed}: model rejects a feasible plan"
    assert close(got["T"], ev.time_s, rtol, ev.time_s), ("T", got["T"], ev.time_s)
    assert close(got["E"], ev.energy_j, rtol, ev.energy_j), ("E", got["E"], ev.energy_j)
    for k, (m, t) in enumerate(zip(got["Tk"], ev.replica_times_s)):
        assert close(m, t, rtol, ev.time_s), (f"T_{k}", m, t)
    for j, (m, r) in enumerate(zip(got["R"], ev.stage_allreduce_s)):
        assert close(m, r, rtol, ev.time_s), (f"R_{j}", m, r)


@pytest.mark.parametrize("seed", range(12))
def test_pinned_milp(seed):
    run_case(seed, PulpBackend, MILP_RTOL)


@pytest.mark.parametrize("seed", range(12))
def test_pinned_cpsat(seed):
    run_case(seed, CpSatBackend, CPSAT_RTOL)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 200))
@pytest.mark.parametrize("engine", ["milp", "cpsat"])
def test_pinned_campaign(seed, engine):
    run_case(seed, PulpBackend if engine == "milp" else CpSatBackend,
             MILP_RTOL if engine == "milp" else CPSAT_RTOL)
