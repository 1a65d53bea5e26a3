from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collbench.models.p2pfile as p2pfile
from collbench.errors import UserError
from collbench.models.p2p import LogGP, P2PModel, PingPong, fit_model
from collbench.models.p2pfile import format_p2p, parse_p2p, read_p2p, write_p2p

MINIMAL = """
format = "collbench-p2p"
version = 1
[levels.core]
latency = "0.3 us"
bandwidth = "10 GB/s"
[levels.socket]
latency = "500 ns"
bandwidth = "80 Gbit/s"
[levels.node]
latency = "0.0015 ms"
bandwidth = "5 GiB/s"
"""


LOGGP = """[levels.node.loggp]
L = "1 us"
o_s = "0.3 us"
o_r = "0.4 us"
g = "0.5 us"
G = "0.1 ns/B"
"""


def docstring_example() -> str:
    doc = p2pfile.__doc__ or ""
    return textwrap.dedent(doc[doc.index("    # Point-to-point"):doc.index("Units:")])


def test_documented_example_reads_and_round_trips(tmp_path: Path) -> None:
    model = parse_p2p(docstring_example().encode())
    node = model.levels["node"]
    assert [r.from_bytes for r in node.regimes] == [0, 65536]
    assert node.regimes[1].beta_bytes_per_s == pytest.approx(11.5e9)
    assert model.gamma_us_per_byte == pytest.approx(1e6 / 4e9)
    assert model.source["origin"] == "hand"
    loggp = node.loggp
    assert loggp is not None and model.levels["core"].loggp is None
    assert (loggp.L_us, loggp.o_s_us, loggp.o_r_us, loggp.g_us) == pytest.approx(
        (1.1, 0.35, 0.4, 0.5))
    assert loggp.G_us_per_byte == pytest.approx(0.087e-3)
    assert (loggp.G_from_bytes, loggp.method) == (65536, "netgauge -x loggp")
    write_p2p(model, tmp_path / "m.p2p.toml")
    assert read_p2p(tmp_path / "m.p2p.toml") == model


def test_units_convert() -> None:
    m = parse_p2p(MINIMAL.encode())
    assert m.levels["socket"].regimes[0].alpha_us == pytest.approx(0.5)
    assert m.levels["socket"].regimes[0].beta_bytes_per_s == pytest.approx(10e9)
    assert m.levels["node"].regimes[0].alpha_us == pytest.approx(1.5)
    assert m.levels["node"].regimes[0].beta_bytes_per_s == pytest.approx(5 * 2 ** 30)
    assert m.time_us("core", 10_000) == pytest.approx(0.3 + 1.0)


def test_fitted_model_round_trips() -> None:
    rows = [PingPong(2 ** k, 0.3 + 2 ** k / 5e3 * (1.01 if k % 2 else 0.99), lvl)
            for k in range(0, 21) for lvl in ("core", "socket", "node")]
    model = fit_model(rows, gamma_us_per_byte=3.3e-4)
    assert parse_p2p(format_p2p(model).encode()) == model


