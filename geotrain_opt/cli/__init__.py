"""The ``geotrain-opt`` command line: the parser (derived from the solvers' typed
options) and one handler per command. ``main`` imports the rest itself, so that an
interrupt while numpy and the solvers load is one line too (exit 130)."""
from __future__ import annotations

import sys
from typing import Any, Sequence


# when this command started (time.perf_counter()): a --time-limit is the whole command's
STARTED: float | None = None
# set by the first Ctrl-C: an interrupt inside a C extension's import surfaces as an
# ImportError ("initialization failed"), which must read as the interrupt it was
INTERRUPTED = False


def _on_sigint(signum: int, frame: Any) -> None:
    global INTERRUPTED
    INTERRUPTED = True
    if frame is not None and frame.f_code.co_name == "cb" and frame.f_code.co_filename.startswith("<frozen importlib"):
        # inside the import system's module-lock weakref callback an exception cannot
        # propagate (Python prints "Exception ignored in ..." with a traceback and goes
        # on): deliver the interrupt again a moment later, once the callback returned
        import signal
        import threading
        threading.Timer(0.01, signal.raise_signal, (signum,)).start()
        return
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    global STARTED
    import signal
    import time
    STARTED = time.perf_counter()
    try:
        signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:          # not the main thread (an embedding program): leave its handler
        pass
    try:
        from geotrain_opt.cli.entry import main as run
    except (KeyboardInterrupt, ImportError):
        if not INTERRUPTED:
            raise
        print("interrupted", file=sys.stderr)
        return 130
    return run(argv)


def build_parser() -> Any:
    from geotrain_opt.cli.entry import build_parser as build
    return build()


__all__ = ["build_parser", "main"]
