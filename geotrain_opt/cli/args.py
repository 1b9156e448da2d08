"""Argument types with one-line errors (numbers in range, DxP shapes) and the
solver flags derived from the typed option dataclasses."""
from __future__ import annotations

import argparse
import sys
from geotrain_opt import solvers



# ------------------------------------------------------------- flag checking
class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (no usage dump)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)

    def _get_values(self, action, arg_strings):  # type: ignore[override]
        # no flag or argument of this command means anything when empty: say so, rather
        # than read '' as "not given" (--calibration '') or as the current folder
        for text in arg_strings if action.nargs not in (argparse.PARSER, argparse.REMAINDER) else ():
            if isinstance(text, str) and not text.strip() and action.dest != "help":
                name = "/".join(action.option_strings) or action.dest
                self.error(f"argument {name}: empty value")
        return super()._get_values(action, arg_strings)


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


# --------------------------------------------------------- solver flags, derived
# the dests of the solver flags added to solve and pareto (read back by the handlers)
_SOLVER_FLAGS: list[str] = []


def _solver_flag_table() -> dict[str, tuple]:
    """Option name -> (type hint, default, metadata, solvers taking it), over every
    registered solver's options dataclass (solvers/options.py)."""
    from geotrain_opt.solvers.options import cli_fields
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
    from geotrain_opt.solvers.options import kind_of
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


def _shape(text: str) -> tuple[int, int]:
    try:
        d, p = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected DxP (e.g. 2x4), got {text!r}") from None
    if d < 1 or p < 1:
        raise argparse.ArgumentTypeError(f"D and P must be >= 1, got {text!r}")
    return d, p
