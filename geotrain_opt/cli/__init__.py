"""The ``geotrain-opt`` command line: the parser (derived from the solvers' typed
options) and one handler per command."""
from geotrain_opt.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
