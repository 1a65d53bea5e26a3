"""Plain-text, CSV and JSON rendering of result tables (lists of dicts)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.2f}" if abs(v) < 1e6 else f"{v:.4g}"
    return str(v)


def text_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(_is_num(r.get(c)) for r in rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric,
                                                                     strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(c) for c in cells])


def _is_num(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def csv_cell(v: Any) -> str:
    """A CSV cell as every command writes it, the same as `collbench export` (DuckDB):
    empty when missing, true/false, numbers in full (shortest round-trip) precision."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else "inf" if v == math.inf else \
            "-inf" if v == -math.inf else repr(v)
    return str(v)


def csv_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: csv_cell(r.get(c)) for c in columns})
    return buf.getvalue().rstrip("\n")


def json_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    return json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=1, default=str)


def render(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str) -> str:
    if fmt == "csv":
        return csv_table(rows, columns)
    if fmt == "json":
        return json_table(rows, columns)
    return text_table(rows, columns)
