"""The solver registry: capabilities drive report grouping, the Pareto dispatch and
the CLI's checks, and a solver defined in one file joins with one decorator line."""
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import yaml

from geotrain_opt import solvers
from geotrain_opt.cli import build_parser, main
from geotrain_opt.construct.pieces import smallest_feasible_plan
from geotrain_opt.errors import SolverError
from geotrain_opt.analysis.fronts import pareto_front
from geotrain_opt.problem.instance import instance_from_dict, load_instance
from geotrain_opt.analysis.report import summarize
from geotrain_opt.solvers import registry
from geotrain_opt.solvers.base import Deadline, SolveOptions, finish
from geotrain_opt.solvers.options import DtfmOptions, MemeticOptions, Options, SearchOptions, option

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny-4gpu-2region.yaml"


def test_builtin_capabilities():
    assert solvers.names("exact") == ["bruteforce", "cpsat", "milp"]
    assert solvers.names("heuristic") == ["memetic"]
    assert set(solvers.names("baseline")) == {"dtfm", "megatron-uniform", "sailor-like", "proportional", "greedy",
                                              "random-search", "simulated-annealing", "plain-ga"}
    assert solvers.names(pareto=True) == ["bruteforce", "cpsat", "milp", "memetic"]
    assert solvers.names(certify=True) == ["cpsat", "milp"]
    assert [solvers.spec(n).pareto for n in ("cpsat", "bruteforce", "greedy")] == ["epsilon", "native", None]


def test_a_decorated_solver_is_usable_everywhere(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))     # leave the real registry as it was

    @dataclass(frozen=True)
    class SmallestOptions(Options):
        note: str = option("", "a note")

    @solvers.register("smallest", kind="baseline", options=SmallestOptions)
    def smallest(inst, opts):
        return finish("smallest", inst, opts, smallest_feasible_plan(inst), "feasible", Deadline(opts.time_limit_s))

    assert smallest.__name__ == "smallest"           # the decorator hands the function back
    inst = load_instance(TINY)
    res = solvers.get("smallest")(inst, SolveOptions(time_limit_s=1))
    assert res.plan is not None and res.evaluation.feasible
    assert solvers.check_options("smallest", {"note": "x"}) == SmallestOptions(note="x")
    with pytest.raises(SystemExit):        # its option is a flag of solve, derived from the dataclass
        build_parser().parse_args(["solve", "-h"])
    assert "--note NOTE" in capsys.readouterr().out
    with pytest.raises(SolverError, match="smallest: unknown option 'nite'"):
        solvers.check_options("smallest", {"nite": "x"})
    # a baseline: the report measures our best solver against it
    rows = [{"instance_name": "i", "solver": n, "status": "feasible", "n_gpus": 4, "objective": "time",
             "time_s": t, "energy_j": 10.0, "objective_value": t, "wall_s": 1.0, "devices_used": 4}
            for n, t in (("memetic", 1.0), ("smallest", 4.0))]
    rec = {r["solver"]: r for r in summarize(rows)}
    assert rec["smallest"]["T_reduction"] == pytest.approx(0.75) and "T_reduction" not in rec["memetic"]
    # no Pareto mode declared: a clear error that names the solvers that have one
    with pytest.raises(SolverError, match="has no Pareto mode .*use bruteforce, cpsat, milp, memetic"):
        pareto_front(inst, "smallest", SolveOptions(time_limit_s=1))


def test_register_rejects_unknown_capabilities():
    with pytest.raises(SolverError, match="kind must be one of exact, heuristic, baseline"):
        solvers.register("x", "m", kind="oracle")
    with pytest.raises(SolverError, match="pareto must be one of epsilon, native"):
        solvers.register("x", "m", pareto="yes")
    assert "x" not in solvers.names()


def test_certify_needs_a_solver_that_declares_it(capsys):
    assert main(["solve", str(TINY), "--solver", "greedy", "--certify"]) == 2
    assert "--certify: needs --solver cpsat or milp, not greedy" in capsys.readouterr().err


