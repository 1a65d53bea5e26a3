"""IMB text output: the real IMB-MPI1 samples, IMB-NBC, sizes, failures, malformed files."""

from collections import Counter

import pytest

from collbench.errors import UserError
from collbench.ingest import detect
from collbench.ingest.imb import parse_imb
from tests.ingest import IMB, OSU, needs_samples, read


@needs_samples
def test_np2_sample() -> None:
    text = read(IMB / "IMB-MPI1_np2.txt")
    assert detect(text, "f") == "imb"
    parsed = parse_imb(text, "f")
    assert (parsed.kind, parsed.version, parsed.world_nprocs) == ("imb", "2021.11", 2)
    assert Counter((r.collective, r.nprocs) for r in parsed.rows) == {
        ("latency", 2): 24, ("bcast", 2): 24, ("gather", 2): 24, ("allreduce", 2): 22}
    ping = [r for r in parsed.rows if r.collective == "latency"]
    assert (ping[1].size_bytes, ping[1].avg_us, ping[1].bandwidth_mbs, ping[1].iterations) == (
        1, 0.24, 4.21, 1000)
    assert (ping[-1].size_bytes, ping[-1].avg_us, ping[-1].iterations) == (4194304, 383.93, 10)
    assert ping[0].min_us is None and ping[0].max_us is None
    gather = [r for r in parsed.rows if r.collective == "gather"]
    last = gather[-1]
    assert (last.size_bytes, last.min_us, last.max_us, last.avg_us) == (
        4194304, 435.76, 733.70, 584.73)
    assert parsed.header["MPI Version"] == "3.1"
    assert parsed.header["MPI_Datatype for reductions"] == "MPI_FLOAT"
    assert parsed.header["suite"] == "IMB-MPI1"
    assert parsed.header["Calling sequence"] == "IMB-MPI1 PingPong Bcast Gather Allreduce"
    assert parsed.command is not None and parsed.command.startswith("mpirun")


@needs_samples
def test_np4_sample_has_two_process_counts_and_idle_ranks() -> None:
    parsed = parse_imb(read(IMB / "IMB-MPI1_np4.txt"), "f")
    assert parsed.world_nprocs == 4
    assert Counter((r.collective, r.nprocs) for r in parsed.rows) == {
        ("latency", 2): 24, ("bcast", 2): 24, ("bcast", 4): 24, ("gather", 2): 24,
        ("gather", 4): 24, ("allreduce", 2): 22, ("allreduce", 4): 22}
    b4 = [r for r in parsed.rows if r.collective == "bcast" and r.nprocs == 4]
    assert (b4[-1].min_us, b4[-1].max_us, b4[-1].avg_us) == (474.85, 1353.10, 928.24)
    assert parsed.rows[-1].collective == "allreduce" and parsed.rows[-1].size_bytes == 4194304


@needs_samples
def test_osu_file_read_as_imb_is_refused() -> None:
    with pytest.raises(UserError, match=r"^f: not IMB output: .*starts with '# OSU MPI Broad"):
        parse_imb(read(OSU / "osu_bcast_np2.txt"), "f")


HEAD = """\
#----------------------------------------------------------------
#    Intel(R) MPI Benchmarks {version}, {part} part
#----------------------------------------------------------------
# MPI Version           : 3.1
"""


def _block(name: str, np: int, header: str, *rows: str, waiting: int = 0) -> str:
    idle = f"# ( {waiting} additional processes waiting in MPI_Barrier)\n" if waiting else ""
    body = "".join(f"    {r}\n" for r in rows)
    return (f"\n#-----\n# Benchmarking {name} \n# #processes = {np} \n{idle}#-----\n"
            f"    {header}\n{body}")


RS = ("#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]",
      "0 1000 0.03 0.03 0.03", "1024 1000 1.00 2.00 1.50")


def test_reduce_scatter_bytes_are_per_rank_since_2019() -> None:
    new = HEAD.format(version="2021.11", part="MPI-1") + _block("Reduce_scatter", 4, *RS)
    rows = parse_imb(new, "f").rows
    assert [(r.size_bytes, r.metrics.get("imb_bytes")) for r in rows] == [
        (0, 0.0), (4096, 1024.0)]
    old = HEAD.format(version="2018", part="MPI-1") + _block("Reduce_scatter", 4, *RS)
    assert [r.size_bytes for r in parse_imb(old, "f").rows] == [0, 1024]
    gather = HEAD.format(version="2021.11", part="MPI-1") + _block("Gather", 4, *RS)
    assert [r.size_bytes for r in parse_imb(gather, "f").rows] == [0, 1024]


NBC = HEAD.format(version="2021.11", part="NBC") + """\
# For nonblocking benchmarks:

# Function CPU_Exploit obtains an undisturbed
# performance of  1234.56 MFlops
""" + _block("Ibcast", 2, "#bytes #repetitions t_ovrl[usec] t_pure[usec] t_CPU[usec] overlap[%]",
             "0 1000 1.23 0.50 0.70 50.00", "4 1000 2,00 1,00 1,00 0,00") + _block(
    "Ibcast_pure", 2, "#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]",
    "4 1000 0.90 1.10 1.00") + _block(
    "Ibarrier", 2, "#repetitions t_ovrl[usec] t_pure[usec] t_CPU[usec] overlap[%]",
    "1000 3.00 1.50 1.50 0.00")


