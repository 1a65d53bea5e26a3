"""The ratio heat map: algorithm x size, one fixed symmetric log colour scale everywhere.

The colour says the ratio, its strength says the evidence: full colour is significant,
faded toward grey is tested but not significant, hatching is untested, grey is not
measured. One scale (1/RATIO_SPAN to RATIO_SPAN) for every block, so that a colour means
the same ratio in every heat map of a report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, LogNorm, to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from collbench.analyse import RatioStat
from collbench.report.figures import MAX_CELL_TEXT, Color, _frame, _text_width
from collbench.sizes import format_size

RATIO_SPAN: Final = 4.0  # every heat map: 1/4 to 4, so that one colour means one ratio
FADED: Final = 0.3  # a non-significant cell keeps this much of its colour


def heatmap(title: str, ratios: Sequence[RatioStat], baseline: str, repetitions: int) -> Figure:
    """Ratio to the baseline per (algorithm, size) on one fixed symmetric log scale.

    Significant cells in full colour, tested but not significant ones faded toward grey,
    untested ones (fewer than 2 repetitions on a side) hatched; unmeasured cells grey."""
    labels = sorted({r.point.label for r in ratios})
    sizes = sorted({r.point.size_bytes for r in ratios})
    cell = {(r.point.label, r.point.size_bytes): r for r in ratios}
    cmap = colormaps["RdBu_r"]
    norm = LogNorm(vmin=1 / RATIO_SPAN, vmax=RATIO_SPAN, clip=True)
    left = _text_width(labels) + 0.25
    width = min(18.0, max(6.5, 0.42 * len(sizes) + left + 1.8))
    rotate = len(sizes) > 14
    fig, ax = _frame(width, max(3.2, 0.36 * len(labels) + 2.5), left=left, right=1.7,
                     bottom=1.4 if rotate else 1.15, top=0.65)
    grid = [[_cell_colour(cell.get((lab, s)), cmap, norm, repetitions) for s in sizes]
            for lab in labels]
    ax.imshow(grid, aspect="auto", interpolation="nearest",
              extent=(0, len(sizes), len(labels), 0))
    pos = ax.get_position()
    cax = fig.add_axes((pos.x1 + 0.15 / width, pos.y0, 0.18 / width, pos.height),
                       label="colorbar")
    bar = fig.colorbar(ScalarMappable(norm, cmap), cax=cax, extend="both")
    bar.set_label(f"ratio to {baseline} (< 1: faster)")
    bar.ax.yaxis.set_major_locator(FixedLocator([0.25, 0.5, 1.0, 2.0, 4.0]))
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    readable = len(sizes) <= MAX_CELL_TEXT[0] and len(labels) <= MAX_CELL_TEXT[1]
    untested = 0
    for (label, size), r in cell.items():
        x, y = sizes.index(size), labels.index(label)
        if r.significant is None and repetitions >= 2:
            untested += 1
            ax.add_patch(Rectangle((x, y), 1, 1, fill=False, hatch="///", linewidth=0,
                                   edgecolor=(0.25, 0.25, 0.25, 0.55)))
        if readable and r.ratio > 0:
            strong = r.significant and abs(math.log(r.ratio)) > 0.6 * math.log(RATIO_SPAN)
            ax.text(x + 0.5, y + 0.5, _short(r.ratio), ha="center", va="center", fontsize=7,
                    color="white" if strong else "black",
                    fontweight="bold" if r.significant else "normal")
    for i in range(1, len(sizes)):  # white cell borders, as pcolormesh drew them
        ax.axvline(i, color="white", linewidth=0.5)
    for i in range(1, len(labels)):
        ax.axhline(i, color="white", linewidth=0.5)
    ax.set_xticks([i + 0.5 for i in range(len(sizes))], [format_size(s) for s in sizes],
                  rotation=90 if rotate else 0, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels, fontsize=8)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("algorithm")
    ax.set_title(title + ("" if repetitions >= 2 else
                          "\n(1 repetition: no significance test possible)"), fontsize=10)
    handles = [Patch(facecolor=cmap(norm(0.5)), label="significant"),
               Patch(facecolor=_fade(cmap(norm(0.5))), label="not significant (faded)")]
    handles += [Patch(facecolor="white", edgecolor="0.3", hatch="///",
                      label="untested")] if untested else []
    handles += [Patch(facecolor=MISSING, label="not measured")]
    if repetitions < 2:
        handles = [Patch(facecolor=cmap(norm(0.5)), label="untested (1 repetition)"),
                   Patch(facecolor=MISSING, label="not measured")]
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.01, 0.0), ncols=2,
               fontsize=8, frameon=False)
    return fig


MISSING: Final = (0.87, 0.87, 0.87, 1.0)


def _fade(rgba: Color) -> Color:
    grey = 0.86
    return (*(FADED * c + (1 - FADED) * grey for c in rgba[:3]), 1.0)  # type: ignore[return-value]


def _cell_colour(r: RatioStat | None, cmap: Colormap, norm: LogNorm,
                 repetitions: int) -> Color:
    if r is None or not r.ratio > 0 or not math.isfinite(r.ratio):
        return MISSING
    rgba = to_rgba(cmap(norm(r.ratio)))
    # With one repetition nothing is tested: fading everything would hide the data.
    return rgba if r.significant or repetitions < 2 or r.significant is None else _fade(rgba)


def untested(ratios: Sequence[RatioStat], repetitions: int) -> bool:
    """Whether `heatmap` hatches some cell (captions must say the same)."""
    return repetitions >= 2 and any(r.significant is None for r in ratios)


def _short(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.0f}"
