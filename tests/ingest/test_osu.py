"""OSU text output: every real sample, older formats, malformed and locale variants."""

import re

import pytest

from collbench.errors import UserError
from collbench.ingest import detect
from collbench.ingest.osu import parse_osu
from tests.ingest import OSU, needs_samples, read

# file -> (collective, rows, (first size, avg, min, max, iterations), (last size, avg))
SAMPLES = {
    "osu_allreduce_np2.txt": ("allreduce", 21, (1, 0.35, 0.32, 0.37, 1000), (1048576, 190.93)),
    "osu_allreduce_np4.txt": ("allreduce", 21, (1, 4.32, 3.58, 5.52, 1000), (1048576, 600.97)),
    "osu_bcast_alg1_np2.txt": ("bcast", 21, (1, 0.40, 0.07, 0.74, 1000), (1048576, 86.31)),
    "osu_bcast_alg1_np4.txt": ("bcast", 21, (1, 0.26, 0.08, 0.41, 1000), (1048576, 179.41)),
    "osu_bcast_alg6_np2.txt": ("bcast", 21, (1, 0.39, 0.12, 0.67, 1000), (1048576, 54.40)),
    "osu_bcast_alg6_np4.txt": ("bcast", 21, (1, 0.42, 0.11, 1.27, 1000), (1048576, 220.25)),
    "osu_bcast_alg9_np2.txt": ("bcast", 21, (1, 0.31, 0.07, 0.55, 1000), (1048576, 111.00)),
    "osu_bcast_alg9_np4.txt": ("bcast", 21, (1, 0.22, 0.14, 0.33, 1000), (1048576, 254.29)),
    "osu_bcast_np2.txt": ("bcast", 21, (1, 0.33, 0.06, 0.59, 1000), (1048576, 54.65)),
    "osu_bcast_np4.txt": ("bcast", 21, (1, 0.36, 0.13, 0.96, 1000), (1048576, 208.25)),
    "osu_bcast_tail_np4.txt": ("bcast", 21, (1, 0.55, 0.09, 1.83, 1000), (1048576, 203.48)),
    "osu_gather_np2.txt": ("gather", 21, (1, 0.53, 0.24, 0.82, 1000), (1048576, 127.74)),
    "osu_gather_np4.txt": ("gather", 21, (1, 1.83, 0.08, 5.45, 1000), (1048576, 253.34)),
    "osu_scatter_np2.txt": ("scatter", 21, (1, 0.43, 0.07, 0.80, 1000), (1048576, 90.00)),
    "osu_scatter_np4.txt": ("scatter", 21, (1, 0.57, 0.08, 1.73, 1000), (1048576, 312.66)),
    "osu_allreduce_validate_np4.txt": ("allreduce", 5, (1, 2.45, 1.64, 3.16, 1000), (16, None)),
    "osu_allreduce_validate_np2.txt": ("allreduce", 5, (1, 0.36, None, None, None), (16, None)),
    "osu_allreduce_validate_int_np4.txt": ("allreduce", 15, (4, 2.60, None, None, None),
                                           (65536, 44.65)),
    "osu_bcast_validate_np4.txt": ("bcast", 17, (1, 0.29, None, None, None), (65536, 6.16)),
    "osu_bcast_alg42_invalid_np4.txt": ("bcast", 4, (1, 0.73, None, None, None), (8, 0.65)),
    "osu_latency_np2.txt": ("latency", 21, (1, 0.28, None, None, None), (1048576, 60.22)),
    "osu_bw_np2.txt": ("bw", 21, (1, None, None, None, None), (1048576, None)),
    "osu_iallgather_np2.txt": ("iallgather", 21, (1, 0.50, 0.47, 0.53, None), (1048576, 189.08)),
    "osu_iallgather_np4.txt": ("iallgather", 21, (1, 3.28, 2.72, 4.55, None), (1048576, 859.19)),
}
FAILED_RUNS = {  # the suite refused to run: no table at all
    "osu_latency_np4.txt": "This test requires exactly two processes",
    "osu_bw_np4.txt": "This test requires exactly two processes",
    "osu_latency_with_f_np2.txt": "Invalid option [-f]",
}


