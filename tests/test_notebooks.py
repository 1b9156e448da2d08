"""The teaching notebooks run from top to bottom, with figures that show something."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_all_five_are_there():
    assert [p.stem for p in NOTEBOOKS] == ["01_problem", "02_exact_formulations", "03_memetic", "04_pareto",
                                          "05_energy_levers"]


def _inked(png_b64: str) -> float:
    """The share of the plot area's pixels that are drawn on: the area inside the axes'
    frame (the black lines crossing at least 30 % of the image), so that tick labels,
    titles and legends outside it do not count; without a frame, the whole image."""
    import base64
    import io
    import matplotlib.image as mpimg
    import numpy as np
    rgb = mpimg.imread(io.BytesIO(base64.b64decode(png_b64)), format="png")[..., :3]
    dark = (rgb < 0.35).all(axis=-1)
    rows, cols = np.where(dark.mean(axis=1) > 0.3)[0], np.where(dark.mean(axis=0) > 0.3)[0]
    if len(rows) >= 2 and len(cols) >= 2:
        rgb = rgb[rows.min() + 3:rows.max() - 2, cols.min() + 3:cols.max() - 2]
    return float((rgb < 0.9).any(axis=-1).mean())


def test_an_empty_axes_is_told_from_a_chart():
    import base64
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def png(draw):
        fig, ax = plt.subplots(figsize=(6, 2.5))
        draw(ax)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return base64.b64encode(buf.getvalue()).decode()
    # bars of height 0 (issue 40: notebook 02's per-shape seconds, all 0.0), a lone reference line
    assert _inked(png(lambda ax: ax.bar([f"{d}x{p}" for d in range(4) for p in range(4)], [0.0] * 16))) < 0.01
    assert _inked(png(lambda ax: ax.axhline(1.5, ls="--", color="k"))) < 0.01
    assert _inked(png(lambda ax: ax.bar(["a", "b", "c"], [1.0, 2.0, 1.5]))) > 0.01
    assert _inked(png(lambda ax: ax.plot([1, 2, 3], [3, 1, 2]))) > 0.01


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    # the timeout only catches a hang (a cell waiting forever), never slowness: no test
    # depends on the machine's speed (every solve in them has a generation or node budget)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    # teaching material: the figures render inline, and the mathematics is there
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert pngs, "no figure"
    for png in pngs:
        assert _inked(png) > 0.01, "a figure with (almost) nothing drawn in it"
    assert any("$" in c.source for c in nb.cells if c.cell_type == "markdown"), "no formula"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "matplotlib.use(" not in code and "import geotrain_opt as gt" in code
