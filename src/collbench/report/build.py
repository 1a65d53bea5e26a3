"""`collbench report`: results folder -> figures, tables and one HTML page.

Orchestration only: data reads the store, sections and tables turn the comparison into
page content and files, output decides where they go, figures draws, html renders.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.analyse.compare import METHOD
from collbench.errors import UserError
from collbench.report import data, figures, html, nonblocking, output, sections, summary, tables
from collbench.report.apps import only_programs
from collbench.report.apps import section as apps_section
from collbench.report.models import section as model_section
from collbench.report.scaling import Machine
from collbench.store import Store
from collbench.storefiles import atomic_write


@dataclass(frozen=True)
class Options:
    baseline: str = "default"
    stat: str = "avg"
    collective: str | None = None
    confidence: float = 0.95
    fmt: str = "png"  # png | svg | both
    model: Path | None = None  # a .p2p.toml: the models section predicts every point
    against: Path | None = None  # another folder: the models section compares with it


@dataclass(frozen=True)
class Written:
    index: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]


def build_report(results: Path, out: Path, opts: Options) -> Written:
    # Checked before reading: a typo should not cost a slow comparison first.
    if opts.fmt not in figures.FORMATS:
        raise UserError(f"collbench report: --format {opts.fmt!r} is not valid; valid: "
                        f"{', '.join(figures.FORMATS)}")
    d = data.read(Store(results), opts.baseline, opts.stat, opts.collective, opts.confidence)
    try:
        output.prepare(out)
        dest = output.Output(out, opts.fmt)
        parts = sections.collectives(d.comp, d.counts, d.tails, dest, _machine(d.provenance))
        overlap = nonblocking.section(Store(results), dest, opts.collective)
        parts = [*parts, overlap] if overlap is not None else parts
        apps = apps_section(Store(results), dest, opts.model)  # workload rows, if any
        parts = [*parts, apps] if apps is not None else parts
        files = dest.table("recommendations", *tables.recommendations(d.comp)) if d.comp else []
        models = (model_section(results, dest, opts.model, opts.against, opts.stat)
                  if (opts.model is not None or opts.against is not None)
                  and not only_programs(Store(results)) else None)
        written = figures.render_all(dest.jobs)
        index = out / "index.html"
        atomic_write(index, html.page(_page(d, parts, files, models)).encode(), mode=0o644)
    except OSError as e:
        raise UserError(f"{out}: cannot write the report: {e}") from None
    return Written(index, tuple(written), tuple(dest.tables))


def _page(d: data.ReportData, parts: Sequence[html.Collective],
          files: Sequence[str], models: html.ModelSection | None = None) -> html.Page:
    prov = d.provenance
    return html.Page(
        title=f"collbench report: {d.campaign.get('name', d.results.name)}",
        summary=tuple(summary.summary(d)), collectives=tuple(parts),
        notices=tuple(summary.notices(d.comp, d.counts)),
        method=tuple(METHOD.items()) if d.comp else (),
        warnings=tuple(html.WarningItem(w.where, w.problem, w.advice)
                       for w in (d.comp.warnings if d.comp else ())),
        provenance=tuple(summary.provenance(d.campaign, prov, d.results)),
        environment=tuple((str(k), str(v)) for k, v in
                          sorted((prov.get("environment") or {}).items())),
        provenance_warnings=tuple(str(w) for w in prov.get("warnings") or []),
        files=tuple(files), models=models)


def _machine(prov: dict[str, Any]) -> Machine:
    """Cores and sockets per node from provenance (boundaries in the scaling figure). A
    simulation ran on its platform's nodes, not on the machine that simulated it."""
    cores, sockets = prov.get("cores"), prov.get("sockets")
    sim = prov.get("simgrid")
    if isinstance(sim, dict):
        try:
            node = tomllib.loads(str(sim.get("platform_toml") or ""))
            sockets = node.get("sockets_per_node")
            per = node.get("cores_per_socket")
            cores = sockets * per if isinstance(sockets, int) and isinstance(per, int) \
                else None
        except tomllib.TOMLDecodeError:
            cores = sockets = None
    return Machine(cores if isinstance(cores, int) and cores > 0 else None,
                   sockets if isinstance(sockets, int) and sockets > 0 else None)
