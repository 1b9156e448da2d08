"""Where a figure goes: ``--out fig`` writes fig.png and fig.svg, whole or not at all."""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

from geotrain_opt.common.outputs import figure_stem

if "ipykernel" not in sys.modules:   # files only, no screen; in a notebook keep its inline backend
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


out_stem = figure_stem      # one rule for the checks and the writes (common/outputs.py)


def _save(fig, out: str | Path) -> list[str]:
    """Render each format in memory, then write it whole (common/outputs.write_bytes:
    atomic, and never replacing anything but a regular file)."""
    import io

    from geotrain_opt.common.outputs import write_bytes
    paths = []
    try:
        for ext in ("png", "svg"):
            p = f"{out_stem(out)}.{ext}"
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=120, bbox_inches="tight")
            write_bytes(p, buf.getvalue())
            paths.append(p)
    finally:
        plt.close(fig)
    return paths
