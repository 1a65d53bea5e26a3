"""`compare --baseline COLUMN=VALUE`: which column holds the variants compared.

By default the variants are the algorithms (`--baseline default`, `--baseline ring`, or
`algorithm=ring`). Any other column can take that role: the MPI (`mpi=openmpi-5.0.11`),
the placement (`mapping=socket`), the coll component (`component=tuned` against han), a
blocking collective against its non-blocking form (`collective=bcast` against ibcast), an
MCA setting or environment variable of the launch (`btl=self,vader`, `mca.pml=ob1`,
`env.UCX_TLS=rc`), a workload parameter (`dims=2,1,1` or `program.dims=2,1,1`) or a
non-blocking setting (`test_calls=0`). The rows are then rewritten so that the compare
machinery, which compares "algorithms" within a context, compares the values of that
column instead: the variant becomes the row's algorithm, and the algorithm label moves into
the context, where the column's own value is removed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench import points
from collbench.catalog.collectives import COLLECTIVES
from collbench.errors import UserError, did_you_mean
from collbench.records import UNKNOWN_COMPONENT

ALGORITHM: Final = "algorithm"
# Row columns that may hold the variants. nprocs is not one: it is the x axis of a scaling
# study (and part of every context); compare process counts with `show` or the report.
ROW_COLUMNS: Final = ("mpi", "mpi_version", "mapping", "binding", "nodes", "ppn", "backend",
                      "source", "selection", "component", "collective")
NOT_SET: Final = "(not set)"  # an MCA/env value a launch did not set: the MPI's own default
# Tables of the context whose keys can hold variants: MCA settings, environment variables,
# a workload's parameters, a non-blocking point's settings. "swept" repeats the swept MCA
# keys (already in "mca"); the others are what a rewrite moved into the context.
_NOT_TABLES: Final = frozenset({"swept", "algorithm", "mpi", "collective"})
# An unset MCA or environment key is a setting (the MPI's default); a workload parameter
# or non-blocking setting a row lacks means the row is another kind of measurement (bcast
# beside ibcast): it is no variant, and left out when that column is compared.
_UNSET_IS_DEFAULT: Final = ("mca", "env")
_SHOWN: Final = 4  # values listed per column in an error line


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


def blocking(collective: str) -> str:
    """'bcast' for ibcast; a blocking collective (or an unknown name) is its own."""
    c = COLLECTIVES.get(collective)
    return collective[1:] if c is not None and c.nonblocking else collective


def _tables(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The row's context tables (mca, env, program, nonblocking, ...) by name."""
    ctx = _context(row)
    return {k: v for k, v in ctx.items() if isinstance(v, dict) and k not in _NOT_TABLES}


def value_of(row: dict[str, Any], column: str) -> str:
    """The row's value in `column` as text (NOT_SET for an unset MCA/env key)."""
    if column == "mpi":
        return mpi_label(row) or NOT_SET
    if column in ROW_COLUMNS:
        v = row.get(column)
        return NOT_SET if v is None else str(v)
    table, key = column.split(".", 1)
    v = _tables(row).get(table, {}).get(key)
    return NOT_SET if v is None else str(v)


def choices(rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Every column that could hold variants, with the values present (sorted)."""
    out: dict[str, set[str]] = {ALGORITHM: set()}
    for r in rows:
        out[ALGORITHM].add(str(r.get("algorithm")))
        for col in ROW_COLUMNS:
            if r.get(col) is not None:
                out.setdefault(col, set()).add(value_of(r, col))
        for table, keys in _tables(r).items():
            for key in keys:
                out.setdefault(f"{table}.{key}", set())
    for col, values in out.items():
        if "." in col:
            values.update(v for r in rows if _counts(col, v := value_of(r, col)))
    return {col: sorted(values) for col, values in out.items()}


def _counts(column: str, value: str) -> bool:
    return value != NOT_SET or column.split(".", 1)[0] in _UNSET_IS_DEFAULT


def valid_text(present: dict[str, list[str]]) -> str:
    """What --baseline can name here, in one line: 'an algorithm (default, ring) or
    COLUMN=VALUE: mpi=openmpi-4.1.8|openmpi-5.0.11, program.dims=1,2,1|2,1,1'."""
    def some(values: Sequence[str]) -> str:
        more = len(values) - _SHOWN
        return "|".join(values[:_SHOWN]) + (f"|... ({more} more)" if more > 0 else "")

    algorithms = present.get(ALGORITHM, [])
    cols = [f"{c}={some(v)}" for c, v in present.items()
            if c != ALGORITHM and len(v) > 1 and (c != "collective" or _pairs(v))]
    head = f"an algorithm ({', '.join(algorithms)})" if algorithms else "an algorithm"
    if not cols:
        return f"{head} (no other column has several values here)"
    return f"{head} or COLUMN=VALUE with several values here: {', '.join(cols)}"


def _pairs(collectives: Sequence[str]) -> list[str]:
    """Blocking collectives measured beside their non-blocking form: ['bcast']."""
    names = set(collectives)
    return sorted(c for c in names if f"i{c}" in names and blocking(f"i{c}") == c)


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
                        f"valid: {valid_text(present)}{did_you_mean(column, names)}")
    values = present[column]
    if value not in values:
        raise UserError(f"collbench compare: --baseline {column}={value!r} was not measured "
                        f"here; values of {column}: {', '.join(values)}"
                        f"{did_you_mean(value, values)}")
    if len(values) < 2:
        raise UserError(f"collbench compare: --baseline {column}={value}: {column} has only "
                        "that value here, so there is nothing to compare it with; valid: "
                        f"{valid_text(present)}")
    if column == "collective":
        pairs = _pairs(values)
        if blocking(value) not in pairs:
            raise UserError(f"collbench compare: --baseline collective={value}: "
                            f"{blocking(value)} and i{blocking(value)} were not both "
                            "measured here, and a collective is compared only with its "
                            "non-blocking form; valid: collective="
                            f"{'|'.join(v for p in pairs for v in (p, 'i' + p)) or '(none)'}")
    return Baseline(column, value)


