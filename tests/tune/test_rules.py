"""The rules-file reader, writer and checks, without running MPI."""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.catalog.algorithms import Catalog
from collbench.catalog.openmpi import fallback
from collbench.cli import main
from collbench.store import Store
from collbench.tune.check import check, supports_header
from collbench.tune.rules import _Stream, format_rules, parse_rules
from collbench.tune.select import Options, select
from collbench.tune.writer import build, choose_version

CATALOG = Catalog("openmpi", "5.0.11", "test", fallback())

GOOD = """\
rule-file-version-2
2
7
1
4
3
0      6 0 0     0
8192   3 0 32768 0
262144 2 4 0     0
9
1
4
2
0     2 0 0    0
65536 3 0 1024 0
"""


def problems(text: str, catalog: Catalog = CATALOG, tmp: Path | None = None) -> list[tuple[
        str, int, str]]:
    path = (tmp or Path("/tmp")) / f"t{random.randrange(10**9)}.rules"
    path.write_text(text)
    try:
        return [(p.severity, p.line, p.field) for p in check(path, catalog).reading.problems]
    finally:
        path.unlink()


def test_a_good_file_has_no_problem_and_reads_every_field() -> None:
    reading = parse_rules(GOOD)
    assert reading.problems == [] and reading.rules is not None
    bcast, gather = reading.rules.collectives
    assert (bcast.coll_id, bcast.name, gather.name) == (7, "bcast", "gather")
    rules = bcast.comms[0].rules
    assert [(r.size, r.alg, r.faninout, r.segsize, r.max_requests, r.line) for r in rules] == [
        (0, 6, 0, 0, 0, 7), (8192, 3, 0, 32768, 0, 8), (262144, 2, 4, 0, 0, 9)]
    assert problems(GOOD) == []


@pytest.mark.parametrize(("text", "expected"), [
    # first rule not at message size 0
    (GOOD.replace("0      6 0 0     0", "1      6 0 0     0"), ("rejected", 7, "MSGSIZE")),
    # anything before the header: a comment, a blank line, a space
    ("# tuned\n" + GOOD, ("rejected", 2, "NCOL")),
    ("\n" + GOOD, ("rejected", 2, "NCOL")),
    (" " + GOOD, ("rejected", 1, "NCOL")),
    # counts announcing more entries than the file holds
    (GOOD.replace("2\n7\n", "3\n7\n", 1), ("rejected", 16, "COLID")),
    (GOOD.replace("\n3\n0 ", "\n4\n0 ", 1), ("misread", 10, "MSGSIZE")),
    # unknown collective id, too many collectives, a negative number
    (GOOD.replace("\n9\n", "\n22\n"), ("rejected", 10, "COLID")),
    ("23\n", ("rejected", 1, "NCOL")),
    (GOOD.replace("8192   3", "8192   -3"), ("rejected", 8, "ALG")),
])
def test_what_open_mpi_drops_silently_is_reported_with_its_line(
        text: str, expected: tuple[str, int, str], tmp_path: Path) -> None:
    assert expected in problems(text, tmp=tmp_path)
    if expected[0] == "rejected":
        assert parse_rules(text).rules is None


def test_a_comment_before_the_header_is_explained(tmp_path: Path) -> None:
    reading = parse_rules("# tuned\n" + GOOD)
    assert reading.rules is None
    assert any(p.field == "header" and "first bytes" in p.message for p in reading.problems)
    # Open MPI reads the header's "-2" as the number of collectives
    assert reading.tokens[0].value == -2


