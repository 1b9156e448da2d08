"""The ``geotrain-opt`` command line: parse, run the command, and turn every error into
one line and an exit code (2 bad input, 70 a bug of ours, 130 interrupted)."""
from __future__ import annotations

import sys
from typing import Sequence
from geotrain_opt.errors import GeoTrainError, short
from geotrain_opt.cli.parser import build_parser



def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:       # while the solvers' modules load
        print("interrupted", file=sys.stderr)
        return 130
    except ImportError:
        from geotrain_opt import cli
        if not cli.INTERRUPTED:
            raise
        print("interrupted", file=sys.stderr)
        return 130
    # the whole command's limit bounds the wait for an input pipe too (set for every
    # command: an embedding program may call main more than once)
    from geotrain_opt import cli
    from geotrain_opt.common import inputs
    limit = getattr(args, "time_limit", None)
    whole = isinstance(limit, (int, float)) and getattr(args, "command", "") in ("solve", "pareto")
    inputs.READ_DEADLINE = (cli.STARTED or 0.0) + float(limit) if whole else None
    try:
        return args.fn(args)
    except GeoTrainError as e:
        print(f"error: {short(str(e).splitlines()[0]) if str(e) else type(e).__name__}", file=sys.stderr)
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
        from geotrain_opt import cli
        if cli.INTERRUPTED:     # e.g. an ImportError of a C extension cut short by Ctrl-C
            print("interrupted", file=sys.stderr)
            return 130
        import os
        if os.environ.get("GEOTRAIN_DEBUG"):
            raise
        print(f"error: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(set GEOTRAIN_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 70
