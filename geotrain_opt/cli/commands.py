"""One handler per command: read the arguments, call the package, print or write."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from geotrain_opt import solvers
from geotrain_opt.cost.calibrate import apply_calibration, calibrate, load_calibration, read_runs
from geotrain_opt.io.describe import describe_evaluation, describe_instance, table
from geotrain_opt.errors import GeoTrainError, InstanceError
from geotrain_opt.cost.evaluator import evaluate
from geotrain_opt.problem.instance import Instance, load_instance
from geotrain_opt.cli.files import read_plan
from geotrain_opt.common.outputs import OutputError, check_figure, check_writable
from geotrain_opt.problem.plan import slot_label
from geotrain_opt.cli.args import _SOLVER_FLAGS
from geotrain_opt.solvers.result import Status



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
    for w in cal["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    text = json.dumps(cal, indent=2)
    if args.out:
        from geotrain_opt.common.outputs import write_text
        write_text(args.out, text + "\n")
    print(text)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from geotrain_opt.io.schema import schema_errors
    from geotrain_opt.problem.instance import check_whole_model_fits
    from geotrain_opt.problem.instance.loading import load_instance_data
    inst, data = load_instance_data(args.instance)
    check_whole_model_fits(inst)
    errs = schema_errors(data)
    if errs:     # the reader accepted what the published schema does not: say which
        raise InstanceError(errs[0].split(": ", 1)[0], "breaks geotrain_opt/io/schemas/instance.schema.json: "
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
        from geotrain_opt.io.describe import describe_dict
        print(json.dumps(describe_dict(inst), indent=2, default=float))
    else:
        print(describe_instance(inst))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    inst = _load(args)
    plan = read_plan(args.plan)
    ev = evaluate(inst, plan)
    if args.json:
        print(json.dumps(ev.to_dict(), indent=2))
    else:
        print(describe_evaluation(inst, ev))
    return 0 if ev.feasible else 1


def _options(args: argparse.Namespace, inst: Instance) -> solvers.SolveOptions:
    hint = read_plan(args.hint) if getattr(args, "hint", None) else None
    if hint is not None:
        from geotrain_opt.cost.evaluator import check_plan
        check_plan(inst, hint, "--hint")
    extra = {name: getattr(args, name) for name in _SOLVER_FLAGS if getattr(args, name, None) is not None}
    if extra.get("dask"):
        extra["island_backend"] = "dask"
    # checked for the solver named (e.g. --population given to cpsat is an error)
    return solvers.build_options(args.solver, extra, time_limit_s=args.time_limit, seed=args.seed,
                                 workers=args.workers, hint=hint, progress=not args.quiet, verbose=args.verbose)


def _whole_command(args: argparse.Namespace, opts: solvers.SolveOptions) -> tuple[solvers.SolveOptions, float]:
    """--time-limit is the command's wall time (issue 39, solvers/budget.whole_limit).
    Returns the options and the command's end (``time.perf_counter()``)."""
    import time
    from dataclasses import replace
    from geotrain_opt import cli
    from geotrain_opt.solvers.budget import whole_limit
    limit, until = whole_limit(args.time_limit, cli.STARTED if cli.STARTED is not None else time.perf_counter())
    return replace(opts, time_limit_s=limit), until


def _started() -> float | None:
    from geotrain_opt import cli
    return cli.STARTED


