"""`compare --baseline COLUMN=VALUE`: which column holds the variants compared.

By default the variants are the algorithms (`--baseline default`, `--baseline ring`, or
`algorithm=ring`). Any other column can take that role: the MPI (`mpi=openmpi-5.0.11`),
the placement (`mapping=socket`), an MCA setting or environment variable of the launch
(`btl=self,vader`, `mca.pml=ob1`, `env.UCX_TLS=rc`). The rows are then rewritten so that
the compare machinery, which compares "algorithms" within a context, compares the values
of that column instead: the variant becomes the row's algorithm, and the algorithm label
moves into the context (the `params`), where the column's own value is removed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench import points
from collbench.errors import UserError, did_you_mean

ALGORITHM: Final = "algorithm"
# Row columns that may hold the variants. nprocs is not one: it is the x axis of a scaling
# study (and part of every context); compare process counts with `show` or the report.
ROW_COLUMNS: Final = ("mpi", "mpi_version", "mapping", "binding", "nodes", "ppn", "backend",
                      "source", "selection")
NOT_SET: Final = "(not set)"  # an MCA/env value a launch did not set: the MPI's own default
_PARAM_TABLES: Final = ("mca", "env")


@dataclass(frozen=True)
class Baseline:
    column: str  # "algorithm", a ROW_COLUMNS name, "mca.<key>" or "env.<key>"
    value: str

    @property
    def text(self) -> str:
        """How outputs name it: 'default' for an algorithm, else 'btl=self,vader'."""
        return self.value if self.column == ALGORITHM else f"{self.column}={self.value}"


def parse(text: str) -> tuple[str | None, str]:
    """'ring' -> (None, 'ring'); 'mpi=openmpi-5.0.11' -> ('mpi', 'openmpi-5.0.11')."""
    if "=" not in text:
        return None, text
    column, value = text.split("=", 1)
    return column.strip(), value.strip()


def mpi_label(row: dict[str, Any]) -> str | None:
    """'openmpi-5.0.11' from the mpi and mpi_version columns (either may hold the version)."""
    mpi, version = row.get("mpi"), row.get("mpi_version")
    if not mpi:
        return None
    return f"{mpi}-{version}" if version and not str(mpi).endswith(str(version)) else str(mpi)


def _params(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("params")
    data = points.context_of(raw)
    return data if data is not None else {"params": raw}


def value_of(row: dict[str, Any], column: str) -> str:
    """The row's value in `column` as text (NOT_SET for an unset MCA/env key)."""
    if column == "mpi":
        return mpi_label(row) or NOT_SET
    if column in ROW_COLUMNS:
        v = row.get(column)
        return NOT_SET if v is None else str(v)
    table, key = column.split(".", 1)
    v = (_params(row).get(table) or {}).get(key)
    return NOT_SET if v is None else str(v)


def choices(rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Every column that could hold variants, with the values present (sorted)."""
    out: dict[str, set[str]] = {ALGORITHM: set()}
    for r in rows:
        for col in ROW_COLUMNS:
            if r.get(col) is not None:
                out.setdefault(col, set()).add(value_of(r, col))
        params = _params(r)
        for table in _PARAM_TABLES:
            for key in (params.get(table) or {}):
                out.setdefault(f"{table}.{key}", set())
    for col, values in out.items():
        if "." in col:
            values.update(value_of(r, col) for r in rows)
    return {col: sorted(values) for col, values in out.items()}


def resolve(text: str, rows: Sequence[dict[str, Any]]) -> Baseline:
    """The Baseline `--baseline TEXT` names; one-line errors listing what is valid."""
    column, value = parse(text)
    if column is None or column == ALGORITHM:
        return Baseline(ALGORITHM, value)
    present = choices(rows)
    if column not in present:  # a bare MCA/env key: 'btl' for 'mca.btl'
        matches = [c for c in present if "." in c and c.split(".", 1)[1] == column]
        if len(matches) == 1:
            column = matches[0]
    if column not in present:
        names = [c for c in present if c == ALGORITHM or len(present[c]) > 1]
        raise UserError(f"collbench compare: --baseline column {column!r} is not valid; "
                        f"valid: {', '.join(names)} (columns with several values here)"
                        f"{did_you_mean(column, names)}")
    values = present[column]
    if value not in values:
        raise UserError(f"collbench compare: --baseline {column}={value!r} was not measured "
                        f"here; values of {column}: {', '.join(values)}"
                        f"{did_you_mean(value, values)}")
    if len(values) < 2:
        raise UserError(f"collbench compare: --baseline {column}={value}: {column} has only "
                        "that value here, so there is nothing to compare it with")
    return Baseline(column, value)


def several_mpis(rows: Sequence[dict[str, Any]]) -> bool:
    return len({mpi_label(r) for r in rows}) > 1


def rewrite(rows: Sequence[dict[str, Any]], baseline: Baseline,
            label: Any) -> list[dict[str, Any]]:
    """Rows (collbench.points.read) whose "algorithm" is the variant of `baseline.column`.

    `label(row)` spells the row's algorithm label; it joins the context, and the column's
    own value leaves it (and the point identity). Where several MPIs were measured and they
    are not the variants, each MPI is a context of its own: rows of two MPIs never pool."""
    by_mpi = several_mpis(rows) and baseline.column not in ("mpi", "mpi_version")
    if baseline.column == ALGORITHM and not by_mpi:
        return list(rows)
    out = []
    for r in rows:
        ctx = _context(r)
        new = dict(r)
        if by_mpi:
            ctx["mpi"] = mpi_label(r)
        if baseline.column != ALGORITHM:
            new.update(algorithm=value_of(r, baseline.column), segsize=0, fanout=0)
            ctx["algorithm"] = label(r)
            if baseline.column in ROW_COLUMNS:
                if baseline.column in ("mapping", "binding", "nodes", "ppn"):
                    new[baseline.column] = None
                elif baseline.column in ("mpi", "mpi_version"):  # the variant, not identity
                    new.update(mpi=None, mpi_version=None)
            else:
                table, key = baseline.column.split(".", 1)
                for t in (table, "swept"):  # a swept MCA value is in both tables
                    ctx[t] = {k: v for k, v in (ctx.get(t) or {}).items() if k != key}
        kept = {k: v for k, v in ctx.items() if v}
        new["context"] = json.dumps(kept, sort_keys=True) if kept else None
        out.append(new)
    return out


def _context(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("context")
    data = points.context_of(raw)
    return data if data is not None else {"params": raw}
