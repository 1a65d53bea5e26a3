"""Results folders for notebooks: `collbench.open(path).measurements()` as a DataFrame.

Read-only: nothing here writes, locks or plans, so a notebook can look at a folder a
run is still filling. pandas is an optional dependency (`pip install collbench[notebook]`);
only `measurements()` and `samples()` need it. docs/python-api.md shows it in use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench import points as door
from collbench.errors import UserError
from collbench.plan import Plan
from collbench.records import COLUMNS, SAMPLE_COLUMNS
from collbench.spec import Spec, parse_spec
from collbench.store import Store, open_results

if TYPE_CHECKING:
    import duckdb
    import pandas

# DuckDB type -> pandas dtype: nullable integers and booleans stay integers and booleans
# when a value is missing (an ingested row has no algorithm id), never floats or objects.
_DTYPES = {"INTEGER": "Int64", "BIGINT": "Int64", "DOUBLE": "float64", "VARCHAR": "string",
           "BOOLEAN": "boolean"}


@dataclass(frozen=True)
class PlanSummary:
    """What plan.json promises, beside what the folder holds so far."""

    launches: int
    points: int
    stored_launches: int  # launches finished (ok, partial, failed or timed out)
    backend: str


class Results:
    """One results folder, read-only."""

    def __init__(self, path: str | Path) -> None:
        self.store: Store = open_results(path)
        self.path = self.store.root

    def __repr__(self) -> str:
        return f"collbench.Results({str(self.path)!r}, campaign={self.name!r})"

    @property
    def name(self) -> str:
        return str(self.store.campaign().get("name", ""))

    @property
    def campaign(self) -> dict[str, Any]:
        """campaign.json: name, seed, backend, format version, how it was made."""
        return self.store.campaign()

    @property
    def spec(self) -> Spec | None:
        """The spec the campaign ran (None for folders filled by `ingest`)."""
        if not self.store.has_spec() or self.campaign.get("kind") == "ingest":
            return None
        return parse_spec(self.store.spec_text(), str(self.store.spec_file))

    @property
    def plan(self) -> PlanSummary:
        data = self.store.plan()
        stored = len(self.store.finished())
        if "campaign" not in data:  # ingest: launches come from files, none are planned
            return PlanSummary(0, 0, stored, str(self.campaign.get("backend", "")))
        plan = Plan.from_json(data)
        return PlanSummary(len(plan.launches), plan.points_total(), stored, plan.backend)

    def measurements(self) -> pandas.DataFrame:
        """One row per stored row, columns as `collbench query` names them; the `metrics`
        JSON (tail percentiles, overlap, IMB's columns) becomes one column per key, the
        `params` JSON one column per setting (`mca.btl`, `env.X`, `swept.X`), and each row
        gets its launch's `stored_at` (UTC) and `hosts`."""
        pd = _pandas()
        frame = self._frame("measurements", COLUMNS)
        metrics = [door.metrics_of(m) for m in frame.pop("metrics")]
        for key in sorted({k for m in metrics for k in m}):
            values = [m.get(key) for m in metrics]
            numeric = all(v is None or (isinstance(v, int | float) and not isinstance(v, bool))
                          for v in values)
            self._add(frame, key, pd.array(values, dtype="float64" if numeric else "object"),
                      "metric")
        params = [_flat(door.params_of({"params": p})) for p in frame.pop("params")]
        for key in sorted({k for p in params for k in p}):
            self._add(frame, key, pd.array([p.get(key) for p in params], dtype="string"),
                      "setting")
        when, hosts = self._launches()
        ids = frame["launch_id"].tolist()
        self._add(frame, "stored_at", pd.to_datetime([when.get(str(i)) for i in ids],
                                                     unit="s", utc=True), "column")
        self._add(frame, "hosts", pd.array([hosts.get(str(i)) for i in ids], dtype="string"),
                  "column")
        return frame

    def compare(self, baseline: str = "default", stat: str = "avg",
                collective: str | None = None, nprocs: int | None = None,
                confidence: float = 0.95) -> pandas.DataFrame:
        """The table `collbench compare --format csv` prints, one row per point: its value
        (`median_<figure>`), interval, ratio to the baseline with its interval, p-values,
        significance and the recommended variant; the same arguments as compare's options."""
        from collbench.analyse import compare
        from collbench.analyse.render import _csv_rows, csv_columns

        result = compare(self.store, baseline, stat, collective, nprocs, confidence)
        return _pandas().DataFrame(_csv_rows(result), columns=csv_columns(result))

    def _add(self, frame: pandas.DataFrame, key: str, values: Any, what: str) -> None:
        if key in frame.columns:  # a metric or a setting never hides a column
            raise UserError(f"{self.path}: {what} {key!r} has the name of a column")
        frame[key] = values

    def _launches(self) -> tuple[dict[str, float], dict[str, str]]:
        """Per launch id: when its rows were stored (the file's time) and its hosts."""
        when: dict[str, float] = {}
        hosts: dict[str, str] = {}
        for rows in self.store.launch_files():
            lid = rows.name.removesuffix(".jsonl")
            try:
                when[lid] = rows.stat().st_mtime
                meta = json.loads(rows.with_name(f"{lid}.meta.json").read_text())
            except (OSError, ValueError):
                continue
            listed = meta.get("hosts") if isinstance(meta, dict) else None
            if isinstance(listed, list) and listed:
                hosts[lid] = ",".join(str(h) for h in listed)
        return when, hosts

    def points(self, stat: str = "avg") -> pandas.DataFrame:
        """One row per point (collbench.points.IDENTITY: the context is the launch's
        settings without algorithm-forcing keys, as JSON), with `n` ok repetitions and
        `median_<figure>`, the figure `stat` names pooled as `collbench compare` pools it."""
        pd = _pandas()
        rows = door.read(self.store)
        figure = door.figure_of(stat, rows, "collbench.open().points")
        data = [dict(zip(door.IDENTITY, p.key, strict=True), n=len(p.values),
                     **{f"median_{figure}": p.median if p.values else None})
                for p in door.pool(rows, figure)]
        return pd.DataFrame(data, columns=[*door.IDENTITY, "n", f"median_{figure}"])

    def samples(self) -> pandas.DataFrame:
        """Per-iteration times (runs with `samples = true`), one row per timed iteration."""
        return self._frame("samples", SAMPLE_COLUMNS)

    def _frame(self, table: str, columns: dict[str, str]) -> pandas.DataFrame:
        pd = _pandas()

        def scan(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[Any, ...]]]:
            cursor = con.execute(f"SELECT * FROM {table}")  # one of two fixed names
            return [d[0] for d in cursor.description], cursor.fetchall()

        names, rows = self.store.reading(scan)  # read again if a run rewrites the folder
        data = {name: pd.array([r[i] for r in rows],
                               dtype=_DTYPES.get(columns.get(name, ""), "object"))
                for i, name in enumerate(names)}
        return pd.DataFrame(data)


def _flat(params: dict[str, Any]) -> dict[str, str]:
    """{"mca": {"btl": "^tcp"}} -> {"mca.btl": "^tcp"}; a value that is no object stays."""
    out: dict[str, str] = {}
    for section, value in params.items():
        if isinstance(value, dict):
            out.update({f"{section}.{k}": str(v) for k, v in value.items()})
        elif value is not None:
            out[section] = str(value)
    return out


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("collbench: DataFrames need pandas: pip install "
                          "'collbench[notebook]' (or pip install pandas)") from None
    return pandas


def open(path: str | Path) -> Results:  # `collbench.open` reads like the builtin open()
    """A results folder to read; UserError when `path` holds none."""
    return Results(path)
