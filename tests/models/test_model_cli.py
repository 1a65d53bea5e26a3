"""`collbench model p2p|predict|fit|scaling`, `compare --against`, `tune --model`,
`report --model` and `platform calibrate FILE.p2p.toml`, end to end on small folders."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.models.p2pfile import parse_p2p, read_p2p
from tests.models.folders import LEVELS, P2P_TEXT, collective_folder, pingpong_folder

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_p2p_fit_recovers_the_parameters(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pp = pingpong_folder(tmp_path / "pp", bw_rows=True)
    out = tmp_path / "m.p2p.toml"
    code, text, _ = run(capsys, "model", "p2p", pp, "-o", out)
    assert code == 0 and f"wrote {out}" in text
    model = read_p2p(out)
    for level, (alpha, beta) in LEVELS.items():
        lm = model.levels[level]
        assert len(lm.regimes) == 1  # one straight line: no regime pays for itself
        assert lm.regimes[0].alpha_us == pytest.approx(alpha, rel=0.05)
        assert lm.regimes[0].beta_bytes_per_s == pytest.approx(beta, rel=0.05)
        assert lm.error is not None and lm.error.median_abs_pct < 2
    assert "osu_bw_core" in model.source  # streaming bandwidth kept beside the fit
    code, text, _ = run(capsys, "model", "p2p", "--show", out)
    assert code == 0 and "bandwidth_ci" in text and "node" in text
    code, text, _ = run(capsys, "model", "p2p", "--show", out, "--format", "json")
    assert {r["level"] for r in json.loads(text)["regimes"]} == {"core", "socket", "node"}


def test_mixed_transports_give_one_labelled_fit_each(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pp = pingpong_folder(tmp_path / "pp", transports=("self,sm", "self,tcp"))
    code, _, _ = run(capsys, "model", "p2p", pp, "-o", tmp_path / "x.p2p.toml")
    assert code == 0
    files = sorted(p.name for p in tmp_path.glob("x.*.p2p.toml"))
    assert files == ["x.btl=self_sm.p2p.toml", "x.btl=self_tcp.p2p.toml"]
    sm = read_p2p(tmp_path / files[0])
    tcp = read_p2p(tmp_path / files[1])
    assert sm.levels["core"].transport == "btl=self,sm"
    # never mixed: tcp's rows are 1.5 times slower, and so is its fit
    assert tcp.levels["core"].time_us(0) == pytest.approx(1.5 * sm.levels["core"].time_us(0),
                                                          rel=0.05)
    code, _, _ = run(capsys, "model", "p2p", pp, "-o", tmp_path / "y.p2p.toml", "--transport",
                     "btl=self,sm")
    assert code == 0 and (tmp_path / "y.p2p.toml").exists()


def test_predict_writes_a_folder_every_command_reads(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    out = tmp_path / "pred"
    code, text, _ = run(capsys, "model", "predict", p2p, "--collective", "bcast,gather",
                        "--algorithms", "all", "--nprocs", "4,8", "--ppn", "4", "--map-by",
                        "core,node", "--sizes", "1:64K", "-o", out)
    assert code == 0, text
    assert "predicted rows" in text
    code, text, _ = run(capsys, "query", out, "SELECT DISTINCT source, backend, mpi_version "
                                              "FROM measurements")
    assert code == 0 and "model" in text
    code, text, _ = run(capsys, "show", out)
    assert code == 0
    code, text, _ = run(capsys, "compare", out, "--collective", "bcast", "--nprocs", "8")
    assert code == 0 and "best per size" in text
    # a folder against itself: no error, same choices
    code, text, _ = run(capsys, "compare", out, "--against", out)
    assert code == 0 and "median 0.00 %" in text
    # predicting the same points again from the file
    code, text, _ = run(capsys, "compare", out, "--against", p2p, "--format", "json")
    data = json.loads(text)
    assert data["overall"]["median_abs_pct"] < 1e-3
    assert data["selection"]["same_fraction"] == 1.0


def test_fit_scaling_and_against(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = parse_p2p(P2P_TEXT.encode())
    real = collective_folder(tmp_path / "real", model, scale=1.3, nprocs=(2, 4, 8, 16),
                             collectives={"bcast": ("binomial", "basic_linear"),
                                          "scatter": ("binomial", "basic_linear")})
    code, text, _ = run(capsys, "model", "fit", real, "--format", "json")
    assert code == 0
    fits = {(a["collective"], a["algorithm"]): a for a in json.loads(text)["algorithms"]}
    # 30 % slower than the model everywhere: the fit absorbs it, cross-validation agrees
    assert fits[("bcast", "binomial")]["fit_median_pct"] < 10
    assert fits[("bcast", "binomial")]["cv_size_median_pct"] < 10
    assert fits[("bcast", "binomial")]["cv_nprocs_median_pct"] < 10
    code, text, _ = run(capsys, "model", "scaling", real, "--x", "nprocs", "--forms",
                        "linear,quadratic,log,nlogn,pmnf", "--collective", "bcast")
    assert code == 0 and "best" in text.lower()
    # how many process counts each form needs, and why
    assert ("process counts each form needs: linear 4, log 4, nlogn 4, pmnf 4, quadratic 5 "
            "(a form with k coefficients needs k + 2 distinct values") in text
    # 4 process counts (2-16): every form but the quadratic, left out of every series
    assert re.search(r"Left out for too few process counts: quadratic in \d+ series\.", text)
    code, text, _ = run(capsys, "model", "scaling", real, "--x", "size", "--format", "csv")
    assert code == 0 and text.startswith("collective,algorithm,placement,at")
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    figs = tmp_path / "figs"
    code, text, _ = run(capsys, "compare", real, "--against", p2p, "-o", figs)
    assert code == 0
    assert re.search(r"absolute error of B: median 2\d\.\d+ %", text)  # 1/1.3 - 1 = -23 %
    assert "same best algorithm at" in text
    assert len(list((figs / "figures").glob("*_overlay.png"))) == 8
    assert (figs / "points.csv").read_text().startswith("collective,algorithm,nprocs")


def test_tune_from_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    real = collective_folder(tmp_path / "real", parse_p2p(P2P_TEXT.encode()), nprocs=(8,),
                             collectives={"bcast": ("binomial", "basic_linear")})
    rules = tmp_path / "predicted.rules"
    code, text, _ = run(capsys, "tune", "--model", p2p, "--nprocs", "8,16", "--ppn", "8",
                        "--collectives", "bcast,allreduce", "--sizes", "1:1M", "-o", rules,
                        "--against", real)
    assert code == 0, text
    assert "bcast np=16" in text and "selection penalty" in text
    code, text, _ = run(capsys, "rules", "check", rules)
    assert code == 0, text
    # the measured-data path still works beside it
    code, _, err = run(capsys, "tune", "--nprocs", "8", "-o", rules)
    assert code == 2 and "--model" in err


def test_report_models_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    real = collective_folder(tmp_path / "real", parse_p2p(P2P_TEXT.encode()), nprocs=(2, 4, 8),
                             collectives={"bcast": ("binomial", "basic_linear")},
                             sizes=(1, 1024, 65536))
    code, text, _ = run(capsys, "report", real, "-o", tmp_path / "rep", "--model", p2p,
                        "--baseline", "binomial")
    assert code == 0, text
    page = (tmp_path / "rep" / "index.html").read_text()
    assert 'id="models"' in page and "Point-to-point parameters" in page
    assert "Regressions of latency in the process count" in page
    assert page.count("(dashed) latency; one scale in every panel") == 6  # alt + caption
    assert len(list((tmp_path / "rep" / "figures").glob("model_*_residuals.png"))) == 3


@pytest.mark.parametrize(("text", "field"), [
    (P2P_TEXT.replace('[levels.node]\nlatency = "1.5 us"\nbandwidth = "10 GB/s"\n', ""),
     "levels.node: 'missing'"),
    (P2P_TEXT.replace('"10 GB/s"', '"0 GB/s"'), "levels.node.bandwidth: '0 GB/s'"),
    (P2P_TEXT.replace('"10 GB/s"', '"-3 GB/s"'), "levels.node.bandwidth: '-3 GB/s'"),
    (P2P_TEXT.replace('"1.5 us"', '"1.5"'), "levels.node.latency: '1.5'"),
])
def test_bad_p2p_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    text: str, field: str) -> None:
    p2p = tmp_path / "bad.p2p.toml"
    p2p.write_text(text)
    code, _, err = run(capsys, "model", "predict", p2p, "--collective", "bcast", "--nprocs",
                       "4", "--ppn", "2", "--map-by", "node", "-o", tmp_path / "o")
    assert code == 2
    assert err.count("\n") == 1 and str(p2p) in err and field in err and "valid:" in err
    assert not (tmp_path / "o").exists()


def test_other_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    model = parse_p2p(P2P_TEXT.encode())
    coll = collective_folder(tmp_path / "c", model, nprocs=(4,), sizes=(1, 64),
                             collectives={"bcast": ("binomial",)})
    few = pingpong_folder(tmp_path / "few", sizes=(1, 1024))
    cases = [
        (("model", "p2p", coll, "-o", tmp_path / "x.p2p.toml"), "no ok ping-pong rows"),
        (("model", "p2p", few, "-o", tmp_path / "x.p2p.toml"),
         "2 distinct message size(s) [1, 1024]; valid: at least 3"),
        (("model", "fit", coll), "2 points for"),
        (("model", "predict", p2p, "--collective", "bcast", "--algorithms", "binomal",
          "--nprocs", "4", "-o", tmp_path / "o"), "did you mean binomial"),
        (("model", "predict", p2p, "--collective", "bcats", "--nprocs", "4", "-o",
          tmp_path / "o"), "did you mean bcast"),
        (("model", "scaling", coll, "--forms", "cubic"), "valid: constant, linear"),
        (("compare", coll, "--against", tmp_path / "nothing"), "not a collbench results"),
    ]
    for argv, message in cases:
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        assert err.count("\n") == 1 and message in err, (argv, err)


@pytest.mark.parametrize(("flags", "named"), [
    (("--nprocs", str(10**12)), "--nprocs: '1000000000000' is not valid; valid: a process "
                                "count from 2 to 1048576"),
    (("--nprocs", f"4,{2**20 + 1}"), "--nprocs: '4,1048577' is not valid"),
    (("--nprocs", "4", "--ppn", str(10**12)), "--ppn: 1000000000000 is out of range; valid: "
                                              "1 to 1048576"),
    (("--nprocs", "4", "--nodes", str(2**40)), "--nodes: 1099511627776 is out of range"),
    (("--nprocs", "4", "--cores-per-socket", "1e9"), "--cores-per-socket: '1e9' is not a "
                                                     "whole number"),
])
def test_predict_bounds_its_counts_as_the_spec_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...],
        named: str) -> None:
    """An unbounded process count was costed rank by rank, without end."""
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    with pytest.raises(SystemExit) as done:
        main(["model", "predict", str(p2p), "--collective", "bcast", *flags, "-o",
              str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and named in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_platform_calibrate_from_a_p2p_file(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("smpirun") is None:
        pytest.skip("no SimGrid")
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text(P2P_TEXT)
    code, text, _ = run(capsys, "platform", "calibrate", p2p, "-o", tmp_path / "c.toml",
                        "--from", "orfeo-thin")
    assert code == 0, text
    assert "intra_socket: latency 0.3 µs, bandwidth 8000 MB/s" in text


@pytest.mark.slow
def test_every_documented_command_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/models.md: every `$ collbench ...` line, in order, on small folders named as
    the page names them."""
    monkeypatch.chdir(tmp_path)
    model = parse_p2p(P2P_TEXT.encode())
    pingpong_folder(tmp_path / "results" / "pp")
    collective_folder(tmp_path / "results" / "real", model, scale=1.2, nprocs=(2, 4, 8, 16),
                      mappings=("core", "socket"),
                      collectives={"bcast": ("binomial", "basic_linear", "knomial"),
                                   "gather": ("binomial", "basic_linear")})
    (tmp_path / "vendor.p2p.toml").write_text(P2P_TEXT)
    commands = [line.removeprefix("$ ").strip() for line in DOCS.read_text().splitlines()
                if line.startswith("$ collbench ")]
    assert len(commands) >= 10
    for command in commands:
        argv = shlex.split(command.split(" #")[0])[1:]
        if argv[:2] == ["platform", "calibrate"]:  # SimGrid runs, tens of seconds: run by
            continue  # tests/platforms/test_overheads.py (calibrate from a .p2p.toml)
        code, out, err = run(capsys, *argv)
        assert code == 0, f"{command}: {err}{out[-2000:]}"