@needs_samples
def test_the_table_covers_every_sample() -> None:
    assert {p.name for p in OSU.iterdir()} == set(SAMPLES) | set(FAILED_RUNS)


@needs_samples
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_real_samples(name: str) -> None:
    coll, count, (size, avg, mn, mx, iters), (last_size, last_avg) = SAMPLES[name]
    text = read(OSU / name)
    assert detect(text, name) == "osu"
    parsed = parse_osu(text, name)
    assert parsed.kind == "osu" and parsed.version == "7.4"
    assert len(parsed.rows) == count
    first, last = parsed.rows[0], parsed.rows[-1]
    assert {r.collective for r in parsed.rows} == {coll}
    assert (first.size_bytes, first.avg_us, first.min_us, first.max_us, first.iterations) == (
        size, avg, mn, mx, iters)
    assert (last.size_bytes, last.avg_us) == (last_size, last_avg)
    assert all(r.datatype in ("MPI_CHAR", "MPI_INT") and r.nprocs is None for r in parsed.rows)


@needs_samples
@pytest.mark.parametrize("name", sorted(FAILED_RUNS))
def test_failed_runs_say_what_the_file_holds(name: str) -> None:
    expected = f"{name}: not OSU output: .*{re.escape(FAILED_RUNS[name])}"
    with pytest.raises(UserError, match=expected):
        parse_osu(read(OSU / name), name)


@needs_samples
def test_recorder_lines_are_kept_apart() -> None:
    parsed = parse_osu(read(OSU / "osu_bcast_alg6_np2.txt"), "f")
    assert parsed.command is not None and "coll_tuned_bcast_algorithm 6" in parsed.command
    assert parsed.header["recorded_rc"] == "0"
    assert parsed.header["title"] == "OSU MPI Broadcast Latency Test v7.4"
    no_cmd = parse_osu(read(OSU / "osu_bcast_validate_np4.txt"), "f")
    assert no_cmd.command is None


@needs_samples
def test_validation_fail_is_invalid_not_a_latency() -> None:
    parsed = parse_osu(read(OSU / "osu_allreduce_validate_np4.txt"), "f")
    assert [r.validated for r in parsed.rows] == [True, True, True, True, False]
    bad = parsed.rows[-1]
    assert (bad.status, bad.size_bytes, bad.avg_us, bad.min_us, bad.max_us) == (
        "invalid", 16, None, None, None)
    assert bad.iterations == 1000 and bad.error and "Fail" in bad.error


@needs_samples
def test_tail_latencies_go_to_metrics_and_p50_is_the_median() -> None:
    last = parse_osu(read(OSU / "osu_bcast_tail_np4.txt"), "f").rows[-1]
    assert last.metrics == {"p50_us": 195.01, "p90_us": 215.13, "p99_us": 283.01}
    assert last.median_us == 195.01


@needs_samples
def test_nonblocking_columns() -> None:
    rows = parse_osu(read(OSU / "osu_iallgather_np2.txt"), "f").rows
    r128 = next(r for r in rows if r.size_bytes == 128)
    assert r128.metrics == {"overall_us": 1.75, "compute_us": 1.10, "init_us": 0.24,
                            "test_us": 0.0, "wait_us": 0.28, "pure_us": 0.66,
                            "min_comm_us": 0.65, "max_comm_us": 0.67, "overlap_pct": 1.63}
    assert (r128.avg_us, r128.min_us, r128.max_us) == (0.66, 0.65, 0.67)


@needs_samples
def test_bandwidth_and_latency() -> None:
    bw = parse_osu(read(OSU / "osu_bw_np2.txt"), "f").rows
    assert (bw[0].bandwidth_mbs, bw[-1].bandwidth_mbs, bw[0].avg_us) == (12.53, 19483.48, None)