def test_build_spec_is_frozen_and_typed():
    from dataclasses import FrozenInstanceError

    from geotrain_opt.solvers.exact.formulation import BuildSpec
    spec = BuildSpec(t_unit=1e-3, e_unit=1.0)
    with pytest.raises(FrozenInstanceError):
        spec.cutoff = 2.0
    with pytest.raises(TypeError, match="t_unti"):
        BuildSpec(t_unti=1e-3, e_unit=1.0)                     # a misspelt field is an error
    wider = spec.scaled(4.0).but(cutoff=3.0)
    assert (wider.t_unit, wider.e_unit, wider.cutoff, spec.cutoff) == (4e-3, 4.0, 3.0, None)


def test_status_is_an_enum_that_still_reads_as_text():
    import json

    from geotrain_opt.solvers.result import Status, SolverResult
    inst = load_instance(TINY)
    res = solvers.get("greedy")(inst, SolveOptions(time_limit_s=5))
    assert res.status is Status.HEURISTIC and res.status == "heuristic" and f"{res.status}" == "heuristic"
    assert json.loads(json.dumps(res.to_dict()))["status"] == "heuristic"
    with pytest.raises(ValueError, match="'optimale' is not a valid Status"):
        SolverResult("x", "optimale", None, None, "time")


def test_options_are_typed_dataclasses_with_ranges_and_choices():
    o = solvers.check_options("memetic", {"population": 12, "mutations": ["swap", "cut"], "cxpb": 1})
    assert isinstance(o, MemeticOptions) and (o.population, o.mutations, o.cxpb) == (12, ("swap", "cut"), 1)
    assert o.to_dict() == {"population": 12, "mutations": ["swap", "cut"], "cxpb": 1}     # only what was set
    assert solvers.check_options("dtfm", {"shape": [2, 4]}).shape == (2, 4)
    for name, extra, msg in [
            ("memetic", {"cxpb": 1.5}, r"memetic: option 'cxpb' must be in \[0, 1\], got 1.5"),
            ("memetic", {"population": 1}, r"option 'population' must be in \[2, 100000\], got 1"),
            ("memetic", {"ls_moves": ["cuts", "teleport"]}, r"'ls_moves': unknown value 'teleport' \(one of "),
            ("memetic", {"generations": 2.0}, r"option 'generations' must be int or null, got 2.0"),
            ("memetic", {"seed_solvers": ["memetic"]}, r"cannot seed itself"),
            ("dtfm", {"shape": [2, 4, 1]}, r"dtfm: option 'shape' must be \[D, P\]"),
            ("dtfm", {"dtfm_gradient_gb": -1}, r"option 'dtfm_gradient_gb' must be >= 0, got -1"),
            ("simulated-annealing", {"batch": True}, r"option 'batch' must be int, got True"),
            ("cpsat", {"milp_solver": "highs"}, r"cpsat: unknown option 'milp_solver' \(its options: choice_search, class_grid, cpsat_search, exact_model\)"),
            ("greedy", {"population": 4}, r"greedy: unknown option 'population' \(its options: none\)")]:
        with pytest.raises(SolverError, match=msg):
            solvers.check_options(name, extra)
    # a solver called directly checks its own options (no CLI or gt.solve in between)
    with pytest.raises(SolverError, match="random-search: unknown option 'max_evals'"):
        solvers.get("random-search")(load_instance(TINY), SolveOptions(time_limit_s=1, extra={"max_evals": 5}))
    with pytest.raises(SolverError, match="options must be an Options dataclass"):
        solvers.register("x", "m", options={"a": (int,)})
    with pytest.raises(TypeError, match="mutable option defaults"):
        option([], "a list default would be shared")


