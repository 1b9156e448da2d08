"""The ``geotrain-opt`` command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from . import solvers
from .calibrate import apply_calibration, calibrate, load_calibration, read_runs
from .describe import describe_evaluation, describe_instance, table
from .errors import GeoTrainError, InstanceError
from .generate import FAMILIES
from .evaluator import evaluate
from .instance import OBJECTIVES, Instance, load_instance
from .outputs import OutputError, check_writable
from .plan import Plan


# ------------------------------------------------------------- flag checking
class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (no usage dump)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _number(lo: float | None = None, hi: float | None = None, *, open_lo: bool = False, integer: bool = False):
    """An argparse type: a finite number in [lo, hi] ((lo, hi] with ``open_lo``)."""
    def parse(text: str):
        try:
            v = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if integer else 'a number'}, got {text!r}") from None
        if not integer and v != v or v in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if lo is not None and (v <= lo if open_lo else v < lo):
            raise argparse.ArgumentTypeError(f"must be {'>' if open_lo else '>='} {lo:g}, got {text}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi:g}, got {text}")
        return v
    parse.__name__ = "integer" if integer else "number"
    return parse


SECONDS = _number(0, 1e7, open_lo=True)
SEED = _number(0, 2**32 - 1, integer=True)
WORKERS = _number(1, 1024, integer=True)


def _load(args: argparse.Namespace) -> Instance:
    inst = load_instance(args.instance)
    if getattr(args, "calibration", None):
        inst = apply_calibration(inst, load_calibration(args.calibration))
    return inst


def _instance(args: argparse.Namespace) -> Instance:
    inst = _load(args)
    changes = {}
    if getattr(args, "objective", None):
        changes["kind"] = args.objective
    for name in ("lam", "max_time_s", "max_energy_j", "max_cost_usd", "max_carbon_g", "max_devices"):
        v = getattr(args, name, None)
        if v is not None:
            changes[name] = v
    return inst.with_options(**changes) if changes else inst


def cmd_calibrate(args: argparse.Namespace) -> int:
    check_writable(args.out, "--out")
    runs = read_runs(args.runs)
    fit = tuple(f.strip() for f in args.fit.split(",") if f.strip())
    cal = calibrate(runs, fit)
    text = json.dumps(cal, indent=2)
    if args.out:
        from .outputs import write_text
        write_text(args.out, text + "\n")
    print(text)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .instance import check_whole_model_fits
    inst = load_instance(args.instance)
    check_whole_model_fits(inst)
    from .instance import parse_text, read_text_file
    from .schema import schema_errors
    errs = schema_errors(parse_text(read_text_file(Path(args.instance)), args.instance))
    if errs:     # the reader accepted what the published schema does not: say which
        raise InstanceError(errs[0].split(": ", 1)[0], "breaks geotrain_opt/schemas/instance.schema.json: "
                            + errs[0].split(": ", 1)[-1], source=args.instance)
    if args.json:
        print(json.dumps({"ok": True, "instance": inst.name, "devices": inst.n, "regions": len(inst.regions),
                          "layers": inst.model.layers, "micro_batches": inst.model.num_micro_batches}, indent=2))
        return 0
    print(f"ok: {inst.name}: {inst.n} devices, {len(inst.regions)} regions, "
          f"{inst.model.layers} layers, {inst.model.num_micro_batches} micro-batches")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    inst = load_instance(args.instance)
    if args.json:
        from .describe import describe_dict
        print(json.dumps(describe_dict(inst), indent=2, default=float))
    else:
        print(describe_instance(inst))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    inst = _load(args)
    plan = Plan.load(args.plan)
    ev = evaluate(inst, plan)
    if args.json:
        print(json.dumps(ev.to_dict(), indent=2))
    else:
        print(describe_evaluation(inst, ev))
    return 0 if ev.feasible else 1


# --------------------------------------------------------- solver flags, derived
def _solver_flag_table() -> dict[str, tuple]:
    """Option name -> (type hint, default, metadata, solvers taking it), over every
    registered solver's options dataclass (solvers/options.py)."""
    from .solvers.options import cli_fields
    table: dict[str, tuple] = {}
    for name in solvers.names():
        cls = solvers.spec(name).options
        if cls is None:
            continue
        for key, (hint, default, meta) in cli_fields([cls]).items():
            if key in table:
                table[key][3].append(name)
                if table[key][1] != default:            # defaults differ: the help text says them
                    table[key] = (hint, None, meta, table[key][3])
            else:
                table[key] = (hint, default, meta, [name])
    return table