def several_mpis(rows: Sequence[dict[str, Any]]) -> bool:
    return len({mpi_label(r) for r in rows}) > 1


def rewrite(rows: Sequence[dict[str, Any]], baseline: Baseline,
            label: Any) -> list[dict[str, Any]]:
    """Rows (collbench.points.read) whose "algorithm" is the variant of `baseline.column`.

    `label(row)` spells the row's algorithm label; it joins the context, and the column's
    own value leaves it (and the point identity). Where several MPIs were measured and they
    are not the variants, each MPI is a context of its own: rows of two MPIs never pool."""
    column = baseline.column
    by_mpi = several_mpis(rows) and column not in ("mpi", "mpi_version")
    if column == ALGORITHM and not by_mpi:
        return list(rows)
    if column == "collective":
        pairs = set(_pairs(sorted({str(r["collective"]) for r in rows})))
        rows = [r for r in rows if blocking(str(r["collective"])) in pairs]
    if column not in ROW_COLUMNS and column != ALGORITHM:
        rows = [r for r in rows if _counts(column, value_of(r, column))]
    out = []
    for r in rows:
        ctx = _context(r)
        new = dict(r)
        if by_mpi:
            ctx["mpi"] = mpi_label(r)
        if column != ALGORITHM:
            # The component is the variant (component=) or named in the context's label:
            # the point's own label is then the variant alone.
            new.update(algorithm=value_of(r, column), segsize=0, fanout=0,
                       component=UNKNOWN_COMPONENT)
            ctx["algorithm"] = label(dict(r, component=None) if column == "component"
                                     else r)
            if column in ("mapping", "binding", "nodes", "ppn"):
                new[column] = None
            elif column in ("mpi", "mpi_version"):  # the variant, not identity
                new.update(mpi=None, mpi_version=None)
            elif column == "collective":
                new["collective"] = blocking(str(r["collective"]))
            elif column not in ROW_COLUMNS:
                table, key = column.split(".", 1)
                for t in (table, "swept"):  # a swept MCA value is in both tables
                    ctx[t] = {k: v for k, v in (ctx.get(t) or {}).items() if k != key}
        kept = {k: v for k, v in ctx.items() if v}
        new["context"] = json.dumps(kept, sort_keys=True) if kept else None
        out.append(new)
    return _share_settings(out) if column == "collective" else out


def _share_settings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocking rows copied into each non-blocking setting (test_calls, compute) measured
    beside them: `bcast` is then the baseline of every `ibcast` setting. Rows of an
    algorithm measured on one side only (bcast's pipeline, ibcast's linear) are left out:
    there is nothing to compare them with."""
    settings: dict[tuple[Any, ...], set[str]] = {}
    sides: dict[tuple[Any, ...], set[bool]] = {}
    for r in rows:
        ctx = _context(r)
        sides.setdefault(_place(r), set()).add("nonblocking" in ctx)
        if "nonblocking" in ctx:
            settings.setdefault(_place(r), set()).add(
                json.dumps(ctx["nonblocking"], sort_keys=True))
    out = []
    for r in rows:
        if len(sides[_place(r)]) < 2:
            continue
        ctx = _context(r)
        if "nonblocking" in ctx:
            out.append(r)
            continue
        for setting in sorted(settings[_place(r)]):
            data = dict(ctx, nonblocking=json.loads(setting))
            out.append(dict(r, context=json.dumps(data, sort_keys=True)))
    return out


def _place(row: dict[str, Any]) -> tuple[Any, ...]:
    """Where a setting applies: the same collective, placement, size and algorithm label."""
    ctx = {k: v for k, v in _context(row).items() if k != "nonblocking"}
    return (row["collective"], row["nprocs"], row.get("nodes"), row.get("ppn"),
            row.get("mapping"), row.get("binding"), row["size_bytes"], mpi_label(row),
            json.dumps(ctx, sort_keys=True))


def _context(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("context")
    data = points.context_of(raw)
    return data if data is not None else {"params": raw}
