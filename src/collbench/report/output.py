"""The report folder: which folders may be (re)used, and where each file goes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from matplotlib.figure import Figure

from collbench.errors import UserError
from collbench.report import figures, html
from collbench.storefiles import atomic_write

OUR_SUFFIXES: Final = (".png", ".svg", ".csv", ".md")


@dataclass
class Output:
    """Where files go, and what has been written (for the summary line and tests)."""

    root: Path
    fmt: str
    jobs: list[figures.Job] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    slugs: set[str] = field(default_factory=set)

    def figure(self, draw: Callable[[], Figure], stem: str, caption: str) -> html.FigureRef:
        """Queue a figure (drawn later, in parallel); its reference for the page."""
        job = figures.Job(draw, self.root / "figures" / stem, self.fmt)
        self.jobs.append(job)
        # The page embeds the first file: PNG when written, smaller than SVG.
        return html.FigureRef(figures.paths(job.stem, job.fmt)[0], caption)

    def table(self, stem: str, markdown: str, csv: str) -> list[str]:
        """Write one table as .md and .csv; their paths relative to the report folder."""
        names = []
        for ext, text in ((".md", markdown), (".csv", csv)):
            path = self.root / "tables" / f"{stem}{ext}"
            atomic_write(path, (text.rstrip("\n") + "\n").encode(), mode=0o644)
            self.tables.append(path)
            names.append(f"tables/{stem}{ext}")
        return names

    def slug(self, text: str) -> str:
        """A file-name-safe, unique stem (data may contain anything)."""
        base = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", text).strip("-.")[:80] or "x"
        slug, n = base, 2
        while slug in self.slugs:
            slug, n = f"{base}-{n}", n + 1
        self.slugs.add(slug)
        return slug


def prepare(out: Path) -> None:
    """Reuse a previous report's folder (dropping its figures and tables), refuse others."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder; choose another -o")
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").exists():
        raise UserError(f"{out}: folder is not empty and holds no earlier report; choose "
                        "another -o folder")
    # Only our own file types: anything else a user put there survives a rebuild.
    for sub in ("figures", "tables"):
        folder = out / sub
        if folder.is_dir():
            for f in folder.iterdir():
                if f.is_file() and f.suffix in OUR_SUFFIXES:
                    f.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out}: cannot create the report folder: {e.strerror}") from None