def _print_result(inst: Instance, res) -> None:
    gap = "" if res.gap is None else f", gap {res.gap:.3%}"
    print(f"{res.solver}: status {res.status}{gap}, {res.wall_s:.2f} s wall")
    ex = res.stats.get("exportable")
    if ex:
        what = (f"no plan it runs: {ex['reason']}" if res.plan is None else
                "the plan found was already one it runs" if not ex["changed"] else
                f"projected onto what it runs: objective {ex['cost']:+.2%} against the plan found "
                f"({ex['unrestricted_value']:.6g}), no longer proven")
        print(f"--exportable {ex['framework']}: {what}")
    sim = res.stats.get("simulation") or {}
    if sim.get("warning"):
        print(f"warning: {sim['warning']}", file=sys.stderr)
    if res.best_bound is not None and res.objective_value is not None and res.status != Status.OPTIMAL:
        print(f"lower bound {res.best_bound:.6g}: the plan is at most {res.gap:.2%} from optimal")
    if res.plan is None:
        print("no plan found")
        if res.status == Status.INFEASIBLE:
            from geotrain_opt.io.diagnose import why_nothing_fits
            print("\n".join(why_nothing_fits(inst)))
        return
    p = res.plan
    m = inst.model
    extra = "" if p.micro_batch is None and p.recompute is None and not inst.has_choices else \
        f", micro-batch size {p.micro_batch or m.micro_batch}, recompute {p.recompute or m.recompute}"
    sizes = sorted({1 if isinstance(g, str) else len(g) for row in p.grid for g in row})
    tp = f", tensor-parallel degree{'s' if len(sizes) > 1 else ''} {'/'.join(map(str, sizes))}" if p.tp > 1 else ""
    print(f"plan: D={p.replicas} x P={p.stages}{tp}, cuts {list(p.cuts)}, micro-batches {list(p.micro_batches)}{extra}")
    for k, row in enumerate(p.grid):
        print(f"  replica {k}: {' -> '.join(slot_label(g) + (f' @{p.clock(g):g}' if p.clock(g) != 1.0 else '') for g in row)}")
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
    opts, until = _whole_command(args, _options(args, inst))
    # the API's pipeline: the solver, the plan a framework runs (--exportable), then the bound
    res = solvers.run(args.solver, inst, opts, until, exportable=getattr(args, "exportable", None),
                      started=_started())
    res.stats["command_time_limit_s"] = args.time_limit
    _save_or_print(res, args.out)   # saved before certifying: a long second proof never loses it
    if args.certify:
        from geotrain_opt.analysis.certify import certify
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
    if res.plan is None and res.status != Status.INFEASIBLE:
        return 1
    if args.certify and not res.stats["certified"]:
        return 3
    return 0 if res.plan is not None else 1


