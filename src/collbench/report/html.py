"""One self-contained HTML page: inline CSS, figures as data URIs, no script, no network.

The page model below holds plain strings (sections.py, tables.py and summary.py fill it
from the statistics); every one of them is escaped here, since campaign, algorithm and
parameter names come from the data and may contain anything.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Final

from collbench.report.figures import description

MIME: Final = {".png": "image/png", ".svg": "image/svg+xml"}
WARNINGS_SHOWN: Final = 5  # stability warnings in view; the rest behind a <details>


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""  # class names (constants of this module's CSS, never data)


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell | str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class FigureRef:
    path: Path  # the file embedded (PNG if written, else SVG)
    caption: str


@dataclass(frozen=True)
class Block:
    """One context: a collective at one process count, placement and parameter set."""

    title: str
    recommendation: Table | None
    ratios: Table | None
    figures: tuple[FigureRef, ...]
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # table files, relative to the page
    tables: tuple[Table, ...] = ()  # other tables (the applications section's)


@dataclass(frozen=True)
class Collective:
    name: str
    blocks: tuple[Block, ...]
    figures: tuple[FigureRef, ...] = ()  # across blocks (process-count scaling)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WarningItem:
    where: str
    problem: str
    advice: str


@dataclass(frozen=True)
class ModelSection:
    """Measured against predicted (or another source): tables, overlays, residuals."""

    title: str
    tables: tuple[Table, ...]
    figures: tuple[FigureRef, ...]
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    title: str
    summary: tuple[tuple[str, str], ...]
    collectives: tuple[Collective, ...]
    notices: tuple[str, ...] = ()  # shown prominently under the summary
    method: tuple[tuple[str, str], ...] = ()
    warnings: tuple[WarningItem, ...] = ()
    provenance: tuple[tuple[str, str], ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    provenance_warnings: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default_factory=tuple)  # summary tables
    models: ModelSection | None = None


CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",Arial,sans-serif;
 margin:0 auto;max-width:1160px;padding:0 20px 40px;color:#1d1f21;line-height:1.45}
h1{font-size:1.6em;margin:.8em 0 .3em}h2{border-bottom:2px solid #ccd;padding-bottom:.15em;
 margin-top:1.8em}h3{margin:1.4em 0 .4em;font-size:1.1em;color:#223}
table{border-collapse:collapse;font-size:.82em;margin:.4em 0 1em}
th,td{border:1px solid #d5d8de;padding:2px 7px;text-align:left;vertical-align:top}
th{background:#eef0f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.faster{background:#d8ecff}td.slower{background:#ffe0dc}td.fastest{font-weight:bold}
table.kv th{width:13em;font-weight:600}
figure{margin:.6em 0 1.4em}figure img{max-width:100%;height:auto;border:1px solid #e3e5ea}
figcaption{font-size:.85em;color:#444;max-width:60em}
.notice{background:#fff5d6;border-left:4px solid #e0a800;padding:.5em .8em;margin:.8em 0}
.note{color:#555;font-style:italic}.files{font-size:.85em}
li.warn{margin-bottom:.5em}.advice{color:#225d2a}
nav ul{columns:3;font-size:.9em}code{font-size:.92em}
.scroll{overflow-x:auto}
"""


