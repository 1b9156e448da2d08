"""What keeps a whole command within its --time-limit at thousands of GPUs (issue 39),
each pinned to the values it replaced: the exposed time of a message computed where
read (one n x n array less per micro-batch variant), the simulator's event loop and
its stop, the memetic's duplicate repair, DT-FM's matrices by block and its local
search's stop, the exact driver's device classes only when a model runs, the cases a
solver cannot start, and the MILP engine's least time limit. No test reads a clock:
stops are counters, and "past the limit" is a limit of zero."""
from __future__ import annotations


import numpy as np
import pytest
import yaml

from geotrain_opt.cost.simulate import SimulationStopped, simulate, simulation_check
from geotrain_opt.problem.instance import instance_from_dict, load_instance
from geotrain_opt.problem.instance.tensor import at_degree
from geotrain_opt.solvers import SolveOptions, build_options, get
from geotrain_opt.solvers.result import SolverResult, Status


class Counter:
    """A stop that says so from its ``after``-th call on; ``calls`` counts them."""

    def __init__(self, after: int) -> None:
        self.after, self.calls = after, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls >= self.after


# ---------------------------------------------------------------- the exposed time
def _dense_exposed(inst) -> np.ndarray:
    """model.md §3 as the whole array was built before: kappa A / beta, plus A / gamma
    over the pair's parallel streams where the nodes differ, 0 on the diagonal."""
    a, m = inst.arrays, inst.model
    out = a.inv_beta * (inst.options.exposed_comm * m.boundary_bytes())
    mu = m.boundary_bytes() * inst.options.stack_s_per_byte
    if mu > 0:
        node = np.array([d.node for d in inst.devices])
        streams = inst.streams if inst.streams is not None else 1.0
        np.add(out, mu / streams, out=out, where=node[:, None] != node[None, :])
    np.fill_diagonal(out, 0.0)
    return out


@pytest.mark.parametrize("degree", [None, 2, 4])
def test_exposed_links_equal_the_whole_array_bit_for_bit(degree):
    d = yaml.safe_load(open("instances/llama70b-2region-tp.yaml"))
    d["options"].update(host_stack_gbps=25.0, exposed_comm=0.3)
    inst = instance_from_dict(d)
    if degree is not None:
        inst = at_degree(inst, degree)
        assert inst.streams is not None        # groups of 2 or 4 GPUs: parallel streams
    ex, dense = inst.arrays.exposed, _dense_exposed(inst)
    assert inst.arrays.mu > 0 and (dense > 0).any()
    n = inst.n
    rng = np.random.default_rng(0)
    u, v = rng.integers(n, size=(3, 5)), rng.integers(n, size=(3, 5))
    assert np.array_equal(ex[u, v], dense[u, v])
    assert np.array_equal(ex[:, :], dense) and np.array_equal(np.asarray(ex), dense)
    assert np.array_equal(ex.diagonal(), np.zeros(n))
    assert ex.max() == dense.max() and ex.shape == dense.shape and len(ex) == n
    assert float(ex[1, 0]) == dense[1, 0]


# ---------------------------------------------------------------- the simulator
@pytest.fixture(scope="module")
def llama7b():
    inst = load_instance("instances/llama7b-3region-28.yaml")
    plan = get("greedy")(inst, SolveOptions(time_limit_s=60)).plan
    return inst, plan


def test_the_simulator_stops_when_told_and_not_before(llama7b):
    inst, plan = llama7b
    transfers = 2 * (plan.stages - 1) * sum(plan.micro_batches)
    assert transfers > 2 * 1024             # the stop is polled every 1,024 transfers
    whole = simulate(inst, plan)
    assert simulate(inst, plan, stop=lambda: False).time_s == whole.time_s
    stop = Counter(2)
    with pytest.raises(SimulationStopped):
        simulate(inst, plan, stop=stop)
    assert stop.calls == 2     # polled twice: after 1,024 and 2,048
    assert simulation_check(inst, plan, whole.time_s, stop=lambda: True) is None
    check = simulation_check(inst, plan, whole.time_s, stop=lambda: False)
    assert check["time_s"] == whole.time_s and check["error"] == 0.0


