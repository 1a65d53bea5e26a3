"""Models in figures and tables: one source against another (measured vs predicted), their
residuals, the error tables, fitted p2p parameters per level and regressions in P.

Used by `collbench compare A --against B -o DIR` (overlay figures and tables in DIR) and by
`collbench report --model FILE | --against RESULTS` (the page's models section).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from collbench.analyse.against import POINT_COLUMNS, Against, _point_row, summary_lines
from collbench.analyse.compare import block_title
from collbench.models.accuracy import PointError
from collbench.report import figures, html
from collbench.report.figures import Color, _frame, _legend, _legend_margin, _log_y, _size_axis
from collbench.sizes import format_size
from collbench.storefiles import atomic_write
from collbench.tables import csv_table

MAX_FIGURES: Final = 60  # contexts drawn; the tables hold every point

Context = tuple[str, int, str]


def contexts(points: Sequence[PointError]) -> dict[Context, list[PointError]]:
    out: dict[Context, list[PointError]] = {}
    for p in points:
        out.setdefault((p.key.collective, p.key.nprocs, p.key.mapping), []).append(p)
    return out


def title(ctx: Context) -> str:
    return block_title(ctx[0], ctx[1], None, None, ctx[2] or None, None, None)


PANEL_COLUMNS: Final = 4  # small multiples: panels per row
RATIO_TICKS: Final = (0.1, 0.2, 0.5, 0.8, 1.0, 1.25, 2.0, 5.0, 10.0)


def _by_algorithm(points: Sequence[PointError]) -> dict[str, list[PointError]]:
    """Each algorithm's sized points, by size (size 0 cannot go on a log axis)."""
    out: dict[str, list[PointError]] = {}
    for p in sorted(points, key=lambda p: p.key.size_bytes):
        if p.key.size_bytes > 0:
            out.setdefault(p.key.algorithm, []).append(p)
    return out


