"""The command line's parser: one sub-parser per command."""
from __future__ import annotations

from typing import Any

import argparse
from geotrain_opt import solvers
from geotrain_opt.io.generate import FAMILIES
from geotrain_opt.problem.instance import OBJECTIVES
from geotrain_opt.cli.args import SECONDS, SEED, WORKERS, _Parser, _number, _shape, _solver_flags
from geotrain_opt.cli.commands import (cmd_bench, cmd_calibrate, cmd_describe, cmd_evaluate, cmd_export_model,
                                       cmd_export_plan, cmd_generate, cmd_pareto, cmd_plot, cmd_report,
                                       cmd_simulate, cmd_solve, cmd_validate, cmd_verify)



def build_parser() -> argparse.ArgumentParser:
    from geotrain_opt import __version__
    ap = _Parser(prog="geotrain-opt", description="The ``geotrain-opt`` command line.")
    ap.add_argument("--version", action="version", version=f"geotrain-opt {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    from geotrain_opt.cli import lib_commands, model_commands
    for add in (_inspection, _analysis, _files, _searches, model_commands.add_parsers, lib_commands.add_parsers):
        add(sub)
    return ap


def _inspection(sub: Any) -> None:
    """validate, describe, calibrate, evaluate, simulate: one instance or plan."""
    p = sub.add_parser("validate", help="check an instance file")
    p.add_argument("instance")
    p.add_argument("--json", action="store_true", help="print the check as JSON")
    p.set_defaults(fn=cmd_validate)
    p = sub.add_parser("describe", help="summarise an instance: devices, links, whether the model fits")
    p.add_argument("instance")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(fn=cmd_describe)
    p = sub.add_parser("calibrate", help="fit GPU efficiency curves, exposed_comm and host_stack_gbps to measured runs")
    p.add_argument("runs", help="CSV with columns instance,plan,measured_s (paths relative to the CSV)")
    p.add_argument("--fit", default="efficiency,half_tokens,exposed_comm,host_stack_gbps",
                   help="parameters to fit (default: all four; those the runs cannot identify are held, with a warning)")
    p.add_argument("--out", help="write the calibration JSON here")
    p.set_defaults(fn=cmd_calibrate)
    p = sub.add_parser("evaluate", help="cost of a plan (exit 1 if infeasible)")
    p.add_argument("instance")
    p.add_argument("plan")
    p.add_argument("--calibration", help="calibration JSON from `calibrate` to apply first")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    p.set_defaults(fn=cmd_evaluate)
    p = sub.add_parser("simulate", help="discrete-event simulation of a plan vs the analytic model")
    p.add_argument("instance")
    p.add_argument("plan")
    p.add_argument("--shared-links", action="store_true", help="transfers between two regions share one link")
    p.add_argument("--rendezvous", action="store_true", help="a send waits for the receiver's posted receive")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_simulate)


