"""The page's key-value parts: the campaign summary, notices and provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collbench.analyse import Comparison
from collbench.report.data import Counts, ReportData, last_launch
from collbench.store import Store


def notices(comp: Comparison | None, counts: Counts) -> list[str]:
    if comp is None:
        bad = ", ".join(f"{s} {n}" for s, n in sorted(_by_status(counts).items()))
        return [f"No point was measured successfully (points by status: {bad}): there is "
                "nothing to compare. See `collbench show` for the errors, then rerun with "
                "`collbench run --resume --retry-failed`."]
    return [comp.notice] if comp.notice else []


def _mpi_text(mpi: Any) -> str:
    mpi = mpi if isinstance(mpi, dict) else {}
    return f"{mpi.get('implementation', '-')} {mpi.get('version', '')}".strip()


def _several(prov: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The provenance record's mpis ([measure] mpi: per MPI key, its install and kernel)."""
    mpis = prov.get("mpis")
    if not isinstance(mpis, dict):
        return {}
    return {str(k): v for k, v in mpis.items() if isinstance(v, dict)}


def summary(d: ReportData) -> list[tuple[str, str]]:
    several = _several(d.provenance)
    mpi_text = (", ".join(f"{k} ({_mpi_text(v.get('mpi'))})" for k, v in several.items())
                if several else _mpi_text(d.provenance.get("mpi")))
    rows = [("campaign", str(d.campaign.get("name", "-"))),
            ("description", str(d.campaign.get("description") or "")),
            ("MPI", mpi_text),
            ("host", str(d.provenance.get("host", "-"))),
            ("started", str(d.provenance.get("created", "-"))),
            ("last launch stored", last_launch(d.results)),
            ("launches", str(d.launches)),
            ("rows by status", ", ".join(f"{s} {n}" for s, n in
                                         sorted(_by_status(d.counts).items())))]
    if d.comp is not None:
        c = d.comp
        rows += [("points compared", str(len(c.points))),
                 ("repetitions", f"up to {c.repetitions} per point"),
                 ("statistic compared", f"{c.value_name}: median over repetitions of "
                                        f"{c.stat}"),
                 ("baseline", c.baseline_text),
                 ("confidence", f"{c.confidence:.0%} (intervals; significance at p < "
                                f"{1 - c.confidence:.3g}, Holm per size)")]
    rows.append(("raw samples", f"{d.samples:,}" if d.samples else "none stored"))
    return [(k, v) for k, v in rows if v]  # empty values would be blank rows


def provenance(campaign: dict[str, Any], prov: dict[str, Any],
               results: Path) -> list[tuple[str, str]]:
    mpi = prov.get("mpi") or {}
    kernel = prov.get("kernel") or {}
    rows = [("results folder", str(results)), ("host", prov.get("host")),
            ("CPU", prov.get("cpu_model")), ("cores", prov.get("cores")),
            ("sockets", prov.get("sockets")), ("OS", prov.get("os")),
            ("Python", prov.get("python")),
            ("collbench", prov.get("collbench_version") or campaign.get("collbench_version")),
            ("campaign seed", campaign.get("seed")), ("backend", campaign.get("backend")),
            ("spec", campaign.get("spec_source"))]
    # one MPI, or each of [measure] mpi's under its key (the top-level mpi is the first's)
    parts = {f"{k} ": (v.get("mpi") or {}, v.get("kernel") or {})
             for k, v in _several(prov).items()} or {"": (mpi, kernel)}
    for key, (one, build) in parts.items():
        rows += [(f"MPI {key}{k}", v) for k, v in _mpi_first(one)]
        rows += [(f"kernel {key}{k}", v) for k, v in sorted(build.items())]
    dump = Store(results).mpi_info_dump()
    if dump is not None:
        rows.append(("MPI parameter dump", f"{dump.name} in the results folder"))
    return [(k, _text(v)) for k, v in rows if v not in (None, "", {}, [])]


def _mpi_first(mpi: dict[str, Any]) -> list[tuple[str, Any]]:
    first = ("implementation", "version")  # then the paths, alphabetically
    return sorted(mpi.items(), key=lambda kv: (kv[0] not in first, first.index(kv[0])
                                               if kv[0] in first else 0, kv[0]))


def _by_status(counts: Counts) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, status), n in counts.items():
        out[status] = out.get(status, 0) + n
    return out


def _text(v: Any) -> str:
    # Provenance values may be nested (lists, dicts): JSON keeps them readable and stable.
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