@pytest.mark.parametrize(("text", "expected"), [
    # counts announcing fewer entries than the file holds: the rest is never read
    (GOOD.replace("2\n7\n", "1\n7\n", 1), ("misread", 10, "NCOL")),
    (GOOD.replace("\n3\n0 ", "\n2\n0 ", 1), ("rejected", 9, "COLID")),
    # algorithm ids the MPI in use does not have; a collective without tuned algorithms
    (GOOD.replace("8192   3", "8192   42"), ("misread", 8, "ALG")),
    (GOOD.replace("\n9\n", "\n5\n"), ("misread", 10, "COLID")),
    # message sizes and communicator sizes that do not increase
    (GOOD.replace("262144 2", "4096   2"), ("misread", 9, "MSGSIZE")),
    (GOOD.replace("2\n7\n1\n4\n3\n", "2\n7\n2\n8\n1\n0 6 0 0 0\n4\n3\n"),
     ("misread", 8, "COMSIZE")),
    # the same collective twice: the later set replaces the earlier one
    (GOOD.replace("\n9\n", "\n7\n"), ("misread", 10, "COLID")),
])
def test_what_open_mpi_ignores_or_misreads_is_reported(
        text: str, expected: tuple[str, int, str], tmp_path: Path) -> None:
    got = problems(text, tmp=tmp_path)
    assert expected in got, got


def test_max_requests_without_version_2_is_read_as_the_next_rule(tmp_path: Path) -> None:
    text = GOOD.removeprefix("rule-file-version-2\n")
    reading = parse_rules(text)
    assert reading.rules is None or reading.problems  # misaligned: never silently fine
    hint = [p for p in reading.problems if "rule-file-version-2" in p.message]
    assert hint and hint[0].line == 6


def test_header_is_rejected_by_open_mpi_releases_before_it(tmp_path: Path) -> None:
    old = Catalog("openmpi", "5.0.6", "test", fallback())
    assert ("rejected", 1, "header") in problems(GOOD, old, tmp_path)
    classic = "1\n7\n1\n4\n2\n0 6 0 0\n8192 3 0 32768\n"
    assert problems(classic, old, tmp_path) == []
    assert [supports_header(v) for v in ("4.1.7", "4.1.8", "5.0.6", "5.0.7", "6.0.0")] == [
        False, True, False, True, True]


def test_numbers_are_read_like_fscanf_li() -> None:
    # octal, hex, "0x" without digits, a lone sign, text glued to numbers, a comment
    text = "rule-file-version-2 # v\n010 0x1F 0x 7 - 4 -x 3 12abc 1e5 #9\n08"
    s = _Stream(text.encode())
    assert s.header() == 2
    values = []
    while (got := s.next_long()) is not None:
        values.append(got[0])
    assert values == [8, 31, 0, 7, 4, 3, 12, 1, 5, 0, 8]


_HARNESS = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "r"); long v; char t; int version, rc;
    if (1 != fscanf(f, "rule-file-version-%d", &version)) version = 1;
    printf("version %d\n", version);
    for (;;) {
        rc = fscanf(f, "%li", &v);
        if (rc == EOF) break;
        if (rc == 1) { printf("val %ld\n", v); continue; }
        if (fread(&t, 1, 1, f) != 1) break;
        if (t == '#') { int c; while ((c = fgetc(f)) != EOF && c != '\n'); }
    }
    return 0;
}
"""


def test_the_reader_agrees_with_glibc_fscanf(tmp_path: Path) -> None:
    """The reading loop of ompi_coll_base_file_getnext_long, in C, on random inputs."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "h.c").write_text(_HARNESS)
    subprocess.run([cc, "-o", str(tmp_path / "h"), str(tmp_path / "h.c")], check=True)
    rng = random.Random(7)
    alphabet = b"0123456789xXabf+-# \n\t.rule-fiversion"
    for _ in range(300):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        if rng.random() < 0.3:
            data = b"rule-file-version-" + data
        (tmp_path / "in").write_bytes(data)
        out = subprocess.run([str(tmp_path / "h"), str(tmp_path / "in")], capture_output=True,
                             text=True, check=True).stdout.splitlines()
        s = _Stream(data)
        version = s.header()
        mine = [f"version {1 if version is None else version}"]
        while (got := s.next_long()) is not None:
            mine.append(f"val {got[0]}")
        assert mine == out, data


