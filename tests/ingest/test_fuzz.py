"""Any input gives parsed rows or a UserError, never another exception."""

import contextlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.errors import UserError
from collbench.ingest import ParsedFile, detect, parse
from collbench.ingest.imb import parse_imb
from collbench.ingest.osu import parse_osu
from tests.ingest import IMB, OSU, SAMPLES, read

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SAMPLE_TEXTS = sorted(read(p) for p in SAMPLES.rglob("*.txt"))
# Fragments the parsers react to, so random text reaches deep states.
TOKENS = ["# OSU MPI Broadcast Latency Test v7.4", "# OSU MPI Non-blocking Allgather "
          "Latency Test v7.4", "# Datatype: MPI_CHAR.", "# Size  Avg Latency(us)  Validation",
          "# Size Overall(us) Compute(us) Pure Comm.(us) Overlap(%)", "# P50 Tail Lat(us)",
          "Intel(R) MPI Benchmarks 2021.11, MPI-1 part", "# Benchmarking Reduce_scatter",
          "# Benchmarking Ibcast", "# #processes = 4", "# ( 2 additional processes waiting",
          "# ( 2 groups of 3 processes", "#bytes #repetitions t_min[usec] t_max[usec] "
          "t_avg[usec] defects", "Group #bytes #repetitions t[usec] Mbytes/sec",
          "#repetitions t_ovrl[usec] t_pure[usec] t_CPU[usec] overlap[%]", "out-of-mem.;",
          "time-out.;", "### cmd: x", "### rc=1", "1", "0,5", "-nan", "1e999", "Pass", "Fail",
          "99999999999999999999", "\t", "\r", "\x00", " ", "\n"]
PARSERS: list[Callable[[str, str], ParsedFile]] = [parse_osu, parse_imb, parse]


def _only_user_errors(text: str) -> None:
    for fn in PARSERS:
        try:
            parsed = fn(text, "f")
        except UserError:
            continue
        assert parsed.rows and all(isinstance(r.size_bytes, int) for r in parsed.rows)
    with contextlib.suppress(UserError):
        assert detect(text, "f") in ("osu", "imb")


@FAST
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    _only_user_errors(text)


@FAST
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=8), max_size=40)
       .map(lambda parts: " ".join(parts)))
def test_text_made_of_meaningful_fragments(text: str) -> None:
    _only_user_errors(text.replace(" \n ", "\n"))


@st.composite
def mutated_sample(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SAMPLE_TEXTS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "cut", "dup", "junk", "token", "swap"]))
        if action == "drop":
            del lines[i]
        elif action == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "junk":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.text(max_size=6)) + lines[i][pos:]
        elif action == "token":
            words = lines[i].split() or [""]
            words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(TOKENS))
            lines[i] = " ".join(words)
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return draw(st.sampled_from(["\n", "\r\n"])).join(lines)


@pytest.mark.skipif(not SAMPLE_TEXTS, reason=f"{SAMPLES} not present")
@FAST
@given(mutated_sample())
def test_mutated_real_samples(text: str) -> None:
    _only_user_errors(text)


@pytest.mark.skipif(not SAMPLE_TEXTS, reason=f"{SAMPLES} not present")
def test_every_sample_parses_or_is_refused_cleanly() -> None:
    parsed = 0
    for path in [*OSU.iterdir(), *IMB.iterdir()]:
        try:
            parse(read(path), path.name)
            parsed += 1
        except UserError as e:
            assert path.name in str(e)
    assert parsed == 26  # all but the three runs that printed no table
