"""Tensor parallelism (formulations/model.md §14): a group's cost by hand, the group
against a hand-written instance of one device per group, the simulator against the
model, exact solvers against an enumeration by hand, and the plan file and errors."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

import geotrain_opt as gt
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.cost.simulate import simulate
from geotrain_opt.errors import InstanceError, PlanError
from geotrain_opt.problem.instance import instance_from_dict
from geotrain_opt.problem.plan import Plan

# 2 layers, h 64, s 16, V 128, f 256, b 1: F = 16 (8 h^2 + 4 h f + 4 s h) = 1,638,400 FLOP,
# a layer's work w = 3F = 4,915,200, the LM head's 6 b s h V = 786,432; A = b s h p = 2,048 bytes
MODEL = {"layers": 2, "hidden": 64, "heads": 8, "seq_len": 16, "vocab": 128, "ffn_hidden": 256,
         "global_batch": 4, "micro_batch": 1}
GPU = {"peak_tflops": 0.001, "efficiency": 1.0, "memory_gib": 1.0, "busy_w": 300.0, "wait_w": 50.0}
W_LAYER, W_HEAD, A = 4_915_200.0, 786_432.0, 2048.0
SIGMA1 = 1e9                 # one GPU, FLOP/s
ALPHA_IN, BETA_IN = 1e-3, 1.024e9          # inside a node: 1 ms, 8.192 Gbit/s


def physical(degrees=(1, 2), **options) -> dict:
    """Two nodes of two GPUs each, 5 ms / 1.024 Gbit/s between the nodes."""
    return {"name": "tp-hand", "model": dict(MODEL), "gpu_types": {"X": dict(GPU)},
            "devices": [{"id": f"{n}{i}", "type": "X", "region": "r", "node": n} for n in "ab" for i in range(2)],
            "network": {"intra_node": {"latency_ms": 1.0, "bandwidth_gbps": 8.192},
                        "intra_region": {"latency_ms": 5.0, "bandwidth_gbps": 1.024}},
            "options": {"tensor_parallel": list(degrees), "host_stack_gbps": 4.0, **options}}


def sigma_group() -> float:
    """sigma_G = w / (w / (2 sigma_1) + 8 (t - 1)(alpha + (A / t) / beta)), t = 2."""
    comm = 8 * 1 * (ALPHA_IN + (A / 2) / BETA_IN)          # 8.008 ms per layer and micro-batch
    return W_LAYER / (W_LAYER / (2 * SIGMA1) + comm)


def one_device_per_group() -> dict:
    """The same cluster written by hand as one device per group: twice the memory and
    power, sigma_G, links of two streams (twice the bandwidth), the host stack's share
    of a message halved (twice the rate)."""
    g2 = {"peak_tflops": sigma_group() / 1e12, "efficiency": 1.0, "memory_gib": 2.0, "busy_w": 600.0, "wait_w": 100.0}
    return {"name": "by-hand", "model": dict(MODEL), "gpu_types": {"X2": g2},
            "devices": [{"id": n.upper(), "type": "X2", "region": "r", "node": n} for n in "ab"],
            "network": {"intra_region": {"latency_ms": 5.0, "bandwidth_gbps": 2.048}},
            "options": {"host_stack_gbps": 8.0}}


PAIR = {"A": ["a0", "a1"], "B": ["b0", "b1"]}


def test_one_group_by_hand():
    """One replica, one stage on a group of two: each of 4 micro-batches takes
    (2 w + w_head) / sigma_G = 2.16 x 10.4656 ms, nothing else (P = D = 1)."""
    inst = instance_from_dict(physical())
    ev = evaluate(inst, Plan.from_dict({"grid": [[["a0", "a1"]]], "cuts": [0, 2], "micro_batches": [4]}))
    per_layer = W_LAYER / (2 * SIGMA1) + 8 * (ALPHA_IN + 1024 / BETA_IN)
    assert per_layer == pytest.approx(10.4656e-3, rel=1e-12)
    assert ev.time_s == pytest.approx(4 * (2 + W_HEAD / W_LAYER) * per_layer, rel=1e-12)
    assert ev.time_s == pytest.approx(0.090422784, rel=1e-12)
    # both GPUs busy the whole iteration: 2 x 300 W
    assert ev.busy_j == pytest.approx(600.0 * ev.time_s, rel=1e-12)


@pytest.mark.parametrize("grid", [[["A"], ["B"]], [["A", "B"]], [["B", "A"]], [["A"]]])
def test_groups_cost_as_one_device_each(grid):
    """Time, energy, every ring and memory of the group plan equal those of the
    hand-written one-device-per-group instance, under both schedules."""
    for schedule in ("1f1b", "gpipe"):
        inst = instance_from_dict(physical(schedule=schedule))
        hand = instance_from_dict({**one_device_per_group(), "options": {"host_stack_gbps": 8.0, "schedule": schedule}})
        P, D = len(grid[0]), len(grid)
        cuts = [0, 2] if P == 1 else [0, 1, 2]
        mb = [4 // D] * D
        ev = evaluate(inst, Plan.from_dict({"grid": [[PAIR[g] for g in row] for row in grid], "cuts": cuts,
                                            "micro_batches": mb}))
        ref = evaluate(hand, Plan.from_dict({"grid": grid, "cuts": cuts, "micro_batches": mb}))
        assert ev.feasible and ref.feasible
        for f in ("time_s", "energy_j", "pipeline_s", "allreduce_s", "busy_j", "wait_j", "network_j"):
            assert getattr(ev, f) == pytest.approx(getattr(ref, f), rel=1e-12), f
        # memory is reported per GPU: each of a group's two holds half
        mem = ev.memory_bytes
        assert all(mem[g + "0"] == mem[g + "1"] for g in "ab" if g + "0" in mem)
        assert sorted(2 * v for d, v in mem.items() if d.endswith("0")) == pytest.approx(
            sorted(ref.memory_bytes.values()), rel=1e-12)


def test_simulator_runs_group_plans_as_the_model_costs_them():
    inst = instance_from_dict(physical(accumulation_steps=2))
    for grid in ([[PAIR["A"]], [PAIR["B"]]], [[PAIR["A"], PAIR["B"]]], [[PAIR["B"], PAIR["A"]]]):
        D = len(grid)
        plan = Plan.from_dict({"grid": grid, "cuts": [0, 2] if len(grid[0]) == 1 else [0, 1, 2],
                               "micro_batches": [4 // D] * D})
        assert simulate(inst, plan).time_s == pytest.approx(evaluate(inst, plan).time_s, rel=1e-9)


def _every_plan(inst, groups_of):
    """Every plan of the 2-layer model on the slots ``groups_of`` (a list of slots)."""
    for D, P in ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4)):
        if P > 2 or D * P > len(groups_of) or 4 % D:
            continue
        for perm in itertools.permutations(groups_of, D * P):
            grid = [list(perm[k * P:(k + 1) * P]) for k in range(D)]
            cuts = [0, 2] if P == 1 else [0, 1, 2]
            yield Plan.make(grid, cuts, [4 // D] * D)


def test_exact_optimum_over_degrees_is_the_least_plan_by_enumeration():
    """CP-SAT and the MILP search degrees 1 and 2: their optimum is the least time of
    every plan at either degree, enumerated here plan by plan."""
    inst = instance_from_dict(physical())
    singles = ["a0", "a1", "b0", "b1"]
    pairs = [("a0", "a1"), ("b0", "b1")]
    best = min(ev.time_s for plans in (_every_plan(inst, singles), _every_plan(inst, pairs))
               for ev in map(lambda p: evaluate(inst, p), plans) if ev.feasible)
    for solver in ("cpsat", "milp", "bruteforce"):
        res = gt.solve(inst, solver, time_limit=60, seed=0)
        assert res.status == "optimal"
        assert res.evaluation.time_s == pytest.approx(best, rel=1e-9), solver
        assert [row["tensor_parallel"] for row in res.stats["tensor_parallel"]] == [2, 1]     # largest first
    assert gt.solve(inst, "cpsat", time_limit=60).best_bound <= best * (1 + 1e-9)


def test_a_model_too_big_for_one_gpu_is_planned_on_groups():
    """0.0008 GiB (0.86 MB) per GPU holds no stage of one layer, a group of two does: at
    degree 1 the instance is infeasible, at degree 2 every solver returns a group plan."""
    def big(degrees):
        d = physical(degrees)
        d["gpu_types"]["X"]["memory_gib"] = 0.0008
        return d
    with pytest.raises(InstanceError, match="fits on no subset"):
        instance_from_dict(big([1]))
    inst = instance_from_dict(big([1, 2]))
    for solver in ("cpsat", "greedy", "memetic", "megatron-uniform"):
        res = gt.solve(inst, solver, time_limit=20, seed=0, **({"generations": 5} if solver == "memetic" else {}))
        assert res.plan is not None and res.evaluation.feasible, solver
        assert res.plan.tp == 2 and sorted(map(tuple, res.plan.groups)) == [("a0", "a1"), ("b0", "b1")][:len(res.plan.groups)]


def test_plan_file_keeps_groups_and_old_plans_still_load():
    plan = Plan.from_dict({"grid": [[["a0", "a1"], ["b0", "b1"]]], "cuts": [0, 1, 2], "micro_batches": [4]})
    d = json.loads(plan.to_json())
    assert d["schema"] == "geotrain-opt.plan/2" and d["grid"] == [[["a0", "a1"], ["b0", "b1"]]]
    assert Plan.from_dict(d) == plan and plan.devices == ["a0", "a1", "b0", "b1"] and plan.tp == 2
    old = Plan.from_dict({"schema": "geotrain-opt.plan/1", "grid": [["a0", "b0"]], "cuts": [0, 1, 2],
                          "micro_batches": [4]})
    assert old.tp == 1 and json.loads(old.to_json())["schema"] == "geotrain-opt.plan/1"
    # a one-GPU list is that GPU
    assert Plan.from_dict({"grid": [[["a0"]]], "cuts": [0, 2], "micro_batches": [4]}).grid == (("a0",),)


@pytest.mark.parametrize("grid, message", [
    ([[["a0", "b0"]]], "one type on one node"),
    ([[["a0", "a0"]]], "names a GPU twice"),
    ([[["a0", "zz"]]], "unknown device id 'zz'"),
])
def test_bad_groups_are_plan_errors(grid, message):
    inst = instance_from_dict(physical())
    plan = Plan.from_dict({"grid": grid, "cuts": [0, 2] if len(grid[0]) == 1 else [0, 1, 2], "micro_batches": [4]})
    with pytest.raises(PlanError, match=message):
        evaluate(inst, plan)


def test_a_clock_on_a_group_member_is_an_error():
    d = physical()
    d["gpu_types"]["X"]["clocks"] = [{"fraction": 0.5, "busy_w": 150.0}]
    inst = instance_from_dict(d)
    plan = Plan.from_dict({"grid": [[["a0", "a1"]]], "cuts": [0, 2], "micro_batches": [4], "clocks": {"a0": 0.5}})
    with pytest.raises(PlanError, match="runs at its full clock"):
        evaluate(inst, plan)


@pytest.mark.parametrize("value, message", [
    ([1, 4], "degree 4 needs a node with 4 GPUs of one type; the most any node has is 2"),
    ([2, 2], "repeated"),
    ([0], "degrees 1..1024"),
    ("all", "auto"),
])
def test_bad_degrees_name_the_field(value, message):
    with pytest.raises(InstanceError, match="options.tensor_parallel") as e:
        instance_from_dict(physical(value))
    assert message in str(e.value)


def test_auto_degrees_are_the_powers_of_two_a_node_holds():
    d = physical("auto")
    d["options"]["tensor_parallel"] = "auto"
    assert instance_from_dict(d).options.tensor_parallel == (1, 2)


def test_cli_evaluates_a_group_plan(tmp_path):
    inst_p, plan_p = tmp_path / "i.json", tmp_path / "p.json"
    inst_p.write_text(json.dumps(physical()))
    plan_p.write_text(json.dumps({"grid": [[["a0", "a1"]]], "cuts": [0, 2], "micro_batches": [4]}))
    ev = subprocess.run([sys.executable, "-m", "geotrain_opt.cli", "evaluate", str(inst_p), str(plan_p)],
                        capture_output=True, text=True, timeout=120)
    assert ev.returncode == 0, ev.stderr
    assert "0.0904228" in ev.stdout


def test_exports_carry_groups_in_megatron_rank_order():
    """Two replicas of two stages on groups of two: rank = i + 2 (k + 2 j) (Megatron-LM's
    tp-dp-pp order); Megatron gets TP 2 with sequence parallelism, torch a (pp, dp, tp)
    mesh, and the export reads back to the plan."""
    from geotrain_opt.io.export_plan import export, plan_from_export, rank_map, to_megatron, to_torch_pipelining
    d = physical()
    d["devices"] = [{"id": f"{n}{i}", "type": "X", "region": "r", "node": n} for n in "abcd" for i in range(2)]
    d["model"]["global_batch"] = 8
    inst = instance_from_dict(d)
    plan = Plan.from_dict({"grid": [[["a0", "a1"], ["b0", "b1"]], [["c0", "c1"], ["d0", "d1"]]],
                           "cuts": [0, 1, 2], "micro_batches": [4, 4]})
    m = rank_map(inst, plan)
    assert m["world_size"] == 8 and m["tensor_parallel"] == 2
    assert [r["device"] for r in m["ranks"]] == ["a0", "a1", "c0", "c1", "b0", "b1", "d0", "d1"]
    assert m["tensor_groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert m["pipeline_groups"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert m["data_parallel_groups"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    args = to_megatron(inst, plan)["args"]
    assert args[args.index("--tensor-model-parallel-size") + 1] == "2" and "--sequence-parallel" in args
    assert to_torch_pipelining(inst, plan)["device_mesh"]["mesh_shape"] == [2, 2, 2]
    for fmt in ("megatron", "torch-pipelining", "deepspeed"):
        assert plan_from_export(json.loads(export(inst, plan, fmt))) == plan
    assert export(inst, plan, "hostfile") == "a slots=2\nc slots=2\nb slots=2\nd slots=2\n"


def test_dtfm_plans_without_tensor_parallelism():
    """DT-FM's scheduler has no tensor parallelism: it runs at degree 1 whatever the
    instance offers, and its plan equals its plan on the instance without degrees."""
    inst = instance_from_dict(physical())
    plain = instance_from_dict(physical((1,)))
    res = gt.solve(inst, "dtfm", time_limit=20, seed=0)
    assert res.plan.tp == 1 and "tensor_parallel" not in res.stats
    assert res.plan == gt.solve(plain, "dtfm", time_limit=20, seed=0).plan


def test_a_group_beside_a_single_gpu_costs_as_two_devices():
    """Degrees 2 and 1 in one plan (model.md §14): between a group of two and one GPU
    one stream (the single GPU's link, the whole host-stack time); the group keeps its
    speed, memory and power."""
    g2 = {"peak_tflops": sigma_group() / 1e12, "efficiency": 1.0, "memory_gib": 2.0, "busy_w": 600.0, "wait_w": 100.0}
    hand = instance_from_dict({"name": "by-hand", "model": dict(MODEL), "gpu_types": {"X2": g2, "X": dict(GPU)},
                               "devices": [{"id": "A", "type": "X2", "region": "r", "node": "a"},
                                           {"id": "b0", "type": "X", "region": "r", "node": "b"}],
                               "network": {"intra_region": {"latency_ms": 5.0, "bandwidth_gbps": 1.024}},
                               "options": {"host_stack_gbps": 4.0}})
    inst = instance_from_dict(physical())
    for grid, hgrid, mb in (([[["a0", "a1"], "b0"]], [["A", "b0"]], [4]), ([["b0", ["a0", "a1"]]], [["b0", "A"]], [4]),
                            ([[["a0", "a1"]], ["b0"]], [["A"], ["b0"]], [2, 2])):
        cuts = [0, 1, 2] if len(grid[0]) == 2 else [0, 2]
        ev = evaluate(inst, Plan.from_dict({"grid": grid, "cuts": cuts, "micro_batches": mb}))
        ref = evaluate(hand, Plan.from_dict({"grid": hgrid, "cuts": cuts, "micro_batches": mb}))
        for f in ("time_s", "energy_j", "pipeline_s", "allreduce_s", "busy_j", "wait_j"):
            assert getattr(ev, f) == pytest.approx(getattr(ref, f), rel=1e-12), (grid, f)
        assert ev.memory_bytes["b0"] == pytest.approx(ref.memory_bytes["b0"], rel=1e-12)
        assert 2 * ev.memory_bytes["a0"] == pytest.approx(ref.memory_bytes["A"], rel=1e-12)


def two_types() -> dict:
    """Node a: two GPUs of type X; node b: two of type Y, half as fast."""
    d = physical()
    d["gpu_types"]["Y"] = {**GPU, "peak_tflops": 0.0005}
    for dev in d["devices"]:
        dev["type"] = "X" if dev["node"] == "a" else "Y"
    return d


def test_each_type_at_its_own_degree_exact_equals_enumeration():
    """With two GPU types the solvers also search each type at its own degree (X at 2
    and Y at 1, and the reverse): CP-SAT, the MILP and brute force prove the least time
    of every plan of every such case, enumerated here."""
    from geotrain_opt.problem.instance import tensor
    inst = instance_from_dict(two_types())
    cases = tensor.cases(inst)
    assert cases == [1, 2, {"X": 1, "Y": 2}, {"X": 2, "Y": 1}]
    best, best_mixed = float("inf"), float("inf")
    for t in cases:
        slots = [inst.ids[g[0]] if len(g) == 1 else tuple(inst.ids[i] for i in g) for g in tensor.aligned_groups(inst, t)]
        for plan in _every_plan(inst, slots):
            ev = evaluate(inst, plan)
            if ev.feasible:
                best = min(best, ev.time_s)
                if isinstance(t, dict):
                    best_mixed = min(best_mixed, ev.time_s)
    assert best_mixed < min(evaluate(inst, p).time_s for p in _every_plan(inst, [("a0", "a1"), ("b0", "b1")]))
    for solver in ("cpsat", "milp", "bruteforce"):
        res = gt.solve(inst, solver, time_limit=60, seed=0)
        assert res.status == "optimal" and res.evaluation.time_s == pytest.approx(best, rel=1e-9), solver
        assert len(res.stats["tensor_parallel"]) == 4


def test_heuristics_race_the_cases_and_search_the_best_three():
    """Four cases (degrees 1, 2 and each type at its own): a heuristic ranks them by
    their greedy plans and searches the three best; the one left out is reported with
    its greedy value, no better than any searched case's; the race is the same every run."""
    inst = instance_from_dict(two_types())
    res = gt.solve(inst, "random-search", time_limit=10, seed=0)
    rows = res.stats["tensor_parallel"]
    searched = [r for r in rows if r["status"] != "not searched"]
    out = [r for r in rows if r["status"] == "not searched"]
    assert len(rows) == 4 and len(searched) == 3 and len(out) == 1 and res.evaluation.feasible
    from geotrain_opt.solvers.choices import _greedy_key, degree_cases
    keys = {str(c.label["tensor_parallel"]): _greedy_key(c.inst, float("inf"))[0] for c in degree_cases(inst)}
    assert all(keys[str(r["tensor_parallel"])] <= out[0]["greedy_value"] for r in searched)
    again = gt.solve(inst, "random-search", time_limit=10, seed=0).stats["tensor_parallel"]
    assert [r["tensor_parallel"] for r in again] == [r["tensor_parallel"] for r in rows]


def test_heuristics_give_the_time_kept_back_to_the_best_case():
    """Successive halving over the cases (``over_cases(refine=0.5)``): the first pass
    shares half the time, then the case whose plan is best runs again on what is left,
    warm-started from its plan. Each fake run reports 1 s of wall time (it takes
    milliseconds; the bounds below leave 50 s for a loaded machine) and returns the
    greedy plan, or the hint."""
    from geotrain_opt.cost.evaluator import evaluate
    from geotrain_opt.solvers import SolveOptions, get
    from geotrain_opt.solvers.choices import degree_cases, over_cases
    from geotrain_opt.solvers.result import SolverResult, Status
    inst = instance_from_dict(two_types())
    cases = degree_cases(inst)
    calls = []

    def fn(case_inst, opts):
        calls.append((case_inst.name, opts.time_limit_s, opts.hint))
        plan = opts.hint or get("greedy")(case_inst, SolveOptions(time_limit_s=60)).plan
        return SolverResult("fake", Status.HEURISTIC, plan, evaluate(case_inst, plan), "time", wall_s=1.0)
    res = over_cases(fn, inst, SolveOptions(time_limit_s=1000.0), cases, "tensor_parallel", refine=0.5)
    assert len(calls) == len(cases) + 1
    # the first pass shares 500 s in proportion to the units (what a case leaves passes on)
    assert all(hint is None and t <= 500.0 for _, t, hint in calls[:-1])
    assert calls[0][1] == pytest.approx(500.0 * cases[0].inst.n / sum(c.inst.n for c in cases), abs=5.0)
    name, limit, hint = calls[-1]
    ev = [evaluate(c.inst, get("greedy")(c.inst, SolveOptions(time_limit_s=60)).plan) for c in cases]
    # the time objective's key (T, then E), the first case of the least on a tie
    best = min(range(len(cases)), key=lambda i: (ev[i].time_s, ev[i].energy_j, i))
    assert name == cases[best].inst.name and hint is not None and limit >= 450.0
    assert res.stats["refined"] is True and res.evaluation.time_s == pytest.approx(ev[best].time_s, rel=1e-12)
    calls.clear()                 # an exact solver's pass: no time kept back, no second run
    over_cases(fn, inst, SolveOptions(time_limit_s=1000.0), cases, "tensor_parallel")
    assert len(calls) == len(cases) and calls[0][1] > 100.0


def test_when_nothing_fits_solve_and_describe_say_why_and_what_would(tmp_path):
    """1,000,000 usable bytes per GPU: a two-stage pipeline's first stage holds 947,200
    bytes of state and two micro-batches of 45,056 bytes of activations (1F1B: s b h
    (34 + 5 a s / h) = 16 x 64 x 44), so no plan fits though the smallest stage alone
    (992,256) would; solve proves it and
    says so, term by term, with the levers the instance leaves unused."""
    d = physical((1,))
    d["gpu_types"]["X"]["memory_gib"] = 1e6 / 0.9 / 2**30
    p = tmp_path / "i.json"
    p.write_text(json.dumps(d))
    run = lambda *a: subprocess.run([sys.executable, "-m", "geotrain_opt.cli", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    r = run("solve", str(p), "--solver", "cpsat", "--time-limit", "30")
    assert r.returncode == 1 and "status infeasible" in r.stdout, r.stdout + r.stderr
    assert "the longest pipeline (2 stages) puts 1 layer(s) on its first stage" in r.stdout
    assert "activations of 2 micro-batch(es) in flight" in r.stdout
    for lever in ("options.tensor_parallel: auto", "options.zero_stage: 1", "model.recompute: full",
                  "model.attention: flash"):
        assert lever in r.stdout, lever
    from geotrain_opt.io.diagnose import longest_pipeline
    P, k, need, _ = longest_pipeline(instance_from_dict(d))
    assert (P, k) == (2, 1) and need == pytest.approx(947_200 + 2 * 45_056, rel=1e-12)
    assert "the longest pipeline" in run("describe", str(p)).stdout


def test_exports_refuse_mixed_degrees():
    from geotrain_opt.io.export_plan import rank_map
    inst = instance_from_dict(physical())
    plan = Plan.from_dict({"grid": [[["a0", "a1"], "b0"]], "cuts": [0, 1, 2], "micro_batches": [4]})
    assert evaluate(inst, plan).feasible
    with pytest.raises(PlanError, match="one tensor-parallel degree in every slot; this plan has 1/2"):
        rank_map(inst, plan)


def test_megatron_uniform_puts_a_whole_node_in_each_slot():
    """Megatron-LM's classic layout: tensor parallelism over a node (degree 2 here,
    though one GPU per stage is what the others would compare against), pipelines and
    replicas across nodes; a smaller degree only where the node's gives no plan."""
    inst = instance_from_dict(physical((1, 2)))
    res = gt.solve(inst, "megatron-uniform", time_limit=20)
    assert res.plan.tp == 2 and sorted(map(tuple, res.plan.groups)) == [("a0", "a1"), ("b0", "b1")]
    assert [row["tensor_parallel"] for row in res.stats["tensor_parallel"]] == [2]
    one = gt.solve(instance_from_dict(physical((1,))), "megatron-uniform", time_limit=20)
    assert res.evaluation.time_s != one.evaluation.time_s          # a different layout, not the degree-1 one
    # one GPU at most: no group of two fits, the rule steps down to degree 1
    small = gt.solve(instance_from_dict(physical((1, 2), max_devices=1)), "megatron-uniform", time_limit=20)
    assert small.plan.tp == 1 and len(small.plan.devices) == 1
