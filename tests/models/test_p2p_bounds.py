"""Numbers that cannot be (issue 26): a `.p2p.toml` file's values are bounded when read, and
a prediction that is not a time (not finite, or beyond predict.MAX_US) is never stored or
compared as one. Property tests: the reader on arbitrary bytes and on finite but absurd
values gives a model whose every prediction is a bounded time, or one line."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.models.networks import NETWORKS
from collbench.models.p2pfile import parse_p2p
from collbench.models.predict import MAX_US, Shape, prediction_rows, topology
from collbench.store import Store
from tests.models.folders import P2P_TEXT

# Every level at the slowest bandwidth a file may hold: 1 GiB takes 1.07e12 µs > MAX_US.
SLOW = P2P_TEXT.replace('"8 GB/s"', '"1 kB/s"').replace('"6 GB/s"', '"1 kB/s"') \
    .replace('"10 GB/s"', '"1 kB/s"')


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


_LOGGP = ('bandwidth = "10 GB/s"', 'bandwidth = "10 GB/s"\n[levels.node.loggp]\nL = "1 us"\n'
          'o_s = "{o_s}"\no_r = "0 us"\ng = "1 us"\nG = "{G}"\nG_from = {G_from}')


def _loggp(o_s: str = "0 us", G: str = "0.1 ns/B", G_from: int = 0) -> tuple[str, str]:
    return _LOGGP[0], _LOGGP[1].format(o_s=o_s, G=G, G_from=G_from)


@pytest.mark.parametrize(("change", "field", "bad"), [
    (('"0.3 us"', '"1e300 us"'), "levels.core.latency", "1e300 us"),
    (('"0.3 us"', '"2 s"'), "levels.core.latency", "2 s"),
    (('"8 GB/s"', '"1e-300 B/s"'), "levels.core.bandwidth", "1e-300 B/s"),
    (('"8 GB/s"', '"999 B/s"'), "levels.core.bandwidth", "999 B/s"),
    (('"8 GB/s"', '"1e300 TB/s"'), "levels.core.bandwidth", "1e300 TB/s"),
    (('latency = "1.5 us"', 'latency = "1 us"\nlatency_ci = ["-1e300 us", "1 us"]'),
     "levels.node.latency_ci[0]", "-1e300 us"),
    (_loggp(o_s="1e308 s"), "levels.node.loggp.o_s", "1e308 s"),
    (_loggp(G="1e300 s/B"), "levels.node.loggp.G", "1e300 s/B"),
    (_loggp(G_from=1 << 62), "levels.node.loggp.G_from", str(1 << 62)),
    (('[levels.node]\nlatency = "1.5 us"\nbandwidth = "10 GB/s"',
      '[[levels.node.regimes]]\nfrom = 0\nlatency = "1 us"\nbandwidth = "1 GB/s"\n'
      '[[levels.node.regimes]]\nfrom = "1e6 GiB"\nlatency = "1 us"\nbandwidth = "1 GB/s"'),
     "levels.node.regimes[1].from", "1e6 GiB"),
    (('bandwidth = "10 GB/s"', 'bandwidth = "10 GB/s"\n[levels.node.fit]\npoints = 10\n'
      'median_abs_pct_error = 1e300\np95_abs_pct_error = 1.0'),
     "levels.node.fit.median_abs_pct_error", "1e+300"),
    (('bandwidth = "10 GB/s"', 'bandwidth = "10 GB/s"\n[levels.node.fit]\nbic = -1e300'),
     "levels.node.fit.bic", "-1e+300"),
    (('version = 1', 'version = 1\n[reduce]\nbandwidth = "1e-300 B/s"'), "reduce.bandwidth",
     "1e-300 B/s"),
])
def test_absurd_values_are_one_line_naming_field_value_and_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str],
        field: str, bad: str) -> None:
    text = P2P_TEXT.replace(*change, 1)
    assert text != P2P_TEXT
    p2p = tmp_path / "absurd.p2p.toml"
    p2p.write_text(text)
    code, _, err = run(capsys, "model", "p2p", "--show", p2p)
    assert code == 2, err
    assert err.count("\n") == 1 and f"{p2p}: {field}: " in err and bad in err, err
    assert "valid: " in err and " to " in err, err  # the valid range


def test_predictions_beyond_the_bound_are_stored_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "slow.p2p.toml"
    p2p.write_text(SLOW)
    out = tmp_path / "pred"
    code, text, err = run(capsys, "model", "predict", p2p, "--collective", "bcast",
                          "--algorithms", "basic_linear", "--nprocs", "2", "--map-by", "core",
                          "--sizes", "1,1G", "-o", out)
    assert code == 0, err
    con = Store(out).connect()
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT size_bytes, status, avg_us, error FROM measurements").fetchall()}
    assert got[1][0] == "ok" and 0 < got[1][1] < MAX_US
    status, avg, error = got[1 << 30]
    assert (status, avg) == ("failed", None)
    assert "beyond" in error and "1e+12" in error
    assert "stored as failed" in text
    code, text, err = run(capsys, "show", out)  # the folder reads as usual
    assert code == 0, err


def test_tune_from_a_model_never_selects_from_an_absurd_prediction(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "slow.p2p.toml"
    p2p.write_text(SLOW)
    kept = tmp_path / "kept"
    code, _, err = run(capsys, "tune", "--model", p2p, "--nprocs", "4", "--collectives",
                       "bcast", "--sizes", "1,1G", "-o", tmp_path / "r.rules",
                       "--keep-predictions", kept)
    assert code == 0, err
    con = Store(kept).connect()
    worst = con.execute("SELECT max(avg_us), count(*) FILTER (status = 'failed') "
                        "FROM measurements").fetchone()
    assert worst is not None and worst[0] < MAX_US and worst[1] > 0


def test_compare_against_a_model_whose_prediction_is_absurd_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fast, slow = tmp_path / "fast.p2p.toml", tmp_path / "slow.p2p.toml"
    fast.write_text(P2P_TEXT)
    slow.write_text(SLOW)
    real = tmp_path / "real"
    code, _, err = run(capsys, "model", "predict", fast, "--collective", "bcast",
                       "--algorithms", "basic_linear,binomial", "--nprocs", "4",
                       "--map-by", "core", "--sizes", "1,1G", "-o", real)
    assert code == 0, err
    code, _, err = run(capsys, "compare", real, "--against", slow)
    assert code == 2
    assert err.count("\n") == 1 and "1073741824" in err and "valid:" in err, err


# --- property tests ----------------------------------------------------------------------

def _check_predictions(text: str) -> None:
    """`text` reads as a model whose every prediction row is a bounded time or failed, or
    it is refused in one line."""
    try:
        model = parse_p2p(text.encode(), "fuzz.p2p.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.p2p.toml: ")
        event("refused")
        return
    event("read")
    topo = topology(4, 2, 2, "node", Shape(2, 1))
    for (coll, algs), net in itertools.product(
            (("bcast", ("default", "basic_linear", "pipeline")),
             ("allreduce", ("ring", "recursive_doubling"))), NETWORKS.values()):
        got = prediction_rows(model, coll, algs, topo, (0, 1, 1 << 20, 1 << 30),
                              campaign="c", launch_id="l", model_name="m", net=net)
        for row in got.rows:
            if row["status"] == "ok":
                for key in ("avg_us", "min_us", "max_us", "median_us"):
                    assert math.isfinite(row[key]) and 0 <= row[key] <= MAX_US, row
            else:
                assert row["status"] == "failed" and row["avg_us"] is None
                assert row["error"] and "\n" not in row["error"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=1500))
def test_p2p_reader_on_arbitrary_bytes(data: bytes) -> None:
    try:
        parse_p2p(data, "fuzz.p2p.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.p2p.toml: ")


_ABSURD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1e-300, 5e-324, 1e-9, 1e-3, 1.0, 1e3, 999.0, 1e6, 1e7, 1e13, 1e14,
                     1e300, 1.7976931348623157e308, -1.0, -1e300]),
)
_SIZE = st.one_of(st.integers(min_value=-2, max_value=2 ** 63 - 1),
                  st.sampled_from([0, 1, 1 << 40, (1 << 40) + 1, 1 << 62]))


_TIME = ["ns", "us", "ms", "s"]
_BW = ["B/s", "kB/s", "GB/s", "TB/s", "Gbit/s"]


def _q(sane: str, units: list[str]) -> st.SearchStrategy[str]:
    """The sane quantity (4 times in 5) or an absurd one: a file holds a few absurd numbers,
    or extreme ones that read."""
    absurd = st.builds(lambda x, u: f'"{x!r} {u}"', _ABSURD, st.sampled_from(units))
    return st.integers(0, 4).flatmap(lambda k: absurd if k == 0 else st.just(f'"{sane}"'))


def _size(sane: int) -> st.SearchStrategy[int]:
    return st.integers(0, 4).flatmap(lambda k: _SIZE if k == 0 else st.just(sane))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lat=_q("0.3 us", _TIME), bw=_q("8 GB/s", _BW), lat2=_q("4 us", _TIME),
       bw2=_q("11.5 GB/s", _BW), start=_size(65536),
       red=_q("4 GB/s", _BW), o_s=_q("0.3 us", _TIME), big_g=_q("0.1 ns/B", ["ns/B", "s/B"]),
       g_from=_size(65536))
def test_p2p_reader_on_finite_but_absurd_values(lat: str, bw: str, lat2: str, bw2: str,
                                                start: int, red: str, o_s: str, big_g: str,
                                                g_from: int) -> None:
    text = (f'format = "collbench-p2p"\nversion = 1\n[reduce]\nbandwidth = {red}\n'
            f'[levels.core]\nlatency = {lat}\nbandwidth = {bw}\n'
            f'[levels.socket]\nlatency = "0.5 us"\nbandwidth = {bw2}\n'
            f'[[levels.node.regimes]]\nfrom = 0\nlatency = "1 us"\nbandwidth = "5 GB/s"\n'
            f'[[levels.node.regimes]]\nfrom = {start}\nlatency = {lat2}\nbandwidth = {bw2}\n'
            f'[levels.node.loggp]\nL = "1 us"\no_s = {o_s}\no_r = "0 us"\n'
            f'g = "1 us"\nG = {big_g}\nG_from = {g_from}\n')
    _check_predictions(text)