@needs_samples
def test_warnings_before_the_title_and_a_nul_byte_are_skipped() -> None:
    parsed = parse_osu(read(OSU / "osu_bcast_alg42_invalid_np4.txt"), "f")
    assert [r.size_bytes for r in parsed.rows] == [1, 2, 4, 8]
    assert parsed.header["recorded_rc"] == "0"


# --- formats of other versions and options (synthetic, from OSU's print functions) ----
BCAST = """\
# OSU MPI Broadcast Latency Test v7.4
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
1                       0.33              0.06              0.59        1000
2                       0.33              0.06              0.59        1000
4                       0.33              0.06              0.59        1000
"""


def test_locale_and_whitespace_variants() -> None:
    text = ("### cmd: mpirun osu_bcast -f\r\n\r\n# OSU MPI Broadcast Latency Test v7.4\r\n"
            "# Size\tAvg Latency(us)\tMin Latency(us)\tMax Latency(us)\tIterations  \r\n"
            "1\t0,35\t\t3.2e-01 \t1.2E+00\t1000   \r\n"
            "  2    1,5e+03   +1.0   2.   100\r\n"
            "### rc=0 wall=1s\r\n")
    rows = parse_osu(text, "f").rows
    assert [(r.size_bytes, r.avg_us, r.min_us, r.max_us, r.iterations) for r in rows] == [
        (1, 0.35, 0.32, 1.2, 1000), (2, 1500.0, 1.0, 2.0, 100)]


def test_osu5_formats() -> None:
    latency = "# OSU MPI Latency Test v5.6.3\n# Size          Latency (us)\n0   0.25\n8   0.26\n"
    assert [r.avg_us for r in parse_osu(latency, "f").rows] == [0.25, 0.26]
    nbc = ("# OSU MPI Non-Blocking Broadcast Latency Test v5.6.3\n"
           "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n"
           "# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n"
           "1                       4.06              2.42              1.96             16.31\n")
    (row,) = parse_osu(nbc, "f").rows
    assert row.collective == "ibcast" and row.avg_us == 1.96 and row.min_us is None
    assert row.metrics == {"overall_us": 4.06, "compute_us": 2.42, "pure_us": 1.96,
                           "overlap_pct": 16.31}


def test_barrier_has_no_size_column() -> None:
    text = ("# OSU MPI Barrier Latency Test v7.4\n"
            "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
            "             1.25              1.00              1.50        1000\n")
    (row,) = parse_osu(text, "f").rows
    assert (row.collective, row.size_bytes, row.avg_us, row.iterations) == (
        "barrier", 0, 1.25, 1000)


def test_several_datatypes_in_one_file() -> None:
    text = BCAST + "\n# Datatype: MPI_INT.\n# Size       Avg Latency(us)\n4   0.5\n"
    rows = parse_osu(text, "f").rows
    assert [(r.size_bytes, r.datatype) for r in rows] == [
        (1, "MPI_CHAR"), (2, "MPI_CHAR"), (4, "MPI_CHAR"), (4, "MPI_INT")]
    assert rows[-1].min_us is None


def test_titles_across_spellings() -> None:
    for title, name in (("Non-blocking All-to-All Personalized ExchangeLatency Test", "ialltoall"),
                        ("All-to-Allv Personalized Exchange Latency Test", "alltoallv"),
                        ("Reduce_scatter_block Latency Test", "reduce_scatter_block"),
                        ("Bi-Directional Bandwidth Test", "bibw"),
                        ("Allreduce Persistent Latency Test", "allreduce_persistent")):
        text = f"# OSU MPI-CUDA {title} v7.4\n# Size  Avg Latency(us)\n8  1.0\n"
        parsed = parse_osu(text, "f")
        assert parsed.rows[0].collective == name
        assert parsed.header["accel"] == "CUDA"


def test_nan_in_a_figure_is_no_figure() -> None:
    text = ("# OSU MPI Non-blocking Barrier Latency Test v7.4\n"
            "# Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n"
            "   0.00   0.00   0.00   -nan\n")
    (row,) = parse_osu(text, "f").rows
    assert "overlap_pct" not in row.metrics and row.avg_us == 0.0