def test_nbc_overlap_columns() -> None:
    parsed = parse_imb(NBC, "f")
    assert parsed.header["suite"] == "IMB-NBC" and parsed.header["CPU_Exploit MFlops"] == "1234.56"
    ib = [r for r in parsed.rows if r.collective == "ibcast"]
    assert (ib[1].size_bytes, ib[1].avg_us, ib[1].min_us, ib[1].iterations) == (4, 1.0, None, 1000)
    assert ib[0].metrics == {"overall_us": 1.23, "pure_us": 0.50, "compute_us": 0.70,
                             "overlap_pct": 50.0}
    (pure,) = [r for r in parsed.rows if r.collective == "ibcast_pure"]
    assert (pure.avg_us, pure.min_us, pure.max_us) == (1.00, 0.90, 1.10)
    (barrier,) = [r for r in parsed.rows if r.collective == "ibarrier"]
    assert (barrier.size_bytes, barrier.avg_us, barrier.iterations) == (0, 1.5, 1000)


def test_failed_samples_and_timeouts() -> None:
    text = HEAD.format(version="2021.11", part="MPI-1") + _block(
        "Alltoall", 2, "#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]",
        "1024 1000 1.00 2.00 1.50",
        '4194304 out-of-mem.; needed X=   1.234 GB; use flag "-mem X"') + (
        " time-out.; Time limit (secs_per_sample * msg_sizes_list_len) is over\n")
    parsed = parse_imb(text, "f")
    _, failed = parsed.rows
    assert (failed.status, failed.size_bytes, failed.avg_us) == ("failed", 4194304, None)
    assert failed.error is not None and failed.error.startswith("IMB: out-of-mem.;")
    assert parsed.header["timed_out"] == "Alltoall np=2"


def test_check_builds_report_defects() -> None:
    text = HEAD.format(version="2021.11", part="MPI-1") + _block(
        "Bcast", 2, "#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec] defects",
        "8 1000 1.00 2.00 1.50 0.00", "16 1000 1.00 2.00 1.50 2.00")
    good, bad = parse_imb(text, "f").rows
    assert (good.validated, good.status) == (True, "ok")
    assert (bad.validated, bad.status, bad.metrics["defects"]) == (False, "invalid", 2.0)


def test_waiting_processes_make_the_world() -> None:
    text = HEAD.format(version="2021.11", part="MPI-1") + _block(
        "PingPong", 2, "#bytes #repetitions t[usec] Mbytes/sec", "0 1000 1.05 0.00", waiting=6)
    assert parse_imb(text, "f").world_nprocs == 8


def test_no_banner_still_parses_blocks_and_preamble_noise_is_skipped() -> None:
    text = "some MPI warning 42\n12 34\n" + _block("Barrier", 3, "#repetitions t_min[usec] "
                                                     "t_max[usec] t_avg[usec]", "1000 1 2 1.5")
    (row,) = parse_imb(text, "f").rows
    assert (row.collective, row.size_bytes, row.nprocs, row.avg_us) == ("barrier", 0, 3, 1.5)


# --- malformed ------------------------------------------------------------------------
def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@pytest.mark.parametrize(("row", "message"), [
    ("1024 1000 1.00", r"^f:12: expected 5 columns \(#bytes #repetitions t_min\[usec\] "
                       r"t_max\[usec\] t_avg\[usec\]\), got 3$"),
    ("1024 1000 1.00 x 1.5", r"^f:12: t_max\[usec\]: expected a number, got 'x'$"),
    ("1024 10.5 1.00 2.0 1.5", r"^f:12: #repetitions: expected a whole number, got '10.5'$"),
])
def test_malformed_rows(row: str, message: str) -> None:
    text = HEAD.format(version="2021.11", part="MPI-1") + _block("Bcast", 2, RS[0], RS[1], row)
    with pytest.raises(UserError, match=message):
        parse_imb(text, "f")


def test_unsupported_benchmark_names_the_line() -> None:
    text = HEAD.format(version="2021.11", part="RMA") + _block("Unidir_put", 2, *RS)
    with pytest.raises(UserError, match=r"^f:7: IMB benchmark 'Unidir_put' is not supported"):
        parse_imb(text, "f")


def test_data_before_the_column_header() -> None:
    text = HEAD.format(version="2021.11", part="MPI-1") + "# Benchmarking Bcast\n8 1000 1 2 3\n"
    with pytest.raises(UserError, match=r"^f:6: data line before the column header"):
        parse_imb(text, "f")


def test_header_only_and_empty() -> None:
    with pytest.raises(UserError, match=r"^f: no results below the IMB header"):
        parse_imb(HEAD.format(version="2021.11", part="MPI-1"), "f")
    with pytest.raises(UserError, match=r"^f: not IMB output: .*\(the file is empty\)"):
        parse_imb("\n\n", "f")