def _panels(n: int, height: float) -> tuple[Figure, list[Any]]:
    """n panels in rows of up to PANEL_COLUMNS, sharing both axes."""
    cols = max(1, min(PANEL_COLUMNS, n))
    rows = max(1, -(-n // cols))
    width = 0.9 + 3.1 * cols
    fig = Figure(figsize=(width, 0.8 + height * rows))
    fig.subplots_adjust(left=0.9 / width, right=1 - 0.2 / width, bottom=0.55 / fig.get_figheight(),
                        top=1 - 0.6 / fig.get_figheight(), wspace=0.12, hspace=0.45)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def overlay(title: str, points: Sequence[PointError], colors: Mapping[str, Color],
            a_name: str, b_name: str) -> Figure:
    """Small multiples: one panel per algorithm, A solid with markers against B dashed,
    latency vs size on shared log axes (one scale: panels compare by eye)."""
    by_alg = _by_algorithm(points)
    fig, axes = _panels(max(1, len(by_alg)), 2.6)
    sizes = [p.key.size_bytes for pts in by_alg.values() for p in pts]
    for i, (ax, (label, pts)) in enumerate(zip(axes, by_alg.items(), strict=False)):
        x = [float(p.key.size_bytes) for p in pts]
        color = colors.get(label, (0.0, 0.0, 0.0, 1.0))
        ax.plot(x, [p.measured_us for p in pts], color=color, linewidth=1.3,
                marker=figures.MARKERS[i % len(figures.MARKERS)], markersize=3.5,
                label=a_name)
        ax.plot(x, [p.predicted_us for p in pts], color="0.25", linewidth=1.2,
                linestyle="--", marker="x" if len(x) == 1 else None,  # one size: a point
                label=b_name)
        ax.set_title(label, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, frameon=False)
    for ax in axes:
        if sizes:
            _size_axis(ax, sizes)
        _log_y(ax)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("message size (bytes per rank)", fontsize=8)
        ax.set_ylabel("latency (µs)", fontsize=8)
    fig.suptitle(f"{title}: {a_name} (solid) and {b_name} (dashed)", fontsize=10)
    return fig


def residuals(title: str, points: Sequence[PointError], colors: Mapping[str, Color]) -> Figure:
    """B / A against size on a log-ratio axis (2× over and 2× under lie as far from 1),
    one line per algorithm."""
    labels = list(dict.fromkeys(p.key.algorithm for p in points))
    margin = _legend_margin(labels)
    fig, ax = _frame(7.5 + margin, 3.6, right=margin)
    ratios = []
    for i, (label, pts) in enumerate(_by_algorithm(points).items()):
        ys = [max(p.ratio, 1e-6) for p in pts]
        ratios += ys
        ax.plot([float(p.key.size_bytes) for p in pts], ys, color=colors.get(label, "black"),
                marker=figures.MARKERS[i % len(figures.MARKERS)], markersize=3,
                linewidth=1.1, label=label)
    sizes = [p.key.size_bytes for p in points if p.key.size_bytes > 0]
    if sizes:
        _size_axis(ax, sizes)
    ax.set_yscale("log")
    if ratios:
        span = max(1.25, *(max(r, 1 / r) for r in ratios)) * 1.1
        ax.set_ylim(1 / span, span)  # symmetric about 1
    ax.yaxis.set_major_locator(FixedLocator(list(RATIO_TICKS)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("B / A (log scale; 1 = exact)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if ratios:
        _legend(ax)
    return fig


def figure_jobs(result: Against, root: Path, fmt: str = "png",
                slug: Any = None) -> list[tuple[figures.Job, str, str]]:
    """(job, kind, context title) for the overlay and residual figure of each context."""
    jobs = []
    for n, (ctx, pts) in enumerate(sorted(contexts(result.points).items())):
        if n >= MAX_FIGURES:
            break
        name = title(ctx)
        stem = slug(name) if slug else _stem(name)
        colors = figures.palette(list(dict.fromkeys(p.key.algorithm for p in pts)))
        jobs.append((figures.Job(partial(overlay, name, pts, colors, "A", "B"),
                                 root / f"{stem}_overlay", fmt), "overlay", name))
        jobs.append((figures.Job(partial(residuals, name, pts, colors),
                                 root / f"{stem}_residuals", fmt), "residuals", name))
    return jobs


def _stem(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", text).strip("-.")[:80] or "x"


def write_against(result: Against, out: Path) -> list[Path]:
    """compare --against -o DIR: overlay and residual PNGs per context, the tables."""
    from collbench.analyse.against import render

    try:
        out.mkdir(parents=True, exist_ok=True)
        written = figures.render_all([j for j, _, _ in figure_jobs(result, out / "figures")])
        for name, text in (("points.csv", csv_table([_point_row(p) for p in result.points],
                                                    POINT_COLUMNS) + "\n"),
                           ("against.md", render(result, "markdown", worst=20)),
                           ("against.json", json.dumps(result.to_json(), indent=1) + "\n")):
            atomic_write(out / name, text.encode(), mode=0o644)
            written.append(out / name)
    except OSError as e:
        from collbench.errors import UserError

        raise UserError(f"{out}: cannot write: {e.strerror or e}") from None
    return written


# --- the report's section -------------------------------------------------------------------

def section_tables(result: Against | None, p2p_rows: Sequence[dict[str, Any]],
                   scaling_rows: Sequence[dict[str, Any]]) -> list[html.Table]:
    out = []
    if result is not None:
        out.append(html.Table(
            ("collective", "algorithm", "points", "median |error| %", "p95 |error| %",
             "median B/A"),
            tuple((x.collective, x.algorithm, str(x.points), f"{x.median_abs_pct:.2f}",
                   f"{x.p95_abs_pct:.2f}", f"{x.median_ratio:.3f}")
                  for x in result.algorithms),
            "Error per algorithm: " + "; ".join(summary_lines(result))))
    if p2p_rows:
        out.append(html.Table(
            ("level", "transport", "from", "latency µs", "latency 95% CI", "bandwidth GB/s",
             "bandwidth 95% CI", "fit median %", "fit p95 %"),
            tuple((r["level"], r["transport"], format_size(r["from_bytes"]),
                   f"{r['latency_us']:.4g}", r["latency_ci"] or "-",
                   f"{r['bandwidth_GBs']:.4g}", r["bandwidth_ci"] or "-",
                   _num(r["fit_median_pct"]), _num(r["fit_p95_pct"])) for r in p2p_rows),
            "Point-to-point parameters per level and protocol regime"))
    if scaling_rows:
        out.append(html.Table(
            ("collective", "algorithm", "placement", "size", "points", "best form", "formula",
             "adj. R²", "LOO median %"),
            tuple((r["collective"], r["algorithm"], r["placement"], format_size(r["size"]),
                   str(r["points"]), r["form"], r["formula"], f"{r['adj_r2']:.3f}",
                   f"{r['loo_median_pct']:.1f}") for r in scaling_rows),
            "Regressions of latency in the process count P (best form by AICc)"))
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


REPORT_FIGURES: Final = 24  # contexts drawn on the page (overlay + residuals each)
SCALING_SIZES: Final = 3


def scaling_rows(store: Any, stat: str = "avg") -> list[dict[str, Any]]:
    """Best regression in P per collective × algorithm × placement, at up to 3 sizes
    (smallest, a middle one, largest) measured at >= 3 process counts."""
    from collbench.analyse.modeldata import collective_rows
    from collbench.models.scaling import fit_scaling

    series: dict[tuple[str, str, str, int], dict[int, float]] = {}
    for r in collective_rows(store, stat):
        series.setdefault((r.collective, r.label, r.mapping_label, r.size_bytes),
                          {})[r.nprocs] = r.value_us
    usable = {k: v for k, v in series.items() if len(v) >= 3}
    sizes = sorted({k[3] for k in usable})
    if len(sizes) > SCALING_SIZES:
        sizes = [sizes[0], sizes[len(sizes) // 2], sizes[-1]]
    out = []
    for (coll, label, placement, size), v in sorted(usable.items()):
        if size not in sizes:
            continue
        xs = sorted(v)
        best = fit_scaling(xs, [v[x] for x in xs], pmnf=False).best
        out.append({"collective": coll, "algorithm": label, "placement": placement,
                    "size": size, "points": len(xs),
                    "form": "nlogn" if best.name == "plogp" else best.name,
                    "formula": best.formula.replace("x", "P"), "adj_r2": best.adj_r2,
                    "loo_median_pct": best.loo_median_abs_pct})
    return out


def section(results: Path, dest: Any, model_file: Path | None, against_folder: Path | None,
            stat: str = "avg") -> html.ModelSection:
    """The report's models section: RESULTS (A) against a p2p model's predictions or another
    folder (B); fitted p2p parameters; regressions in P of RESULTS."""
    from collbench.analyse.against import against, predicted_points, read_points
    from collbench.analyse.modeldata import p2p_rows
    from collbench.models.p2pfile import read_p2p
    from collbench.store import Store

    store = Store(results)
    a = read_points(store, stat)
    notes: list[str] = []
    p2p: list[dict[str, Any]] = []
    if model_file is not None:
        model = read_p2p(model_file, required_levels=())
        b, notes = predicted_points(store, model, stat, where=str(model_file))
        b_name = f"model {model_file.name}"
        p2p = p2p_rows(model)
    else:
        assert against_folder is not None
        b = read_points(Store(against_folder), stat)
        b_name = str(against_folder)
    result = against(a, b, str(results), b_name, stat, notes)
    reg = scaling_rows(store, stat)
    figs = []
    for n, (ctx, pts) in enumerate(sorted(contexts(result.points).items())):
        if n >= REPORT_FIGURES:
            notes.append(f"figures of the first {REPORT_FIGURES} of "
                         f"{len(contexts(result.points))} contexts; every point is in the "
                         "tables")
            break
        name = title(ctx)
        stem = dest.slug(f"model_{name}")
        colors = figures.palette(list(dict.fromkeys(p.key.algorithm for p in pts)))
        figs.append(dest.figure(partial(overlay, name, pts, colors, "measured", "predicted"),
                                f"{stem}_overlay",
                                f"{name}: one panel per algorithm, measured (solid, "
                                f"{results.name}) and {b_name} (dashed) latency; one scale "
                                "in every panel."))
        figs.append(dest.figure(partial(residuals, name, pts, colors), f"{stem}_residuals",
                                f"{name}: predicted / measured per algorithm, on a log-ratio "
                                "axis (1 = exact; 2× over and 2× under equally far)."))
    files = dest.table("models_points", _points_markdown(result),
                       csv_table([_point_row(p) for p in result.points], POINT_COLUMNS))
    tables = section_tables(result, p2p, reg)
    if model_file is not None:  # why, per level (report/explain.py)
        from collbench.report import explain

        whys, why_notes = explain.explain_store(store, model, a, stat)
        tables.append(explain.table(whys))
        seen = explain.measured_table(whys)  # rows with pml/monitoring counts
        if seen is not None:
            tables.append(seen)
        notes += why_notes
    return html.ModelSection(f"Models: measured against {b_name}",
                             tuple(tables), tuple(figs),
                             tuple(notes), tuple(files))


def _points_markdown(result: Against) -> str:
    from collbench.analyse.against import render

    return render(result, "markdown", worst=50)