_SOLVER_FLAGS: list[str] = []


def _list_of(item: type):
    def parse(text: str):
        parts = [t.strip() for t in text.replace("x", ",").split(",")] if item is int else \
            [t.strip() for t in text.split(",")]
        parts = [t for t in parts if t]
        try:
            return [item(t) for t in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {item.__name__}s separated by commas, got {text!r}") from None
    parse.__name__ = f"list of {item.__name__}"
    return parse


def _solver_flags(p: argparse.ArgumentParser) -> None:
    """One flag per solver option (``--population``, ``--exact-model``, ...), typed and
    ranged as its field; a flag the chosen solver does not take is refused by the
    same check as a misspelt option in a suite file."""
    from .solvers.options import kind_of
    group = p.add_argument_group("solver options (each names the solvers that take it)")
    for key, (hint, default, meta, takers) in _solver_flag_table().items():
        if key not in _SOLVER_FLAGS:
            _SOLVER_FLAGS.append(key)
        types_, _nullable, item = kind_of(hint)
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else \
            {True: "on", False: "off"}.get(default, default) if isinstance(default, bool) else default
        dflt = "" if default is None or default == () or "default" in meta["help"] else f" (default {shown})"
        kw: dict = {"help": f"{', '.join(takers)}: {meta['help']}{dflt}", "default": None, "dest": key}
        if meta.get("metavar"):
            kw["metavar"] = meta["metavar"]
        if item is not None:
            kw["type"] = _list_of(item)
        elif bool in types_:
            kw["action"] = argparse.BooleanOptionalAction
        elif int in types_ and float not in types_:
            kw["type"] = _number(meta.get("lo"), meta.get("hi"), integer=True)
        elif float in types_:
            kw["type"] = _number(meta.get("lo"), meta.get("hi"))
        if isinstance(meta.get("choices"), tuple):
            kw["choices"] = meta["choices"]
        group.add_argument("--" + key.replace("_", "-"), **kw)


def _options(args: argparse.Namespace, inst: Instance) -> solvers.SolveOptions:
    hint = Plan.load(args.hint) if getattr(args, "hint", None) else None
    if hint is not None:
        from .evaluator import check_plan
        check_plan(inst, hint, "--hint")
    extra = {name: getattr(args, name) for name in _SOLVER_FLAGS if getattr(args, name, None) is not None}
    if extra.get("dask"):
        extra["island_backend"] = "dask"
    if getattr(args, "solver", None):
        solvers.check_options(args.solver, extra)    # e.g. --population given to cpsat
    return solvers.SolveOptions(time_limit_s=args.time_limit, seed=args.seed, workers=args.workers,
                                hint=hint, progress=not args.quiet, verbose=args.verbose, extra=extra)


def _print_result(inst: Instance, res) -> None:
    gap = "" if res.gap is None else f", gap {res.gap:.3%}"
    print(f"{res.solver}: status {res.status}{gap}, {res.wall_s:.2f} s wall")
    if res.best_bound is not None and res.objective_value is not None and res.status != "optimal":
        print(f"lower bound {res.best_bound:.6g}: the plan is at most {res.gap:.2%} from optimal")
    if res.plan is None:
        print("no plan found")
        return
    p = res.plan
    m = inst.model
    extra = "" if p.micro_batch is None and p.recompute is None and not inst.has_choices else \
        f", micro-batch size {p.micro_batch or m.micro_batch}, recompute {p.recompute or m.recompute}"
    print(f"plan: D={p.replicas} x P={p.stages}, cuts {list(p.cuts)}, micro-batches {list(p.micro_batches)}{extra}")
    for k, row in enumerate(p.grid):
        print(f"  replica {k}: {' -> '.join(g + (f' @{p.clock(g):g}' if p.clock(g) != 1.0 else '') for g in row)}")
    print(describe_evaluation(inst, res.evaluation))


def _save_or_print(res, path: str | None) -> None:
    """Save the result; if that still fails, print it whole before the error line."""
    if not path:
        return
    try:
        res.save(path)
    except OutputError:
        print(json.dumps(res.to_dict(), indent=2))
        raise


def cmd_solve(args: argparse.Namespace) -> int:
    check_writable(args.out, "--out")
    inst = _instance(args)
    if args.certify and not solvers.spec(args.solver).certify:
        print(f"error: --certify: needs --solver {' or '.join(solvers.names(certify=True))}, not {args.solver}",
              file=sys.stderr)
        return 2
    opts = _options(args, inst)
    res = solvers.get(args.solver)(inst, opts)
    from .bounds import attach_bound
    attach_bound(inst, res)         # a certified lower bound and the gap to it, for any solver
    _save_or_print(res, args.out)   # saved before certifying: a long second proof never loses it
    if args.certify:
        from .certify import certify
        certify(inst, res, opts)
        _save_or_print(res, args.out)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        _print_result(inst, res)
        if args.certify:
            c = res.stats["certificate"]
            print(f"certified: {'true' if res.stats['certified'] else 'false'} ({c['reason']})")
        if args.out:
            print(f"wrote {args.out}")
    if res.plan is None and res.status != "infeasible":
        return 1
    if args.certify and not res.stats["certified"]:
        return 3
    return 0 if res.plan is not None else 1


def cmd_pareto(args: argparse.Namespace) -> int:
    from .fronts import front_points, pareto_front
    check_writable(args.out, "--out")
    inst = _instance(args)
    ref_front = None
    if args.reference:     # another run's front (e.g. the exact one): IGD+ and ε against it
        from .result import SolverResult
        try:
            ref_front = front_points(SolverResult.load(args.reference, inst))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise GeoTrainError(f"--reference: cannot read a pareto result from {args.reference}: {e}") from None
        if not ref_front:
            raise GeoTrainError(f"--reference: {args.reference} holds no front")
    objectives = tuple(o.strip() for o in args.objectives.split(",") if o.strip())
    res = pareto_front(inst, args.solver, _options(args, inst), points=args.points, objectives=objectives)
    if ref_front and res.pareto:
        from .indicators import summary
        res.stats.update(summary(front_points(res), ref_front))
    _save_or_print(res, args.out)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
        return 0 if res.pareto else 1
    head = {"time": "T (s)", "energy": "E (J)", "cost": "C (USD)", "carbon": "Q (g CO2)"}
    a, b = objectives
    pts = front_points(res)
    rows = [[str(i), f"{x:.6g}", f"{y:.6g}", r.status, f"{r.plan.replicas}x{r.plan.stages}", str(len(r.plan.devices))]
            for i, ((x, y), r) in enumerate(zip(pts, res.pareto))]
    print(f"{args.solver}: {len(rows)} non-dominated plans ({res.status}), {res.wall_s:.2f} s")
    print(table(rows, ["#", head[a], head[b], "status", "DxP", "devices"]))
    st = res.stats
    if "hypervolume" in st:
        line = (f"hypervolume {st['hypervolume']:.6g} (reference point {head[a]} {st['hypervolume_ref_t']:.6g}, "
                f"{head[b]} {st['hypervolume_ref_e']:.6g})")
        if "igd_plus" in st:
            line += (f"; against --reference: its hypervolume {st['reference_hypervolume']:.6g}, "
                     f"IGD+ {st['igd_plus']:.6g}, ε {st['epsilon']:.6g}")
        print(line)
    return 0 if rows else 1


def cmd_generate(args: argparse.Namespace) -> int:
    from .generate import generate, to_yaml
    check_writable(args.out, "--out")
    data = generate(args.family, args.gpus, args.seed)
    text = json.dumps(data, indent=1) + "\n" if args.json else to_yaml(data)
    if args.out:
        from .outputs import write_text
        write_text(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .verifier import summary, verify_paths, write_reports
    if bool(args.instance) == bool(args.suite):
        print("error: verify: give one INSTANCE or --suite DIR", file=sys.stderr)
        return 2
    check_writable(args.report, "--report")
    check_writable(args.json_out, "--json-out")
    if args.suite:
        if not Path(args.suite).is_dir():
            print(f"error: verify: --suite {args.suite}: no such folder", file=sys.stderr)
            return 2
        paths = sorted(p for p in Path(args.suite).iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        if not paths:
            print(f"error: verify: no instance files in {args.suite}", file=sys.stderr)
            return 2
    else:
        paths = [Path(args.instance)]
    names = [n.strip() for n in args.solvers.split(",") if n.strip()]
    for n in names:
        solvers.get(n)          # unknown names fail here, before any work
    vers = verify_paths(paths, names, args.time_limit, args.seed, progress=not args.quiet)
    write_reports(vers, args.report, args.json_out)
    bad = [f"{v.instance}: {m}" for v in vers for m in v.inconsistencies]
    if args.json:
        print(json.dumps([v.to_dict() for v in vers], indent=2))
        return 1 if bad else 0
    print(summary(vers))
    for line in bad:
        print(f"INCONSISTENT {line}")
    print(f"{len(vers)} instances verified, {len(bad)} inconsistencies")
    return 1 if bad else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_suite
    results = args.results or str(args.suite).rsplit(".", 1)[0] + ".results.jsonl"
    check_writable(results, "--results")
    ran = run_suite(args.suite, results, workers=args.workers, dask=args.dask, progress=not args.quiet)
    if args.json:
        from .report import load_rows
        print(json.dumps({"results": results, "ran": ran, "rows": load_rows(results)}, indent=2))
    else:
        print(f"results in {results}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import load_rows, markdown, summarize, to_csv
    from .outputs import write_text
    check_writable(args.md, "--md")
    check_writable(args.csv, "--csv")
    recs = summarize(load_rows(args.results))
    md = markdown(recs)
    if args.md:
        write_text(args.md, md, "--md")
    if args.csv:
        write_text(args.csv, to_csv(recs), "--csv")
    print(json.dumps(recs, indent=2, default=str) if args.json else md)
    return 0


def _results(args: argparse.Namespace) -> list[dict]:
    from .report import load_rows
    if not args.results:
        raise GeoTrainError("plot --kind scaling: needs --results (a bench JSONL)")
    return load_rows(args.results)


def _plot_instance(inst: Instance, args: argparse.Namespace) -> list[str]:
    """The figures of one instance; what they show (fronts, a plan) is computed
    here, so that plots.py only draws."""
    from . import plots
    if args.kind == "pareto":
        from .fronts import front_points, pareto_front
        fronts, proven = {}, set()
        for s in args.solvers.split(","):
            res = pareto_front(inst, s, solvers.SolveOptions(time_limit_s=args.time_limit), points=50)
            fronts[s] = front_points(res)
            if res.pareto and all(r.status == "optimal" for r in res.pareto):
                proven.add(s)
        return plots.pareto(inst, fronts, args.out, proven)
    p = Plan.load(args.plan) if args.plan else None
    if p is not None:
        p.grid_indices(inst.index)       # a plan of another instance: a clear PlanError
    if args.kind == "gantt":
        if p is None:
            p = solvers.get("memetic")(inst, solvers.SolveOptions(time_limit_s=args.time_limit)).plan
        return plots.gantt(inst, p, args.out)
    return plots.region_map(inst, p, args.out)


def cmd_plot(args: argparse.Namespace) -> int:
    from . import plots
    for ext in (".png", ".svg"):
        check_writable(plots.out_stem(args.out) + ext, "--out")
    inst = load_instance(args.instance)
    written = plots.scaling(_results(args), args.out) if args.kind == "scaling" else _plot_instance(inst, args)
    if args.json:
        print(json.dumps({"written": written}))
    else:
        for w in written:
            print(f"wrote {w}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from .simulate import simulate
    inst = load_instance(args.instance)
    plan = Plan.load(args.plan)
    ev = evaluate(inst, plan)
    sim = simulate(inst, plan, shared_links=args.shared_links, rendezvous=args.rendezvous)
    rows = [["iteration time T (s)", f"{ev.time_s:.6g}", f"{sim.time_s:.6g}", f"{(sim.time_s / ev.time_s - 1):+.2%}"],
            ["pipeline (s)", f"{ev.pipeline_s:.6g}", f"{sim.pipeline_s:.6g}", f"{(sim.pipeline_s / ev.pipeline_s - 1):+.2%}"],
            ["all-reduce (s)", f"{ev.allreduce_s:.6g}", f"{sim.allreduce_s:.6g}", ""],
            ["energy E (J)", f"{ev.energy_j:.6g}", f"{sim.energy_j:.6g}", f"{(sim.energy_j / ev.energy_j - 1):+.2%}"]]
    if args.json:
        print(json.dumps({"analytic": ev.to_dict(), "simulated": {
            "time_s": sim.time_s, "pipeline_s": sim.pipeline_s, "allreduce_s": sim.allreduce_s,
            "energy_j": sim.energy_j, "busy_s": sim.busy_s, "wait_s": sim.wait_s}}, indent=2))
    else:
        print(table(rows, ["quantity", "analytic", "simulated", "simulated vs analytic"]))
        if not ev.feasible:
            print("infeasible plan (the analytic model says: " + "; ".join(ev.violations) + ")")
    return 0 if ev.feasible else 1


def _shape(text: str) -> tuple[int, int]:
    try:
        d, p = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected DxP (e.g. 2x4), got {text!r}") from None
    if d < 1 or p < 1:
        raise argparse.ArgumentTypeError(f"D and P must be >= 1, got {text!r}")
    return d, p


def cmd_export_plan(args: argparse.Namespace) -> int:
    from .export_plan import export
    from .outputs import write_text
    check_writable(args.out, "--out")
    inst = load_instance(args.instance)
    text = export(inst, Plan.load(args.result), args.to)
    if args.out:
        write_text(args.out, text)
        print(f"wrote {args.out} ({args.to})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_export_model(args: argparse.Namespace) -> int:
    from .export_model import export_model
    check_writable(args.out, "--out")
    inst = _instance(args)
    info = export_model(inst, args.shape[0], args.shape[1], args.format, args.out)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"wrote {args.out}: {info['format']} model of shape {args.shape[0]}x{args.shape[1]}, "
              f"{info['variables']} variables, {info['constraints']} constraints "
              f"(time unit {info['t_unit_s']:.6g} s, energy unit {info['e_unit_j']:.6g} J)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    ap = _Parser(prog="geotrain-opt", description=__doc__)
    ap.add_argument("--version", action="version", version=f"geotrain-opt {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check an instance file")
    p.add_argument("instance")
    p.add_argument("--json", action="store_true", help="print the check as JSON")
    p.set_defaults(fn=cmd_validate)
    p = sub.add_parser("describe", help="summarise an instance: devices, links, whether the model fits")
    p.add_argument("instance")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(fn=cmd_describe)
    p = sub.add_parser("calibrate", help="fit GPU efficiencies and exposed_comm to measured runs")
    p.add_argument("runs", help="CSV with columns instance,plan,measured_s (paths relative to the CSV)")
    p.add_argument("--fit", default="efficiency,exposed_comm", help="parameters to fit (default: both)")
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
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("plot", help="figures: pareto, scaling, gantt, map (PNG and SVG)")
    p.add_argument("instance")
    p.add_argument("--kind", required=True, choices=("pareto", "scaling", "gantt", "map"))
    p.add_argument("--out", required=True, help="output path without extension")
    p.add_argument("--results", help="bench results JSONL (scaling)")
    p.add_argument("--plan", help="plan or result JSON (gantt, map)")
    p.add_argument("--solvers", default="cpsat,memetic", help="solvers whose fronts to draw (pareto)")
    p.add_argument("--time-limit", type=SECONDS, default=30.0)
    p.add_argument("--json", action="store_true", help="print the files written as JSON")
    p.set_defaults(fn=cmd_plot)
    from .export_plan import FORMATS as PLAN_FORMATS
    p = sub.add_parser("export-plan", help="a plan for a training framework: torch-pipelining, megatron, deepspeed, hostfile")
    p.add_argument("instance")
    p.add_argument("result", help="plan or result JSON")
    p.add_argument("--to", required=True, choices=PLAN_FORMATS)
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
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except GeoTrainError as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `geotrain-opt ... | head`: the reader left; stop quietly (Python docs' recipe)
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (RecursionError, MemoryError) as e:
        print(f"error: input too large or nested too deeply ({type(e).__name__})", file=sys.stderr)
        return 2
    except Exception as e:      # a bug of ours: one line, and the traceback on request
        import os
        if os.environ.get("GEOTRAIN_DEBUG"):
            raise
        print(f"error: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(set GEOTRAIN_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
