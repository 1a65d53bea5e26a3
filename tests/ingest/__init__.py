"""Shared paths of the ingest tests: real OSU 7.4 / IMB 2021.11 outputs (copied from
../shared/samples so the tests are hermetic)."""

from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
OSU = SAMPLES / "osu-7.4"
IMB = SAMPLES / "imb-2021.11"

# The samples are part of the repository: a missing folder is a broken checkout, not a skip.
needs_samples = pytest.mark.skipif(False, reason="samples are in the repository")


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")
