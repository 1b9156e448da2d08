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
    from geotrain_opt.common.outputs import OutputError
    paths = []
    try:
        for ext in ("png", "svg"):
            p = f"{out_stem(out)}.{ext}"
            fig.savefig(p, dpi=120, bbox_inches="tight")
            paths.append(p)
    except OSError as e:
        raise OutputError(f"--out: cannot write {p}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return paths
