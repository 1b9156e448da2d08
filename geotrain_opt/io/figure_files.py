"""Where a figure goes: ``--out fig`` writes fig.png and fig.svg, whole or not at all."""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:   # files only, no screen; in a notebook keep its inline backend
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def out_stem(out: str | Path) -> str:
    """``--out fig`` and ``--out fig.png`` both mean fig.png + fig.svg."""
    s = str(out)
    return s[: -4] if s.lower().endswith((".png", ".svg")) else s


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