# --- the collective: title, --collective ----------------------------------------------
def test_collective_given_must_agree_with_the_title() -> None:
    assert parse_osu(BCAST, "f", "bcast").rows[0].collective == "bcast"
    with pytest.raises(UserError, match=r"^f:1: the title says bcast .* --collective is allreduce"):
        parse_osu(BCAST, "f", "allreduce")


def test_unknown_title_needs_collective() -> None:
    text = BCAST.replace("Broadcast Latency", "Fancy Broadcast Latency")
    with pytest.raises(UserError, match=r"^f:1: unknown OSU benchmark .*give --collective"):
        parse_osu(text, "f")
    assert parse_osu(text, "f", "bcast").rows[0].collective == "bcast"


def test_table_without_title_needs_collective() -> None:
    text = "\n".join(BCAST.splitlines()[2:]) + "\n"
    with pytest.raises(UserError, match=r"^f:1: no '# OSU MPI ... Test' title"):
        parse_osu(text, "f")
    assert len(parse_osu(text, "f", "bcast").rows) == 3


def test_other_osu_apis_are_refused() -> None:
    with pytest.raises(UserError, match=r"^f:1: OSU OpenSHMEM benchmarks are not supported"):
        parse_osu("# OSU OpenSHMEM Put Test v7.4\n# Size Avg Latency(us)\n1 1\n", "f")


# --- malformed files: the file, the line, what was expected ---------------------------
@pytest.mark.parametrize(("line", "message"), [
    ("2    0.33   0.06\n", r"^f:5: expected 5 columns \(Size Avg Min Max Iterations\), got 3$"),
    ("2    0.33   0.06   0.59  1000  7\n", r"^f:5: expected 5 columns .*, got 6$"),
    ("2    abc    0.06   0.59  1000\n", r"^f:5: Avg: expected a number, got 'abc'$"),
    ("2    0.33   0.06   0.59  1e3\n", r"^f:5: Iterations: expected a whole number, got '1e3'$"),
    ("2.5  0.33   0.06   0.59  1000\n", r"^f:5: Size: expected a whole number, got '2.5'$"),
    ("2    1,234.5 0.06  0.59  1000\n", r"^f:5: Avg: expected a number, got '1,234.5'$"),
    ("99999999999999999999 1 1 1 1\n", r"^f:5: Size: expected a whole number"),
    ("2    0.33   0.06   0.59  9999999999\n", r"^f:5: Iterations: 9999999999 is out of range"),
])
def test_malformed_lines(line: str, message: str) -> None:
    lines = BCAST.splitlines(keepends=True)
    text = "".join(lines[:4]) + line + "".join(lines[5:])
    with pytest.raises(UserError, match=message):
        parse_osu(text, "f")


def test_validation_column_must_say_pass_or_fail() -> None:
    text = ("# OSU MPI Bcast Latency Test v7.4\n# Size  Avg Latency(us)  Validation\n"
            "1  0.3  Maybe\n")
    with pytest.raises(UserError, match=r"^f:1: unknown OSU benchmark"):
        parse_osu(text, "f")
    with pytest.raises(UserError, match=r"^f:3: Validation: expected Pass or Fail, got 'Maybe'"):
        parse_osu(text, "f", "bcast")


def test_data_before_the_column_header() -> None:
    text = "# OSU MPI Broadcast Latency Test v7.4\n1  0.33\n"
    with pytest.raises(UserError, match=r"^f:2: data line before the column header"):
        parse_osu(text, "f")


def test_truncated_file_and_empty_files() -> None:
    with pytest.raises(UserError, match=r"^f: no results below the OSU header"):
        parse_osu("".join(BCAST.splitlines(keepends=True)[:3]), "f")
    with pytest.raises(UserError, match=r"^f: not OSU output: .*\(the file is empty\)"):
        parse_osu("", "f")
    with pytest.raises(UserError, match=r"^f: not OSU output"):
        parse_osu("\x00\x01\xff\ufffd garbage\n\x7f", "f")