def _analysis(sub: Any) -> None:
    """verify, bench, report, plot: many runs and their results."""
    p = sub.add_parser("verify", help="cross-check solvers: re-evaluate plans, compare with proven optima")
    p.add_argument("instance", nargs="?")
    p.add_argument("--suite", help="verify every instance file in this folder")
    p.add_argument("--solvers", default="memetic,cpsat,milp,bruteforce")
    p.add_argument("--time-limit", type=SECONDS, default=60.0, help="seconds per solver run (default 60)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--report", help="write a Markdown report here")
    p.add_argument("--json-out", metavar="PATH", help="write the JSON report here")
    p.add_argument("--json", action="store_true", help="print the JSON report on standard output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(fn=cmd_verify)
    p = sub.add_parser("bench", help="run a benchmark suite (resumable JSONL results)")
    p.add_argument("suite")
    p.add_argument("--results", help="JSONL file to append to (default: SUITE.results.jsonl)")
    p.add_argument("--workers", type=WORKERS, default=2, help="parallel runs (default 2)")
    p.add_argument("--dask", help="run on a Dask cluster: a scheduler address, or 'local'")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print every row of the results file as JSON")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("report", help="tables from benchmark results")
    p.add_argument("results")
    p.add_argument("--md", help="write the Markdown table here")
    p.add_argument("--csv", help="write the CSV table here")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON")
    p.add_argument("--profile", action="store_true",
                   help="add the performance profile over the instances (Dolan-Moré: share within τ of the best)")
    p.add_argument("--profile-plot", metavar="PATH", help="draw the performance profile (PNG and SVG)")
    p.add_argument("--anytime", action="store_true",
                   help="add anytime measures from the runs' incumbent trajectories: targets hit, time to 1 %%, "
                        "primal integral")
    p.add_argument("--ecdf-plot", metavar="PATH", help="draw the runtime-to-target ECDF of each solver")
    p.add_argument("--anytime-plot", metavar="PATH", help="draw each instance's best value over time, per run")
    p.add_argument("--anytime-instances", metavar="A,B,...",
                   help="the instances of --anytime-plot (default: the first 12 by name)")
    p.add_argument("--lib", metavar="DIR", help="references: the best known values of this benchmark library "
                                                 "(instances matched by content) where they beat every row")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("plot", help="figures: pareto, scaling, gantt, map (PNG and SVG)")
    p.add_argument("instance")
    p.add_argument("--kind", required=True, choices=("pareto", "scaling", "gantt", "map"))
    p.add_argument("--out", required=True, help="output path without extension")
    p.add_argument("--results", help="scaling: bench results JSONL; pareto: fronts saved by `pareto --out` "
                                     "(comma-separated; drawn without solving again)")
    p.add_argument("--plan", help="plan or result JSON (gantt, map)")
    p.add_argument("--solvers", default="cpsat,memetic", help="solvers whose fronts to draw (pareto)")
    p.add_argument("--coords", help="map: YAML mapping region -> [latitude, longitude] for names it cannot place")
    p.add_argument("--time-limit", type=SECONDS, default=30.0)
    p.add_argument("--json", action="store_true", help="print the files written as JSON")
    p.set_defaults(fn=cmd_plot)


def _files(sub: Any) -> None:
    """export-plan, export-model, generate: files for other tools."""
    from geotrain_opt.io.export_plan import FORMATS as PLAN_FORMATS
    p = sub.add_parser("export-plan", help="a plan for a training framework: torch-pipelining, megatron, deepspeed, "
                                           "hostfile, or a per-node launch script (launch-megatron, launch-torch)")
    p.add_argument("instance")
    p.add_argument("result", help="plan or result JSON")
    p.add_argument("--to", required=True, choices=PLAN_FORMATS)
    p.add_argument("--hosts", help="YAML/JSON mapping node -> address (MASTER_ADDR, hostfile; required by launch-*)")
    p.add_argument("--entry", help="launch-*: the training script (default pretrain_gpt.py / train.py)")
    p.add_argument("--port", type=_number(1, 65535, integer=True), default=29500, help="launch-*: MASTER_PORT")
    p.add_argument("--out", help="file to write (default: standard output)")
    p.set_defaults(fn=cmd_export_plan)
    p = sub.add_parser("export-model", help="write one shape's exact model as MPS, LP or a CP-SAT proto")
    p.add_argument("instance")
    p.add_argument("--shape", type=_shape, required=True, metavar="DxP", help="replicas x stages, e.g. 2x4")
    p.add_argument("--format", required=True, choices=("mps", "lp", "cpsat"),
                   help="mps/lp: the MILP (PuLP); cpsat: the CP-SAT model (.pb binary, .pbtxt text)")
    p.add_argument("--out", required=True, help="file to write")
    p.add_argument("--objective", choices=OBJECTIVES, help="override the instance's objective")
    p.add_argument("--json", action="store_true", help="print the model's size as JSON")
    p.set_defaults(fn=cmd_export_model)
    p = sub.add_parser("generate", help="write a generated instance (same family, GPUs, seed: same bytes)")
    p.add_argument("--family", required=True, help=", ".join(FAMILIES))
    p.add_argument("--gpus", type=_number(1, 16384, integer=True), required=True)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", help="file to write (default: standard output)")
    p.add_argument("--json", action="store_true", help="write the instance as JSON instead of YAML")
    p.set_defaults(fn=cmd_generate)


def _searches(sub: Any) -> None:
    """solve and pareto: the solvers, with every flag their options declare."""
    for name, fn, default in (("solve", cmd_solve, "cpsat"), ("pareto", cmd_pareto, "cpsat")):
        p = sub.add_parser(name, help="find the best plan" if name == "solve" else "time-energy Pareto front")
        p.add_argument("instance")
        p.add_argument("--solver", default=default, help=f"one of {', '.join(solvers.names())} (default {default})")
        p.add_argument("--objective", choices=OBJECTIVES, help="override the instance's objective")
        p.add_argument("--lambda", dest="lam", type=_number(0, 1), help="weight of T in the weighted objective, in [0, 1]")
        p.add_argument("--max-time-s", type=_number(0, 1e12, open_lo=True), help="ε-constraint on T")
        p.add_argument("--max-energy-j", type=_number(0, 1e18, open_lo=True), help="ε-constraint on E")
        p.add_argument("--max-cost-usd", type=_number(0, 1e15, open_lo=True),
                       help="ε-constraint on the cost per iteration (instances with prices)")
        p.add_argument("--max-carbon-g", type=_number(0, 1e18, open_lo=True),
                       help="ε-constraint on the grams of CO2 per iteration (instances with intensities)")
        p.add_argument("--max-devices", type=_number(1, 16384, integer=True), help="bound on the number of devices used")
        p.add_argument("--time-limit", type=SECONDS, default=60.0, help="seconds (default 60)")
        p.add_argument("--seed", type=SEED, default=0)
        p.add_argument("--workers", type=WORKERS, default=2, help="solver threads (default 2)")
        p.add_argument("--hint", help="plan or result JSON to warm-start from")
        p.add_argument("--calibration", help="calibration JSON from `calibrate` to apply first")
        p.add_argument("--out", help="write the result JSON here")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
        p.add_argument("-v", "--verbose", action="store_true", help="the solver engines' own logs (CP-SAT, HiGHS, CBC)")
        _solver_flags(p)
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "solve":
            p.add_argument("--exportable", choices=("megatron", "deepspeed", "torch"),
                           help="return a plan that framework runs (projected: equal micro-batches per replica; "
                                "Megatron-LM's even inner stages); the cost of that is reported")
            p.add_argument("--certify", action="store_true",
                           help="cpsat/milp: re-prove an optimal or infeasible claim with the other engine "
                                "(exit 3 if it does not agree)")
        else:
            p.add_argument("--points", type=_number(2, 10_000, integer=True), default=12, help="ε-sweep points (default 12)")
            p.add_argument("--objectives", default="time,energy", metavar="A,B",
                           help="the front's two metrics among time, energy, cost, carbon (default time,energy)")
            p.add_argument("--reference", metavar="RESULT",
                           help="a pareto result JSON (e.g. the exact front): report IGD+ and ε against it")
        p.set_defaults(fn=fn)