@pytest.mark.parametrize(("text", "message"), [
    (MINIMAL.replace("[levels.node]", "[levels.rack]"), "levels.rack: 'unknown key'"),
    (MINIMAL.replace('latency = "0.3 us"', 'latency = "0.3"'), "levels.core.latency: '0.3'"),
    (MINIMAL.replace('latency = "0.3 us"', "latency = 0.3"), "levels.core.latency: 0.3"),
    (MINIMAL.replace('"10 GB/s"', '"0 GB/s"'), "levels.core.bandwidth: '0 GB/s'"),
    (MINIMAL.replace('"10 GB/s"', '"-1 GB/s"'), "levels.core.bandwidth: '-1 GB/s'"),
    (MINIMAL.replace('"10 GB/s"', '"nan GB/s"'), "levels.core.bandwidth: 'nan GB/s'"),
    (MINIMAL.replace('"10 GB/s"', '"1e999 GB/s"'), "levels.core.bandwidth"),
    (MINIMAL.replace('"10 GB/s"', '"10 GB"'), "levels.core.bandwidth: '10 GB'"),
    (MINIMAL.replace("[levels.node]\n", "[levels.nodes]\n"), "levels.nodes"),
    (MINIMAL.replace('version = 1', 'version = 2'), "version: 2"),
    (MINIMAL.replace('format = "collbench-p2p"\n', ''), "format: 'missing'"),
    (MINIMAL + "colour = 1\n", "colour: 'unknown key'"),
    (MINIMAL + "[levels.core.fit]\npoints = 3\n", "levels.core.fit.median_abs_pct_error"),
    ("format = \"collbench-p2p\"\nversion = 1\n[levels.core]\nlatency = \"1 us\"\n"
     "bandwidth = \"1 GB/s\"\n", "levels.socket: 'missing'"),
    ("a = " + "[" * 100 + "]" * 100, "nesting"),
    (MINIMAL + LOGGP.replace('G = "0.1 ns/B"\n', ""), "levels.node.loggp.G: 'missing'"),
    (MINIMAL + LOGGP.replace('"0.1 ns/B"', '"0.1 ns"'), "levels.node.loggp.G: '0.1 ns'"),
    (MINIMAL + LOGGP.replace('"0.1 ns/B"', '"-0.1 ns/B"'), "levels.node.loggp.G: '-0.1 ns/B'"),
    (MINIMAL + LOGGP.replace('L = "1 us"', 'L = "1"'), "levels.node.loggp.L: '1'"),
    (MINIMAL + LOGGP.replace('L = "1 us"', 'L = 1'), "levels.node.loggp.L: 1"),
    (MINIMAL + LOGGP.replace('o_s = "0.3 us"', 'o_s = "-0.3 us"'), "levels.node.loggp.o_s"),
    (MINIMAL + LOGGP.replace('o_r = "0.4 us"', 'o_r = "nan us"'), "levels.node.loggp.o_r"),
    (MINIMAL + LOGGP.replace('g = "0.5 us"', 'g = "inf us"'), "levels.node.loggp.g"),
    (MINIMAL + LOGGP + "o = \"1 us\"\n", "levels.node.loggp.o: 'unknown key'"),
    (MINIMAL + LOGGP + "G_from = -1\n", "levels.node.loggp.G_from: -1"),
    (MINIMAL + LOGGP + "method = 3\n", "levels.node.loggp.method: 3"),
    (MINIMAL + "[levels.node.loggp]\n", "levels.node.loggp.L: 'missing'"),
    ("x = ", "TOML"),
])
def test_strict_reader(text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_p2p(text.encode(), "m.p2p.toml")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith("m.p2p.toml: ")
    assert message in line
    assert "valid" in line


def test_loggp_table_reads_with_units() -> None:
    m = parse_p2p((MINIMAL + LOGGP.replace('"1 us"', '"1500 ns"')
                   .replace('"0.1 ns/B"', '"100 ps/B"')).encode())
    p = m.levels["node"].loggp
    assert p is not None and p.L_us == pytest.approx(1.5)
    assert p.G_us_per_byte == pytest.approx(1e-4)
    assert (p.G_from_bytes, p.method) == (None, None)
    assert m.levels["node"].regimes[0].alpha_us == pytest.approx(1.5)  # Hockney unchanged
    assert parse_p2p(format_p2p(m).encode()) == m


def test_a_level_needs_hockney_beside_loggp() -> None:
    text = MINIMAL.replace('[levels.node]\nlatency = "0.0015 ms"\nbandwidth = "5 GiB/s"\n',
                           "") + LOGGP
    with pytest.raises(UserError, match=r"levels\.node\.latency: 'missing'"):
        parse_p2p(text.encode())


_TIME = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)  # 1 s


@settings(max_examples=200, deadline=None)
@given(L=_TIME, o_s=_TIME, o_r=_TIME, g=_TIME,
       G=st.floats(min_value=0, max_value=1e3, allow_nan=False, allow_infinity=False),
       start=st.none() | st.integers(0, 2 ** 40),
       method=st.none() | st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
       level=st.sampled_from(["core", "socket", "node"]))
def test_loggp_round_trips(L: float, o_s: float, o_r: float, g: float, G: float,
                           start: int | None, method: str | None, level: str) -> None:
    base = parse_p2p(MINIMAL.encode())
    lm = base.levels[level]
    model = P2PModel({**base.levels, level: replace(lm, loggp=LogGP(L, o_s, o_r, g, G, start,
                                                                    method))})
    again = parse_p2p(format_p2p(model).encode())
    assert again == model


def test_too_large_and_not_utf8() -> None:
    with pytest.raises(UserError, match="file size"):
        parse_p2p(b"#" * (p2pfile.MAX_BYTES + 1))
    with pytest.raises(UserError, match="not UTF-8"):
        parse_p2p(b"\xff\xfe")


def test_required_levels_can_be_narrowed() -> None:
    text = MINIMAL[:MINIMAL.index("[levels.socket]")]
    assert set(parse_p2p(text.encode(), required_levels=["core"]).levels) == {"core"}


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        read_p2p(tmp_path / "none.p2p.toml")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=400).map(str.encode)
       | st.sampled_from([MINIMAL, docstring_example(), MINIMAL + LOGGP]).flatmap(
           lambda base: st.integers(0, len(base)).flatmap(
               lambda cut: st.text(max_size=20).map(
                   lambda junk: (base[:cut] + junk + base[cut:]).encode()))))
def test_reader_never_raises_anything_but_usererror(data: bytes) -> None:
    try:
        parse_p2p(data)
    except UserError as exc:
        assert "\n" not in str(exc)
