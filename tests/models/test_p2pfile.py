from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collbench.models.p2pfile as p2pfile
from collbench.errors import UserError
from collbench.models.p2p import PingPong, fit_model
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
       | st.sampled_from([MINIMAL, docstring_example()]).flatmap(
           lambda base: st.integers(0, len(base)).flatmap(
               lambda cut: st.text(max_size=20).map(
                   lambda junk: (base[:cut] + junk + base[cut:]).encode()))))
def test_reader_never_raises_anything_but_usererror(data: bytes) -> None:
    try:
        parse_p2p(data)
    except UserError as exc:
        assert "\n" not in str(exc)
