"""Where a benchmark's markdown report goes: the file named by --out (folders
made as needed), and the terminal."""
from __future__ import annotations

from pathlib import Path


def write_report(out: str | Path, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(text)
