"""The report's applications section (workload rows, source "program"; docs/workloads.md):

- ring: time per round against P, one line per placement and message size, with the socket
  and node boundaries of the machine (its provenance or SimGrid platform) marked;
- matrix: pack/scatter/compute/gather/unpack/total per topology and data shape;
- jacobi: measured MLUP/s per placement and N, and with a p2p model (`report --model
  X.p2p.toml`) the P(L,N) prediction beside it, with the error (collbench.analyse.jacobi).

Each value is the median over ok repetitions.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from matplotlib.figure import Figure

from collbench import points
from collbench.analyse.jacobi import COLUMNS as JACOBI_COLUMNS
from collbench.analyse.jacobi import error_summary, jacobi_points
from collbench.analyse.modeldata import machine_shape
from collbench.errors import UserError
from collbench.models.predict import Shape
from collbench.report import figures, html
from collbench.report.output import Output
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import csv_table, render

MATRIX_PHASES: Final = ("pack_us", "scatter_us", "compute_us", "gather_us", "unpack_us",
                        "total_us")


def _rows(store: Store, collective: str) -> list[dict[str, Any]]:
    out = [{k: r[k] for k in ("nprocs", "nodes", "mapping", "binding", "size_bytes", "avg_us",
                              "metrics")}
           for r in points.read(store, collective=collective, ok=True)
           if r["source"] == "program"]
    for r in out:
        r["m"] = points.metrics_of(r["metrics"])
    return out


def _fmt(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


# --- ring -------------------------------------------------------------------------------

def ring_figure(lines: Sequence[tuple[str, tuple[int, ...], tuple[float, ...]]],
                boundaries: Sequence[tuple[float, str]]) -> Figure:
    """avg_us (one round of P steps) against P; dashed lines where the ring first crosses a
    socket or a node under --map-by core."""
    fig = Figure(figsize=(7.5, 4.2))
    fig.subplots_adjust(left=0.1, right=0.7, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    colors = figures.palette([label for label, _, _ in lines])
    for k, (label, xs, ys) in enumerate(lines):
        ax.plot(xs, ys, marker=figures.MARKERS[k % len(figures.MARKERS)],
                color=colors[label], label=label)
    top = max((y for _, _, ys in lines for y in ys), default=1.0)
    for x, what in boundaries:
        ax.axvline(x, color="grey", linestyle="--", linewidth=1)
        ax.text(x, top, f" {what}", rotation=90, va="top", ha="left", fontsize=7,
                color="grey")
    ax.set_xlabel("processes P")
    ax.set_ylabel("time per round of P steps (µs)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    fig.suptitle("ring: time vs P per placement", fontsize=10)
    return fig


def boundaries(shape: Shape, top: int) -> list[tuple[float, str]]:
    """Where --map-by core first puts a rank on another socket, and on another node."""
    out: list[tuple[float, str]] = []
    cps = shape.cores_per_socket
    if not cps:
        return out
    per_node = cps * shape.sockets
    for s in range(1, top // cps + 1):
        x = s * cps + 0.5
        if x < top:
            out.append((x, "node boundary" if s * cps % per_node == 0 else
                        "socket boundary"))
    return out


def _ring(store: Store, dest: Output) -> html.Block | None:
    rows = _rows(store, "ring")
    if not rows:
        return None
    groups: dict[tuple[str, int], dict[int, list[float]]] = {}
    for r in rows:
        place = f"map-by={r['mapping']} bind-to={r['binding']}"
        groups.setdefault((place, int(r["size_bytes"] or 0)), {}).setdefault(
            int(r["nprocs"]), []).append(float(r["avg_us"]))
    lines = []
    table = []
    for (place, size), series in sorted(groups.items()):
        xs = tuple(sorted(series))
        ys = tuple(statistics.median(series[x]) for x in xs)
        lines.append((f"{place} {format_size(size)}", xs, ys))
        table += [{"placement": place, "size": format_size(size), "nprocs": x,
                   "avg_us": y, "step_us": y / x} for x, y in zip(xs, ys, strict=True)]
    shape = machine_shape(store)
    top = max(x for _, xs, _ in lines for x in xs)
    cols = ("placement", "size", "nprocs", "avg_us", "step_us")
    fig = dest.figure(partial(ring_figure, tuple(lines), tuple(boundaries(shape, top))),
                      dest.slug("apps-ring"), "ring: time per round of P steps vs P; dashed: "
                      "the socket/node boundaries under --map-by core")
    notes = (f"machine: {shape.sockets} sockets × {shape.cores_per_socket or '?'} cores per "
             "node; step_us = avg_us / P (one step of the ring)",)
    return html.Block("ring", None, None, (fig,), notes,
                      tuple(dest.table("apps-ring", render(table, cols, "markdown"),
                                       csv_table(table, cols))),
                      tables=(_table(table, cols),))


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[str], caption: str = "") -> html.Table:
    def cell(v: Any) -> str:
        return _fmt(v) if isinstance(v, float) else str(v)

    return html.Table(tuple(cols), tuple(tuple(cell(r.get(c)) for c in cols) for r in rows),
                      caption)


# --- matrix -----------------------------------------------------------------------------

def matrix_figure(labels: Sequence[str], phases: Sequence[tuple[float, ...]]) -> Figure:
    """Stacked phase times per topology and shape."""
    fig = Figure(figsize=(7.5, 0.5 + 0.35 * max(len(labels), 3)))
    fig.subplots_adjust(left=0.35, right=0.97, bottom=0.2, top=0.88)
    ax = fig.add_subplot()
    left = [0.0] * len(labels)
    names = MATRIX_PHASES[:-1]
    colors = figures.palette(list(names))
    for j, name in enumerate(names):
        widths = [p[j] for p in phases]
        ax.barh(range(len(labels)), widths, left=left, color=colors[name],
                label=name.removesuffix("_us"))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("µs per iteration (max over ranks)")
    ax.legend(fontsize=7, ncols=5, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              frameon=False)
    return fig


def _matrix(store: Store, dest: Output) -> html.Block | None:
    rows = _rows(store, "matrix")
    if not rows:
        return None
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        m = r["m"]
        dims = "x".join(str(d) for d in m.get("dims", []))
        shape = "x".join(str(d) for d in m.get("shape", []))
        groups.setdefault((int(r["nprocs"]), str(r["mapping"]), dims, shape), []).append(m)
    table = []
    for (np_, mapping, dims, shape), ms in sorted(groups.items()):
        row: dict[str, Any] = {"nprocs": np_, "map_by": mapping, "topology": dims,
                               "shape": shape, "reps": len(ms)}
        for phase in MATRIX_PHASES:
            vals = [float(m[phase]) for m in ms if isinstance(m.get(phase), int | float)]
            row[phase] = statistics.median(vals) if vals else None
        table.append(row)
    cols = ("nprocs", "map_by", "topology", "shape", *MATRIX_PHASES, "reps")
    labels = tuple(f"np={r['nprocs']} {r['topology']} ({r['shape']})" for r in table)
    phases = tuple(tuple(float(r[p] or 0.0) for p in MATRIX_PHASES[:-1]) for r in table)
    fig = dest.figure(partial(matrix_figure, labels, phases), dest.slug("apps-matrix"),
                      "matrix: time per phase per Cartesian topology and data shape")
    return html.Block("matrix (Scatterv/Gatherv per topology)", None, None, (fig,), (),
                      tuple(dest.table("apps-matrix", render(table, cols, "markdown"),
                                       csv_table(table, cols))),
                      tables=(_table(table, cols),))


# --- jacobi -----------------------------------------------------------------------------

def jacobi_figure(series: Sequence[tuple[str, tuple[int, ...], tuple[float, ...],
                                        tuple[float, ...]]]) -> Figure:
    """Measured (markers) and predicted (dashed) MLUP/s against N per placement and L."""
    fig = Figure(figsize=(7.5, 4.2))
    fig.subplots_adjust(left=0.11, right=0.7, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    colors = figures.palette([s[0] for s in series])
    for k, (label, xs, measured, predicted) in enumerate(series):
        ax.plot(xs, measured, marker=figures.MARKERS[k % len(figures.MARKERS)],
                linestyle="-", color=colors[label], label=f"{label} measured")
        if predicted:
            ax.plot(xs, predicted, linestyle="--", color=colors[label],
                    label=f"{label} P(L,N)")
    ax.set_xlabel("processes N")
    ax.set_ylabel("MLUP/s")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    fig.suptitle("jacobi: measured and predicted MLUP/s", fontsize=10)
    return fig


def _jacobi(store: Store, dest: Output, p2p: Path | None) -> html.Block | None:
    rows = _rows(store, "jacobi")
    if not rows:
        return None
    notes: list[str] = []
    table: list[dict[str, Any]] = []
    if p2p is not None:
        from collbench.models.p2pfile import read_p2p

        try:
            points = jacobi_points(store, read_p2p(p2p, required_levels=()))
            table = [p.as_row() for p in points]
            s = error_summary(points)
            if s:
                notes.append(f"P(L,N) = L³N / (T_s + C/B + 4kλ) with λ, B of the level the "
                             f"halos cross ({p2p.name}); |error| over {int(s['points'])} runs "
                             f"with N > 1: median {s['median_abs_pct']:.1f} %, largest "
                             f"{s['max_abs_pct']:.1f} %")
        except UserError as e:
            notes.append(f"no prediction: {e}")
    if not table:
        groups: dict[tuple[Any, ...], list[float]] = {}
        for r in rows:
            m = r["m"]
            if isinstance(m.get("mlups"), int | float):
                key = (f"map-by={r['mapping']}", int(r["nprocs"]), m.get("L"),
                       "x".join(str(d) for d in m.get("dims", [])))
                groups.setdefault(key, []).append(float(m["mlups"]))
        table = [{"placement": p, "nprocs": n, "L": L, "dims": d,
                  "measured_mlups": statistics.median(v), "reps": len(v)}
                 for (p, n, L, d), v in sorted(groups.items(), key=lambda kv: str(kv[0]))]
        if p2p is None:
            notes.append("give a p2p model (collbench report --model X.p2p.toml) for the "
                         "P(L,N) prediction beside each measurement")
    cols = [c for c in JACOBI_COLUMNS if any(c in r for r in table)]
    by_line: dict[str, dict[int, tuple[float, float | None]]] = {}
    for r in table:
        label = f"{r['placement']} L={r['L']}"
        by_line.setdefault(label, {})[int(r["nprocs"])] = (
            float(r["measured_mlups"]), r.get("predicted_mlups"))
    series = []
    for label, pts in sorted(by_line.items()):
        xs = tuple(sorted(pts))
        pred = tuple(float(pts[x][1] or 0.0) for x in xs) if all(
            pts[x][1] is not None for x in xs) else ()
        series.append((label, xs, tuple(pts[x][0] for x in xs), pred))
    fig = dest.figure(partial(jacobi_figure, tuple(series)), dest.slug("apps-jacobi"),
                      "jacobi: MLUP/s against N per placement and L (dashed: the model)")
    return html.Block("jacobi (measured and P(L,N))", None, None, (fig,), tuple(notes),
                      tuple(dest.table("apps-jacobi", render(table, cols, "markdown"),
                                       csv_table(table, cols))),
                      tables=(_table(table, cols),))


def only_programs(store: Store) -> bool:
    """Whether every row of the folder is a workload program's (no collective to model)."""
    con = points.connect(store)
    try:
        (others,) = con.execute(f"SELECT count(*) FROM {points.VIEW} WHERE source IS NULL OR "
                                "source != 'program'").fetchone() or (0,)
    finally:
        con.close()
    return not others


def section(store: Store, dest: Output, p2p: Path | None = None) -> html.Collective | None:
    """The applications section, or None when the folder holds no workload rows."""
    blocks = [b for b in (_ring(store, dest), _matrix(store, dest), _jacobi(store, dest, p2p))
              if b is not None]
    if not blocks:
        return None
    return html.Collective("applications (workload programs)", tuple(blocks), (),
                           ("median over ok repetitions; avg_us of a program is its primary "
                            "metric (docs/workloads.md)",))
