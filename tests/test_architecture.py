"""The solver registry: capabilities drive report grouping, the Pareto dispatch and
the CLI's checks, and a solver defined in one file joins with one decorator line."""
from pathlib import Path

import pytest

from geotrain_opt import solvers
from geotrain_opt.cli import main
from geotrain_opt.construct import smallest_feasible_plan
from geotrain_opt.errors import SolverError
from geotrain_opt.fronts import pareto_front
from geotrain_opt.instance import load_instance
from geotrain_opt.report import summarize
from geotrain_opt.solvers import registry
from geotrain_opt.solvers.base import Deadline, SolveOptions, finish

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny-4gpu-2region.yaml"


def test_builtin_capabilities():
    assert solvers.names("exact") == ["bruteforce", "cpsat", "milp"]
    assert solvers.names("heuristic") == ["memetic"]
    assert set(solvers.names("baseline")) == {"dtfm", "megatron-uniform", "proportional", "greedy",
                                              "random-search", "simulated-annealing", "plain-ga"}
    assert solvers.names(pareto=True) == ["bruteforce", "cpsat", "milp", "memetic"]
    assert solvers.names(certify=True) == ["cpsat", "milp"]
    assert [solvers.spec(n).pareto for n in ("cpsat", "bruteforce", "greedy")] == ["epsilon", "native", None]


def test_a_decorated_solver_is_usable_everywhere(monkeypatch):
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))     # leave the real registry as it was

    @solvers.register("smallest", kind="baseline", options={"note": (str,)})
    def smallest(inst, opts):
        return finish("smallest", inst, opts, smallest_feasible_plan(inst), "feasible", Deadline(opts.time_limit_s))

    assert smallest.__name__ == "smallest"           # the decorator hands the function back
    inst = load_instance(TINY)
    res = solvers.get("smallest")(inst, SolveOptions(time_limit_s=1))
    assert res.plan is not None and res.evaluation.feasible
    solvers.check_options("smallest", {"note": "x"})
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

    from geotrain_opt.solvers.formulation import BuildSpec
    spec = BuildSpec(t_unit=1e-3, e_unit=1.0)
    with pytest.raises(FrozenInstanceError):
        spec.cutoff = 2.0
    with pytest.raises(TypeError, match="t_unti"):
        BuildSpec(t_unti=1e-3, e_unit=1.0)                     # a misspelt field is an error
    wider = spec.scaled(4.0).but(cutoff=3.0)
    assert (wider.t_unit, wider.e_unit, wider.cutoff, spec.cutoff) == (4e-3, 4.0, 3.0, None)


def test_status_is_an_enum_that_still_reads_as_text():
    import json

    from geotrain_opt.result import Status, SolverResult
    inst = load_instance(TINY)
    res = solvers.get("greedy")(inst, SolveOptions(time_limit_s=5))
    assert res.status is Status.HEURISTIC and res.status == "heuristic" and f"{res.status}" == "heuristic"
    assert json.loads(json.dumps(res.to_dict()))["status"] == "heuristic"
    with pytest.raises(ValueError, match="'optimale' is not a valid Status"):
        SolverResult("x", "optimale", None, None, "time")
