"""`tune validate --impi --autotuner`: collbench's file and Intel's autotuner against the
default on the same points, with the measurement cost of each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.store import Store
from collbench.tune.impi_autotuner import wall_time


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_the_wall_time_reader_takes_any_meta_bytes(tmp_path_factory: pytest.TempPathFactory,
                                                   data: bytes) -> None:
    root = tmp_path_factory.mktemp("store")
    (root / "launches").mkdir()
    (root / "launches" / "a.jsonl").write_text("")
    (root / "launches" / "a.meta.json").write_bytes(data)
    (root / "launches" / "b.jsonl").write_text("")
    (root / "launches" / "b.meta.json").write_text(json.dumps({"wall_s": 2.5}))
    total, count = wall_time(Store(root))
    assert math.isfinite(total) and 2.5 <= total <= 2.5 + 1e9 and count in (1, 2)


def test_an_empty_file_has_nothing_to_validate(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """What `tune --impi` writes when the default won everywhere: one line, exit 2."""
    empty = tmp_path / "tuned.json"
    empty.write_text("{}")
    assert main(["tune", "validate", "--impi", str(empty), "-n", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert "tunes no collective" in err and str(empty) in err and len(err.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.mpi
def test_the_file_and_the_autotuner_side_by_side(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A small campaign (default, preset1, preset3), its file, then one validate with the
    autotuner as a third arm: both arms measured at every size, each cost counted."""
    from tests.backend_support import private_mpi

    private_mpi("impi")  # skips where the test MPIs are not installed
    spec, res, tuned = tmp_path / "s.toml", tmp_path / "res", tmp_path / "tuned.json"
    spec.write_text('[campaign]\nname = "auto"\n[measure]\ncollectives = ["bcast"]\n'
                    'sizes = [64, 65536]\nnprocs = [2]\n'
                    'algorithms = ["default", "preset1", "preset3"]\n'
                    'iterations = 20\nwarmup = 2\n')
    assert main(["run", str(spec), "-o", str(res), "-q", "--mpi", "impi==2021.18.1"]) == 0
    assert main(["tune", str(res), "--impi", "--extrapolate", "--no-significance", "-o",
                 str(tuned)]) == 0
    capsys.readouterr()
    if json.loads(tuned.read_text()) == {}:  # the default won at both sizes (noise decides)
        assert main(["tune", "validate", "--impi", str(tuned), "-n", "2", "-q"]) == 2
        assert "tunes no collective" in capsys.readouterr().err
        # a file as tune writes one where preset 1 won: the side by side below needs a rule
        tuned.write_text(json.dumps({"coll=Bcast": {"ppn=-1": {"comm_size=-1": {
            "comm_id=-1": {"msg_size=-1": {"BCAST=1": {}}}}}}}))
    code = main(["tune", "validate", "--impi", str(tuned), "-n", "2", "--repetitions", "2",
                 "--sizes", "64,64K", "--iterations", "20", "--autotuner",
                 "--autotuner-iterations", "200", "--tuned-from", str(res), "--mpi",
                 "impi==2021.18.1", "-q"])
    assert code in (0, 1)
    out = capsys.readouterr().out
    side = out[out.index("# tune validate --autotuner"):]
    rows = [line for line in side.splitlines() if line.startswith("bcast ")]
    assert len(rows) == 2 and all("not measured" not in r and "Bcast" in r for r in rows), out
    file_s, launches = wall_time(Store(res))
    assert launches == 3 and f"{file_s:.1f} s in 3 launch(es)" in side, side
    auto = next(line for line in side.splitlines() if line.startswith("Intel's autotuner"))
    assert "s in 1 launch(es)" in auto and "200 calls a point" in auto, side
    assert (tmp_path / "tuned.json.validate.autotuner" / "autotuner.bin").is_file()