def page(p: Page) -> str:
    body = [f"<h1>{escape(p.title)}</h1>", _nav(p), '<section id="summary"><h2>Summary</h2>',
            _kv(p.summary)]
    body += [f'<p class="notice">{escape(n)}</p>' for n in p.notices]
    if p.method:
        body += ["<details><summary>Statistical method</summary>", _kv(p.method), "</details>"]
    body += [_files(p.files), "</section>"]
    for i, c in enumerate(p.collectives):
        body.append(_collective(c, i))
    if p.models is not None:
        body.append(_models(p.models))
    body.append(_warnings(p.warnings))
    body.append(_provenance(p))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(p.title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")


def _nav(p: Page) -> str:
    items = ['<li><a href="#summary">Summary</a></li>']
    items += [f'<li><a href="#c{i}">{escape(c.name)}</a></li>'
              for i, c in enumerate(p.collectives)]
    items += ['<li><a href="#models">Models</a></li>'] if p.models is not None else []
    items += ['<li><a href="#warnings">Stability warnings</a></li>',
              '<li><a href="#provenance">Provenance</a></li>']
    return f"<nav><ul>{''.join(items)}</ul></nav>"


def _collective(c: Collective, i: int) -> str:
    out = [f'<section id="c{i}"><h2>{escape(c.name)}</h2>']
    out += [f'<p class="note">{escape(n)}</p>' for n in c.notes]
    for j, b in enumerate(c.blocks):
        out.append(f'<h3 id="c{i}b{j}">{escape(b.title)}</h3>')
        out += [f'<p class="note">{escape(n)}</p>' for n in b.notes]
        if b.recommendation is not None:
            out += ["<p><b>Recommendation per size range</b></p>", table(b.recommendation)]
        if b.ratios is not None:
            out += ["<p><b>Ratio to the baseline per size</b></p>", table(b.ratios)]
        out += [table(t) for t in b.tables]
        out.append(_files(b.files))
        out += [figure(f) for f in b.figures]
    if c.figures:
        out.append(f"<h3>{escape(c.name)}: process counts</h3>")
        out += [figure(f) for f in c.figures]
    out.append("</section>")
    return "\n".join(out)


def _models(m: ModelSection) -> str:
    out = [f'<section id="models"><h2>{escape(m.title)}</h2>']
    out += [f'<p class="note">{escape(n)}</p>' for n in m.notes]
    for t in m.tables:
        out.append(table(t))
    out.append(_files(m.files))
    out += [figure(f) for f in m.figures]
    out.append("</section>")
    return "\n".join(out)


def table(t: Table) -> str:
    head = "".join(f"<th>{escape(col)}</th>" for col in t.columns)
    rows = []
    for row in t.rows:
        cells = []
        for cell in row:
            c = cell if isinstance(cell, Cell) else Cell(cell)
            css = f' class="{escape(c.css)}"' if c.css else ""
            cells.append(f"<td{css}>{escape(c.text)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    caption = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return (f'<div class="scroll"><table>{caption}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def figure(f: FigureRef) -> str:
    """The figure as an <img> with a data URI: no file beside the page is needed. Its axes
    labels and legend (saved in the file) ride along in data-axes, for tools and tests."""
    mime = MIME[f.path.suffix.lower()]
    data = base64.b64encode(f.path.read_bytes()).decode("ascii")
    axes = description(f.path)
    meta = f' data-axes="{escape(axes)}"' if axes else ""
    return (f'<figure{meta}><img src="data:{mime};base64,{data}" alt="{escape(f.caption)}" '
            f'loading="eager"><figcaption>{escape(f.caption)}</figcaption></figure>')


def _kv(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>' if rows else ""


def _files(files: Sequence[str]) -> str:
    if not files:
        return ""
    links = ", ".join(f'<a href="{escape(f)}">{escape(f)}</a>' for f in files)
    return f'<p class="files">Tables: {links}</p>'


def _warnings(warnings: Sequence[WarningItem]) -> str:
    out = ['<section id="warnings"><h2>Stability warnings</h2>']
    if not warnings:
        out.append('<p class="note">None: no check found a problem.</p>')
    else:
        # Worst first; the first few in view, the rest one click away (no script needed).
        items = [f'<li class="warn"><b>{escape(w.where)}</b>: {escape(w.problem)}.<br>'
                 f'<span class="advice">What to do: {escape(w.advice)}.</span></li>'
                 for w in warnings]
        out += ["<ul>", *items[:WARNINGS_SHOWN], "</ul>"]
        if len(items) > WARNINGS_SHOWN:
            out += [f"<details><summary>{len(items) - WARNINGS_SHOWN} more warnings</summary>",
                    "<ul>", *items[WARNINGS_SHOWN:], "</ul></details>"]
    out.append("</section>")
    return "\n".join(out)


def _provenance(p: Page) -> str:
    out = ['<section id="provenance"><h2>Provenance</h2>', _kv(p.provenance)]
    if p.provenance_warnings:
        out.append("<p><b>Warnings recorded when the campaign ran</b></p><ul>")
        out += [f"<li>{escape(w)}</li>" for w in p.provenance_warnings]
        out.append("</ul>")
    if p.environment:
        out += ["<details><summary>Environment (variables that change MPI behaviour)"
                "</summary>", _kv(p.environment), "</details>"]
    out.append("</section>")
    return "\n".join(out)