# --- from measurements to a file ------------------------------------------------------------

def test_tune_writes_thresholds_where_the_winner_changes(
        bcast_store: Callable[..., Store], tmp_path: Path) -> None:
    sel = select(bcast_store())
    assert sel.tested and sel.repetitions == 6
    for n in (2, 4):
        assert [(c.threshold, c.algorithm, c.algorithm_id) for c in sel.tables[("bcast", n)]] \
            == [(0, "binomial", 6), (8192, "pipeline", 3)]
    written = build(sel, version=2, source="res")
    reading = parse_rules(written.text)
    assert reading.problems == [] and reading.rules == written.rules
    assert format_rules(reading.rules) == written.text  # exact round trip
    (bcast,) = reading.rules.collectives
    # the measured sets, then Open MPI's fixed decision beyond the largest measured np
    assert [c.comm_size for c in bcast.comms] == [2, 4, 5]
    assert [(r.size, r.alg) for r in bcast.comms[-1].rules] == [(0, 0)]
    assert "not measured (np >= 5)" in bcast.comms[-1].comment
    assert [(r.size, r.alg) for r in bcast.comms[1].rules] == [(0, 6), (8192, 3)]


def test_gather_thresholds_count_total_bytes(bcast_store: Callable[..., Store]) -> None:
    sel = select(bcast_store(collectives=("gather",), nprocs=(4,)))
    written = build(sel, version=None, source="res")
    assert written.rules.version is None and "rule-file-version" not in written.text
    (gather,) = written.rules.collectives
    assert gather.coll_id == 9
    # per rank 8 KiB x 4 ranks: Open MPI counts the whole gathered buffer
    assert [c.comm_size for c in gather.comms] == [2, 4, 5]  # measured at 4 only
    assert [r.size for r in gather.comms[1].rules] == [0, 4 * 8192]
    assert all(r.max_requests is None for r in gather.comms[0].rules)


def test_one_repetition_is_refused_unless_asked(bcast_store: Callable[..., Store],
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    store = bcast_store(repetitions=1)
    out = tmp_path / "t.rules"
    assert main(["tune", str(store.root), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 repetition" in err and "--no-significance" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["tune", str(store.root), "-o", str(out), "--no-significance"]) == 0
    captured = capsys.readouterr()
    assert "untested" in captured.err and "NOT tested" in out.read_text()


def test_no_switch_without_a_significant_gain(bcast_store: Callable[..., Store]) -> None:
    sel = select(bcast_store(), Options(min_gain=0.5))  # 1.5x slower default = 0.67x ratio
    assert sel.switches() == 0
    written = build(sel, version=2, source="res")
    (bcast,) = written.rules.collectives  # measured, and Open MPI's choice kept everywhere
    assert [[(r.size, r.alg) for r in c.rules] for c in bcast.comms] == [[(0, 0)]] * 3
    assert parse_rules(written.text).problems == []


def test_tune_cli_prints_how_to_activate_the_file(bcast_store: Callable[..., Store],
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = bcast_store()
    out = tmp_path / "tuned.rules"
    assert main(["tune", str(store.root), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"--mca coll_tuned_dynamic_rules_filename {out.resolve()}" in text
    assert "OMPI_MCA_coll_tuned_use_dynamic_rules=1" in text
    assert out.read_text().startswith("rule-file-version-2\n")
    assert main(["rules", "check", str(out)]) == 0
    assert "OK" in capsys.readouterr().out
    assert choose_version("5.0.6", "auto") is None and choose_version("5.0.7", "auto") == 2


def test_rules_check_exit_codes_and_one_line_errors(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.rules"
    bad.write_text("# tuned\n" + GOOD)
    assert main(["rules", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:2: rejected: NCOL:" in out and "REJECTED" in out
    assert main(["rules", "check", str(tmp_path / "missing.rules")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.rules" in err and "Traceback" not in err
    assert main(["tune", str(tmp_path / "nothing"), "-o", str(tmp_path / "x")]) == 2
