"""Non-blocking collectives in the analyses: their figures and settings, read from `metrics`.

A non-blocking row (ibcast, ..., measured or ingested) keeps OSU's columns in its metrics
JSON (overall_us, compute_us, init_us, test_us, wait_us, pure_us, min/max_comm_us,
overlap_pct, ...) and the settings it was measured with (test_calls, compute). Points with
other settings are other experiments: `setting` turns them into part of the context that
`compare`, `show` and the report group by. docs/nonblocking.md defines every figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from collbench.points import SETTING_KEYS, metrics_of

# Figures `show` prints for non-blocking rows (means over ok repetitions).
SHOW_FIGURES: Final = ("overall_us", "compute_us", "test_us", "wait_us", "pure_us",
                       "overlap_pct", "max_hidden_pct")
# Figures of overlap that SimGrid cannot give: SMPI's network progresses on its own, so a
# compute as long as the communication hides all of it (100 %) whatever the MPI would do.
NOT_MODELLED: Final = frozenset({"overlap_pct", "overlap_raw_pct", "overlap_imb_pct",
                                 "max_hidden_pct", "max_hidden_us"})
NOT_MODELLED_NOTE: Final = "not modelled under SimGrid (it does not model MPI progress)"


def parse_metrics(metrics: str | None) -> dict[str, Any]:
    """The metrics JSON of a row as a dict ({} when absent or not an object)."""
    return metrics_of(metrics)


def setting(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """{test_calls, compute} of a non-blocking row, the keys it has; {} for the others."""
    return {k: metrics[k] for k in SETTING_KEYS if metrics.get(k) is not None}


def setting_label(metrics: Mapping[str, Any]) -> str:
    """'test_calls=25 compute=auto' ('' for a blocking row)."""
    return " ".join(f"{k}={v}" for k, v in setting(metrics).items())


def figure(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None
