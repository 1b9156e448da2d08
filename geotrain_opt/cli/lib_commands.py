"""``geotrain-opt lib``: the benchmark library's table, its records checked from
scratch, a plan compared with a record, a better plan or bound recorded."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from geotrain_opt.errors import GeoTrainError


def _root(args: argparse.Namespace) -> Path:
    from geotrain_opt.analysis.library import LIB
    if args.lib:
        return Path(args.lib)
    here = Path("instances") / "lib"
    return here if (here / "index.yaml").exists() else LIB


def cmd_lib(args: argparse.Namespace) -> int:
    from geotrain_opt.analysis import library as lib
    root = _root(args)
    idx = lib.load_index(root)
    if args.lib_command == "list":
        rows = lib.table(idx, args.status, args.min_gpus)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            sys.stdout.write(lib.markdown(rows, str(idx.get("version"))))
        return 0
    if args.lib_command == "check":
        if args.plan:
            if len(args.names) != 1:
                raise GeoTrainError("lib check --plan: name exactly one library instance")
            verdict, value, best = lib.compare(args.names[0], args.plan, root)
            print(f"{args.names[0]}: the plan's value {value:.12g} {verdict} the record "
                  f"({'none' if best is None else f'{best:.12g}'})")
            return 0
        names = set(args.names)
        checks = [lib.check_record(r, root) for r in idx["records"] if not names or r["name"] in names]
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.message}")
        bad = sum(not c.ok for c in checks)
        print(f"{len(checks) - bad} of {len(checks)} records verified", file=sys.stderr)
        return 1 if bad else 0
    if args.lib_command == "rebase":
        for name in args.names:
            print(f"{name}: {lib.rebase(name, root)}")
        return 0
    by = {"solver": args.solver, "version": args.version, "command": args.command}
    changed = lib.update(args.names[0], args.plan, args.bound, by, root)
    print(f"{args.names[0]}: " + ("; ".join(changed) if changed else "no better plan or bound: record kept"))
    return 0


def add_parsers(sub: Any) -> None:
    """``lib list | check | update | rebase``."""
    from geotrain_opt.cli.args import _number
    p = sub.add_parser("lib", help="the benchmark library: records of best plans and bounds (instances/lib)")
    p.add_argument("--lib", help="the library folder (default: instances/lib)")
    lsub = p.add_subparsers(dest="lib_command", required=True)
    q = lsub.add_parser("list", help="the table: status, best known value, bound, gap, who found it")
    q.add_argument("--status", choices=("optimal", "open"))
    q.add_argument("--min-gpus", type=_number(0, 1 << 20, integer=True), default=0)
    q.add_argument("--json", action="store_true")
    q = lsub.add_parser("check", help="re-evaluate every record (or those named); with --plan, compare a plan")
    q.add_argument("names", nargs="*")
    q.add_argument("--plan", help="a plan or result of the one instance named: does it match or beat the record?")
    q = lsub.add_parser("update", help="record a better plan or a higher bound (verified; never a worse one)")
    q.add_argument("names", nargs=1)
    q.add_argument("--plan", help="plan or result JSON")
    q.add_argument("--bound", type=_number(0, 1e18), help="a lower bound on the objective")
    q.add_argument("--solver", required=True, help="who found it")
    q.add_argument("--version", default="", help="the solver's version")
    q.add_argument("--command", default="", help="the command that reproduces it")
    q = lsub.add_parser("rebase", help="after a change of the cost model: value the named records' plans "
                        "again and drop their bounds (re-prove them, then `update --bound`)")
    q.add_argument("names", nargs="+")
    p.set_defaults(fn=cmd_lib)