# ---------------------------------------------------------------- the memetic's repair
def test_repair_takes_the_fastest_free_gpu_of_the_region_else_the_fastest():
    """demo-8gpu: va-0..3 A100 (virginia), oh-0..1 V100 (ohio), or-0..1 T4 (oregon).
    Grid [[va-0, oh-0], [va-0, oh-0], [or-0, or-0]]: the second va-0 becomes va-1 (the
    first free A100 of virginia, all equally fast: index order), the second oh-0
    becomes oh-1, the second or-0 becomes or-1; the rest (va-2, va-3) follows, shuffled."""
    from geotrain_opt.solvers.search.memetic.operators import repair
    inst = load_instance("instances/demo-8gpu.yaml")
    ix = inst.index
    ids = inst.ids
    grid = np.array([[ix[g] for g in row] for row in (["va-0", "oh-0"], ["va-0", "oh-0"], ["or-0", "or-0"])])
    out = repair(inst, 3, 2, grid, np.random.default_rng(0))
    assert [ids[g] for g in out[:6]] == ["va-0", "oh-0", "va-1", "oh-1", "or-0", "or-1"]
    assert sorted(ids[g] for g in out[6:]) == ["va-2", "va-3"]
    # no free GPU left in the region: the fastest free one of any region
    grid = np.array([[ix[g] for g in row] for row in (["or-0", "or-1"], ["or-0", "va-0"])])
    out = repair(inst, 2, 2, grid, np.random.default_rng(0))
    assert [ids[g] for g in out[:4]] == ["or-0", "or-1", "va-1", "va-0"]


# ---------------------------------------------------------------- DT-FM's scheduler
def test_dtfm_blocks_equal_its_whole_symmetrised_matrices():
    """DT-FM's c_pp = (alpha + alpha^T) / 2 + sa (1/beta + 1/beta^T) / 2 and c_dp with
    sg / D, 0 on the diagonal, as the whole matrices were built before (same operations
    in the same order: equal bit for bit)."""
    from geotrain_opt.solvers.baselines.dtfm import DtfmCost
    inst = load_instance("instances/real/dtfm-4-regional-geo.yaml")
    a, D, P, sa, sg = inst.arrays, 8, 8, 3.0e7, 5.0e8
    cost = DtfmCost(inst, D, P, sa, sg)
    inv = np.add(a.inv_beta, a.inv_beta.T)
    inv *= 0.5
    alpha = np.add(a.alpha, a.alpha.T)
    alpha *= 0.5
    cdp = inv * (sg / D) + alpha
    cpp = inv * sa + alpha
    np.fill_diagonal(cpp, 0.0)
    np.fill_diagonal(cdp, 0.0)
    every = np.arange(inst.n)
    assert np.array_equal(cost.block(every, every), cpp)
    rows, cols = [5, 0, 17], [17, 3, 40, 5]
    assert np.array_equal(cost.block(rows, cols), cpp[np.ix_(rows, cols)])
    groups = np.arange(D * P).reshape(P, D)[:, ::-1]
    sub = cdp[groups[:, :, None], groups[:, None, :]]
    assert cost.dp(groups) == float(2.0 * sub.sum(axis=2).max())


def test_dtfm_local_search_stops_between_moves_keeping_finished_cycles():
    from geotrain_opt.solvers.baselines.dtfm import DtfmCost, local_search
    inst = load_instance("instances/real/dtfm-4-regional-geo.yaml")
    D, P = 8, 8
    cpp = DtfmCost(inst, D, P, 3.0e7, 5.0e8).block(np.arange(D * P), np.arange(D * P))
    labels = np.repeat(np.arange(P), D)[np.random.default_rng(3).permutation(D * P)]
    whole = local_search(labels, cpp, D, P, np.random.default_rng(0))
    assert np.array_equal(local_search(labels, cpp, D, P, None, lambda: False), whole)
    assert not np.array_equal(whole, labels)          # the pass moves devices
    # told to stop at once: nothing is moved; later: a balanced partition still
    assert np.array_equal(local_search(labels, cpp, D, P, None, Counter(1)), labels)
    for after in (2, 5, 20):
        stop = Counter(after)
        part = local_search(labels, cpp, D, P, None, stop)
        assert stop.calls == after and np.array_equal(np.bincount(part, minlength=P), [D] * P)


