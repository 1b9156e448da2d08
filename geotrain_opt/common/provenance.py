"""Where a number came from: versions, commit, host and time, stamped on every
result file and benchmark row so that a figure can be traced to the run behind it."""
from __future__ import annotations

import datetime as _dt
import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PLAN_SCHEMA = "geotrain-opt.plan/1"
# a plan with tensor-parallel groups (model.md §14): a version-1 reader would misread its lists
PLAN_SCHEMA_TP = "geotrain-opt.plan/2"
RESULT_SCHEMA = "geotrain-opt.result/1"
_PACKAGES = ("geotrain-opt", "numpy", "ortools", "pulp", "highspy", "deap", "scipy")


@functools.lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    import os
    # the machine a timing was made on: budgets compare only on like machines (issue 41's protocol)
    return {"versions": versions, "python": platform.python_version(), "host": platform.node(),
            "platform": platform.platform(terse=True), "cpus": os.cpu_count(), "commit": _commit()}


def _commit() -> str | None:
    """The git commit of the source tree this package runs from (an editable
    install in a checkout), with ``+dirty`` for uncommitted changes; else None."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def provenance() -> dict[str, Any]:
    """Versions, commit, host, and the UTC time of this call."""
    return {**_static(), "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
