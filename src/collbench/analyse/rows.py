"""The rows `compare` reads (collbench.points.read), with a one-line reason when a filter
leaves none."""

from __future__ import annotations

from typing import Any

from collbench import points
from collbench.errors import UserError, did_you_mean
from collbench.store import Store


def fetch(store: Store, collective: str | None, nprocs: int | None) -> list[dict[str, Any]]:
    rows = points.read(store, collective=collective, nprocs=nprocs)
    if not rows:
        _explain_empty(store, collective, nprocs)
    return rows


def _explain_empty(store: Store, collective: str | None, nprocs: int | None) -> None:
    present = points.present(store)
    if not present:
        raise UserError(f"{store.root}: no measurements stored yet; run `collbench run` "
                        "(or `--resume` an interrupted campaign) first")
    colls = sorted({str(c) for c, _ in present})
    if collective is not None and collective not in colls:
        raise UserError(f"{store.root}: no measurements of collective {collective!r}; "
                        f"present: {', '.join(colls)}{did_you_mean(collective, colls)}")
    counts = sorted({int(n) for c, n in present if collective in (None, c)})
    raise UserError(f"{store.root}: no measurements with nprocs={nprocs}"
                    f"{' of ' + collective if collective else ''}; present: "
                    f"{', '.join(map(str, counts))}")