# ---------------------------------------------------------------- the exact driver
def test_an_exact_solve_past_its_limit_builds_no_model_and_keeps_a_plan():
    """With no time left after the constructive plans the device classes (a second at
    4,096 GPUs) are never computed, no model is built, and the best constructive plan
    is returned with the instance's bound."""
    inst = load_instance("instances/demo-8gpu.yaml")
    res = get("cpsat")(inst, build_options("cpsat", time_limit_s=0.0))
    assert res.plan is not None and res.status == Status.TIME_LIMIT
    assert res.stats["model"] is None and "device_classes" not in inst._cache
    assert all(e["status"] == "closed" for e in res.stats["shape_log"])     # by bounds only, no model ran


# ---------------------------------------------------------------- cases of a solve
def test_cases_not_started_when_the_time_left_is_below_the_quickest_case():
    """Each case reports 10 s of wall time (it takes milliseconds here, so no clock
    decides): with 8 s of the limit left the next case, which needs as long, is not
    started (it would end past the limit); with hours left every case runs."""
    from geotrain_opt.solvers.choices import choice_cases, over_cases
    inst = load_instance("instances/demo-8gpu-levers.yaml")
    cases = choice_cases(inst)
    assert len(cases) >= 3
    ran = []

    def fn(case_inst, opts):
        ran.append(opts.time_limit_s)
        plan = get("greedy")(case_inst, SolveOptions(time_limit_s=60)).plan
        from geotrain_opt.cost.evaluator import evaluate
        return SolverResult("fake", Status.HEURISTIC, plan, evaluate(case_inst, plan), "time", wall_s=10.0)
    over_cases(fn, inst, SolveOptions(time_limit_s=8.0), cases, "choices")
    assert len(ran) == 1
    ran.clear()
    over_cases(fn, inst, SolveOptions(time_limit_s=1e4), cases, "choices")
    assert len(ran) == len(cases)


# ---------------------------------------------------------------- the MILP engines
@pytest.mark.parametrize("seconds, given", [(0.3, 0.3), (0.01, 0.1), (7.5, 7.5)])
def test_a_milp_engine_gets_the_slice_left_not_a_second(seconds, given):
    from geotrain_opt.solvers.exact.milp import MIN_SOLVE_S, _solver
    assert MIN_SOLVE_S == 0.1
    assert _solver(SolveOptions(time_limit_s=10), seconds, False).timeLimit == given


# ---------------------------------------------------------------- the bounds' link tiers
def test_distinct_links_are_numpys_unique_of_the_off_diagonal():
    from geotrain_opt.problem.tiers import _distinct_links
    rng = np.random.default_rng(5)
    for n in (2, 3, 17, 64):
        m = rng.choice([0.5, 1.0, 2.0, 3.5, np.inf], size=(n, n))
        np.fill_diagonal(m, -7.0)            # never counted
        off = ~np.eye(n, dtype=bool)
        assert np.array_equal(_distinct_links(m), np.unique(m[off]))
    m = rng.random((40, 40))
    assert np.array_equal(_distinct_links(m), np.unique(m[~np.eye(40, dtype=bool)]))


@pytest.mark.parametrize("path", ["instances/real/mixed-gen-5region-40.yaml", "instances/llama7b-3region-28.yaml"])
def test_site_links_from_tier0_components_equal_the_device_level_least(path):
    """The least 1/beta, hop and alpha between (and inside) the components of each
    lower tier of a merged component, from the tier-0 components' leasts, equal the
    least over the device pairs themselves (u != v)."""
    from geotrain_opt.problem.tiers import link_tiers, merged_components
    inst = load_instance(path)
    a = inst.arrays
    hop = a.alpha + a.A * a.inv_beta
    tiers = link_tiers(inst)
    seen = 0
    for t in range(1, len(tiers.levels)):
        for mt in merged_components(inst, tiers, t):
            for y in range(t):
                sizes, ib, hp, al = mt.site_links(y, a.inv_beta, a.alpha, a.A)
                labels = sorted(set(mt._labels[y].tolist()))
                groups = [mt.members[mt._labels[y] == lab] for lab in labels]
                assert sizes.tolist() == [len(g) for g in groups]
                for i, gi in enumerate(groups):
                    for k, gk in enumerate(groups):
                        pairs = [(u, v) for u in gi for v in gk if u != v]
                        for got, m in ((ib, a.inv_beta), (hp, hop), (al, a.alpha)):
                            want = min((m[u, v] for u, v in pairs), default=np.inf)
                            assert got[i, k] == want
                seen += 1
    assert seen > 0
