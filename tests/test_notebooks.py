"""The teaching notebooks run from top to bottom (each well under two minutes)."""
from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_all_five_are_there():
    assert [p.stem for p in NOTEBOOKS] == ["01_problem", "02_exact_formulations", "03_memetic", "04_pareto",
                                          "05_energy_levers"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    assert time.perf_counter() - t < 120
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    # teaching material: the figures render inline, and the mathematics is there
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure"
    assert any("$" in c.source for c in nb.cells if c.cell_type == "markdown"), "no formula"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "matplotlib.use(" not in code and "import geotrain_opt as gt" in code