def test_every_option_field_is_a_cli_flag_with_its_type(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "-h"])
    text = capsys.readouterr().out
    for cls in (MemeticOptions, DtfmOptions, SearchOptions):
        for f in fields(cls):
            if f.metadata["cli"]:
                assert "--" + f.name.replace("_", "-") in text, f.name
    assert "--pareto" not in text         # set by the pareto command, not a flag
    args = build_parser().parse_args(["solve", str(TINY), "--solver", "dtfm", "--shape", "2x2", "--offspring", "7",
                                      "--no-seeding", "--ls-moves", "cuts,split", "--cxpb", "0.5"])
    assert (args.shape, args.offspring, args.seeding, args.ls_moves, args.cxpb) == ([2, 2], 7, False,
                                                                                   ["cuts", "split"], 0.5)
    with pytest.raises(SystemExit) as e:
        main(["solve", str(TINY), "--solver", "memetic", "--cxpb", "3", "-q"])
    assert e.value.code == 2 and "argument --cxpb: must be <= 1, got 3" in capsys.readouterr().err


def test_memetic_run_steps_and_returns_its_best_so_far():
    from geotrain_opt.solvers.search.memetic import MemeticRun, solve
    inst = load_instance(TINY)
    opts = SolveOptions(time_limit_s=60, seed=2, extra={"generations": 6})
    run = MemeticRun(inst, opts)
    run.setup()
    seen = []
    while run.step():
        seen.append((run.generation, run.best().key))
        if run.generation == 3:
            mid = run.result()
    run.close()
    assert [g for g, _ in seen] == list(range(1, 7))
    assert all(b[1] <= a[1] for a, b in zip(seen, seen[1:]))             # the incumbent never worsens
    assert mid.plan is not None and mid.stats["generations"] == 3
    whole = solve(inst, opts)                                          # solve is these calls
    assert whole.plan == run.result().plan and whole.stats["evaluations"] == run.result().stats["evaluations"]
    assert [row[0] for row in whole.stats["history"]] == list(range(1, 7))   # DEAP's Logbook, one row a generation


def test_memetic_front_is_deaps_pareto_front():
    from deap import tools

    from geotrain_opt.cost.evaluator import evaluate
    from geotrain_opt.solvers.search.memetic import MemeticRun
    inst = load_instance(TINY)
    run = MemeticRun(inst, SolveOptions(time_limit_s=60, seed=1, extra={"generations": 8, "pareto": True}))
    run.setup()
    while run.step():
        pass
    res = run.result()
    run.close()
    assert isinstance(run.front, tools.ParetoFront) and len(run.front) >= len(res.pareto) >= 2
    pts = [(p.evaluation.time_s, p.evaluation.energy_j) for p in res.pareto]
    assert pts == sorted(pts) and all(b[1] < a[1] for a, b in zip(pts, pts[1:]))     # non-dominated, by T
    for p in res.pareto:
        ev = evaluate(inst, p.plan)
        assert (ev.time_s, ev.energy_j) == (p.evaluation.time_s, p.evaluation.energy_j)


def test_api_takes_typed_options():
    import geotrain_opt as gt
    typed = gt.solve(TINY, "memetic", time_limit=30, seed=1, options=MemeticOptions(generations=4, population=10))
    kw = gt.solve(TINY, "memetic", time_limit=30, seed=1, generations=4, population=10)
    assert typed.plan == kw.plan and typed.settings["extra"] == {"generations": 4, "population": 10}
    with pytest.raises(SolverError, match="cpsat: unknown option 'generations'"):
        gt.solve(TINY, "cpsat", options=MemeticOptions(generations=4))


def test_memetic_history_names_the_pair_it_records():
    from geotrain_opt.solvers.search.memetic import MemeticRun
    d = yaml.safe_load(TINY.read_text())
    d["gpu_types"]["fast"]["price_per_hour"] = 3.6
    d["energy"]["carbon_g_per_kwh"] = {"east": 400, "west": 120}
    inst = instance_from_dict(d).with_options(kind="cost")
    run = MemeticRun(inst, SolveOptions(time_limit_s=30, seed=0,
                                        extra={"generations": 3, "pareto": True, "front": ["cost", "carbon"]}))
    run.setup()
    while run.step():
        pass
    res = run.result()
    run.close()
    assert run.log.header == ("gen", "t", "C", "Q", "evals")
    best = min(res.pareto, key=lambda r: r.evaluation.cost_usd)
    assert min(row[2] for row in res.stats["history"]) == pytest.approx(best.evaluation.cost_usd, rel=1e-12)
