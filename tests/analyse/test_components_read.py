"""Readers across the component column (rows format 3): a format-2 baseline (component
unknown) still matches new rows in `regress` and `compare --against`, and a folder with two
components for one point is refused by the readers that keep one (docs/components.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.analyse.against import read_points
from collbench.analyse.regress import regress
from collbench.errors import UserError
from collbench.store import Store
from tests.analyse.test_regress import SIZES, folder


def test_an_old_baseline_without_components_matches_new_rows(tmp_path: Path) -> None:
    old = folder(tmp_path / "old")  # rows without component: read as unknown
    new = folder(tmp_path / "new", slow={1024: 1.30}, component="tuned")
    r = regress(Store(old), Store(new), threshold=0.05)
    assert len(r.changes) == 2 * len(SIZES)
    assert [(c.algorithm, c.size_bytes) for c in r.regressions] == [("default", 1024)]
    assert len(read_points(Store(old))) == len(read_points(Store(new))) == 2 * len(SIZES)


def test_two_components_for_one_point_are_refused_not_merged(tmp_path: Path) -> None:
    mixed = folder(tmp_path / "mixed", component="han")
    store = Store(mixed)
    rows = [json.loads(line) for f in store.launch_files() for line in f.read_text().splitlines()]
    store.write_launch("other", [{**r, "launch_id": "other", "component": "tuned"}
                                 for r in rows], {"status": "ok"})
    with pytest.raises(UserError) as e:
        read_points(store)
    assert "coll component" in str(e.value) and "han, tuned" in str(e.value)