def cmd_pareto(args: argparse.Namespace) -> int:
    from geotrain_opt.analysis.fronts import front_points, pareto_front
    check_writable(args.out, "--out")
    inst = _instance(args)
    ref_front = None
    if args.reference:     # another run's front (e.g. the exact one): IGD+ and ε against it
        from geotrain_opt.solvers.result import SolverResult
        try:
            ref_front = front_points(SolverResult.load(args.reference, inst))
        except (OSError, ValueError, KeyError, TypeError, GeoTrainError) as e:
            raise GeoTrainError(f"--reference: cannot read a pareto result from {args.reference}: {e}") from None
        if not ref_front:
            raise GeoTrainError(f"--reference: {args.reference} holds no front")
    objectives = tuple(o.strip() for o in args.objectives.split(",") if o.strip())
    res = pareto_front(inst, args.solver, _options(args, inst), points=args.points, objectives=objectives)
    if ref_front and res.pareto:
        from geotrain_opt.analysis.indicators import summary
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
    from geotrain_opt.io.generate import generate, to_yaml
    check_writable(args.out, "--out")
    data = generate(args.family, args.gpus, args.seed)
    text = json.dumps(data, indent=1) + "\n" if args.json else to_yaml(data)
    if args.out:
        from geotrain_opt.common.outputs import write_text
        write_text(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from geotrain_opt.analysis.verifier import summary, verify_paths, write_reports
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
    if not names:
        print("error: verify: --solvers: list at least one solver", file=sys.stderr)
        return 2
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
    from geotrain_opt.analysis.bench import run_suite
    results = args.results or str(args.suite).rsplit(".", 1)[0] + ".results.jsonl"
    check_writable(results, "--results", regular=True)   # appended to and read back: no stream
    ran = run_suite(args.suite, results, workers=args.workers, dask=args.dask, progress=not args.quiet)
    if args.json:
        from geotrain_opt.analysis.report import load_rows
        print(json.dumps({"results": results, "ran": ran, "rows": load_rows(results)}, indent=2))
    else:
        print(f"results in {results}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from geotrain_opt.analysis.report import load_rows, markdown, summarize, to_csv
    from geotrain_opt.common.outputs import write_text
    check_writable(args.md, "--md")
    check_writable(args.csv, "--csv")
    for flag in ("profile_plot", "ecdf_plot", "anytime_plot"):
        check_figure(getattr(args, flag), "--" + flag.replace("_", "-"))
    rows = load_rows(args.results)
    recs = summarize(rows)
    md = markdown(recs)
    if args.profile or args.profile_plot:
        from geotrain_opt.analysis import performance
        prof = performance.profile(rows)
        md += "\n" + performance.markdown(prof, n=len(next(iter(performance.ratios(rows).values()), [])))
        if args.profile_plot:
            for w in performance.plot(rows, args.profile_plot):
                print(f"wrote {w}", file=sys.stderr)
    if args.anytime or args.ecdf_plot or args.anytime_plot:
        md += "\n" + _anytime(rows, args)
    if args.md:
        write_text(args.md, md, "--md")
    if args.csv:
        write_text(args.csv, to_csv(recs), "--csv")
    print(json.dumps(recs, indent=2, default=str) if args.json else md)
    return 0


def _anytime(rows: list[dict], args: argparse.Namespace) -> str:
    """The anytime table (and figures) of ``report`` (analysis/anytime.py)."""
    from geotrain_opt.analysis import anytime
    known = {}
    if args.lib:
        from geotrain_opt.analysis.library import best_known
        by_hash = best_known(Path(args.lib))
        known = {r["instance_name"]: by_hash[r["instance_hash"]][1] for r in rows
                 if r.get("instance_hash") in by_hash and by_hash[r["instance_hash"]][0] == r.get("objective")}
    ref = anytime.references(rows, known)
    _, missing = anytime.runs_by(rows)
    if missing == len(rows):
        raise GeoTrainError(f"report: {args.results}: no row has a trajectory (rows written before "
                            f"bench recorded them): run the suite again into a new results file")
    names = [x for x in (args.anytime_instances or "").split(",") if x]
    anytime.check_names(rows, ref, names)      # before any figure is written
    figures = []
    if args.ecdf_plot:
        figures += anytime.plot_ecdf(rows, ref, args.ecdf_plot)
    if args.anytime_plot:
        figures += anytime.plot_anytime(rows, ref, args.anytime_plot, names=names or None)
    for w in figures:
        print(f"wrote {w}", file=sys.stderr)
    return anytime.markdown(anytime.table(rows, ref), missing)


def _results(args: argparse.Namespace) -> list[dict]:
    from geotrain_opt.analysis.report import load_rows
    if not args.results:
        raise GeoTrainError("plot --kind scaling: needs --results (a bench JSONL)")
    return load_rows(args.results)


def _plot_instance(inst: Instance, args: argparse.Namespace) -> list[str]:
    """The figures of one instance; what they show (fronts, a plan) is computed
    here, so that plots.py only draws."""
    from geotrain_opt.io import plots
    if args.kind == "pareto" and args.results:
        fronts, labels, marks = _saved_fronts(inst, args.results)
        return plots.pareto(inst, fronts, args.out, labels=labels, marks=marks)
    if args.kind == "pareto":
        from geotrain_opt.analysis.fronts import front_points, pareto_front
        fronts, proven = {}, set()
        for s in args.solvers.split(","):
            res = pareto_front(inst, s, solvers.SolveOptions(time_limit_s=args.time_limit), points=50)
            fronts[s] = front_points(res)
            if res.pareto and all(r.status == Status.OPTIMAL for r in res.pareto):
                proven.add(s)
        return plots.pareto(inst, fronts, args.out, proven)
    p = read_plan(args.plan) if args.plan else None
    if p is not None:
        p.grid_indices(inst.index)       # a plan of another instance: a clear PlanError
    if args.kind == "gantt":
        if p is None:
            p = solvers.get("memetic")(inst, solvers.SolveOptions(time_limit_s=args.time_limit)).plan
        return plots.gantt(inst, p, args.out)
    return plots.region_map(inst, p, args.out, _coords(args.coords) if args.coords else None)


def _saved_fronts(inst: Instance, paths: str) -> tuple[dict, dict, dict]:
    """``--results a.json,b.json``: fronts saved by ``pareto --out``, their plans
    evaluated again on the instance, labelled D x P, proven point by point."""
    from geotrain_opt.common.inputs import read_text_file
    from geotrain_opt.solvers.result import SolverResult
    fronts, labels, marks = {}, {}, {}
    for path in paths.split(","):
        try:
            res = SolverResult.from_dict(json.loads(read_text_file(path, 256 << 20)), inst)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise GeoTrainError(f"--results: {path}: not a pareto result ({type(e).__name__}: {str(e)[:120]})") from None
        if not res.pareto:
            raise GeoTrainError(f"--results: {path}: no front in it (write one with `pareto --out`)")
        name = res.solver if res.solver not in fronts else f"{res.solver} ({Path(path).stem})"
        pts = [p for p in res.pareto if p.plan is not None and p.evaluation is not None]
        fronts[name] = [(p.evaluation.time_s, p.evaluation.energy_j) for p in pts]
        labels[name] = [f"{p.plan.replicas}x{p.plan.stages}" for p in pts]
        marks[name] = [p.status == Status.OPTIMAL for p in pts]
    return fronts, labels, marks


def _coords(path: str) -> dict[str, tuple[float, float]]:
    """``--coords``: region -> [latitude, longitude]."""
    from geotrain_opt.common.inputs import read_text_file
    from geotrain_opt.problem.instance.loading import parse_text
    try:
        data = parse_text(read_text_file(path, 1 << 24), path)
    except ValueError as e:
        raise InstanceError("--coords", str(e)) from None
    if not isinstance(data, dict):
        raise InstanceError("--coords", "expected a mapping region: [latitude, longitude]")
    out = {}
    for r, v in data.items():
        ok = (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in v) and abs(v[0]) <= 90 and abs(v[1]) <= 180)
        if not ok:
            raise InstanceError(f"--coords.{str(r)[:40]}", f"expected [latitude, longitude] in degrees, got {v!r:.60}")
        out[str(r)] = (float(v[0]), float(v[1]))
    return out


def cmd_plot(args: argparse.Namespace) -> int:
    from geotrain_opt.io import plots
    check_figure(args.out, "--out")
    inst = load_instance(args.instance)
    written = plots.scaling(_results(args), args.out) if args.kind == "scaling" else _plot_instance(inst, args)
    if args.json:
        print(json.dumps({"written": written}))
    else:
        for w in written:
            print(f"wrote {w}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from geotrain_opt.cost.simulate import simulate
    inst = load_instance(args.instance)
    plan = read_plan(args.plan)
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


def cmd_export_plan(args: argparse.Namespace) -> int:
    from geotrain_opt.io.export_plan import export
    from geotrain_opt.common.outputs import write_or_print
    check_writable(args.out, "--out")
    from geotrain_opt.io.launch import load_hosts
    inst = load_instance(args.instance)
    hosts = load_hosts(args.hosts) if args.hosts else None
    if args.to.startswith("launch-") and hosts is None:
        raise InstanceError("--hosts", f"{args.to} needs the nodes' addresses (a YAML mapping node: address)")
    launch = {"entry": args.entry, "port": args.port} if args.to.startswith("launch-") else {}
    write_or_print(export(inst, read_plan(args.result), args.to, hosts, **launch), args.out, args.to)
    return 0


def cmd_export_model(args: argparse.Namespace) -> int:
    from geotrain_opt.io.export_model import export_model
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
