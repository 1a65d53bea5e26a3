"""coll/han's dynamic rules file: written by `tune` where han's hierarchy was the default,
read back as coll/han reads it, and proven to fire on two emulated hosts (tune/han.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.cli import main
from collbench.errors import UserError
from collbench.tune import han, writer
from collbench.tune.select import Choice, Selection
from collbench.tune.shim import build_shim, read_traces
from tests.launch.test_hosts import rows, spec_text, the_mpi
from tests.test_points import folder, row


def selection(version: str = "5.0.11") -> Selection:
    """bcast at 4 ranks on 2 nodes: han's default below 4 KiB, binomial (tuned) above."""
    choices = (Choice(0, "default", 0, size_to=1024),
               Choice(4096, "binomial", 6, size_to=65536, ratio=0.8))
    return Selection("openmpi", version, 5, True, {("bcast", 4): choices},
                     han_defaults=frozenset({("bcast", 4)}))


def test_tuned_at_the_top_where_a_tuned_algorithm_won_han_elsewhere() -> None:
    rules = han.build(selection())
    assert rules is not None
    back = han.parse(han.format_rules(rules, "here"), "x.han")
    assert back == rules
    assert [back.component("bcast", 4, s) for s in (0, 1024, 4096, 1 << 20)] == \
        ["han", "han", "tuned", "tuned"]
    # nothing extended beyond the measured communicator size: han's default there
    assert [back.component("bcast", n, 65536) for n in (2, 3, 5, 64)] == ["han"] * 4
    assert back.component("allreduce", 4, 65536) is None


def test_no_file_where_han_was_not_the_default() -> None:
    sel = selection()
    assert han.build(Selection(sel.mpi, sel.mpi_version, 5, True, sel.tables)) is None


@pytest.mark.parametrize(("text", "field"), [
    ("1\nbcast\n1\nglobal_communicator\n1\n2\n1\n0 tuned\n", "configuration size: 2"),
    ("1\nbcast\n1\nglobal_communicator\n1\n1\n1\n8 tuned\n", "message size: 8"),
    ("1\nbcast\n1\nglobal_communicator\n1\n1\n2\n0 tuned\n0 han\n", "message size: 0"),
    ("1\nbcast\n1\nglobal_communicator\n1\n1\n1\n0 tunned\n", "component: 'tunned'"),
    ("1\nbcast\n1\nglobal\n", "topological level: 'global'"),
    ("1\nbcats\n", "collective: 'bcats'"),
    ("1\nbcast\n1\nglobal_communicator\n1\n1\n1\n0 tuned\nextra\n", "end of file: 'extra'"),
    ("2\nbcast\n0\n", "collective: the file ends here"),
])
def test_what_coll_han_would_reject_is_one_line(text: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        han.parse(text, "r.han")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("r.han:") and field in msg, msg
    assert "valid:" in msg


def test_comments_ids_and_han_algorithms_read_as_open_mpi_reads_them() -> None:
    text = ("# a comment\n1 # one\n6 # bcast's id\n1\n2 # global_communicator\n1\n1\n2\n"
            "0 6 @simple\n65536 3\n")
    rules = han.parse(text, "r.han")
    level = rules.collectives[0].levels[0]
    assert rules.collectives[0].collective == "bcast" and level.name == "global_communicator"
    assert [(r.size, r.component, r.algorithm) for r in level.configs[0].rules] == \
        [(0, "han", "simple"), (65536, "tuned", None)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_are_rules_or_one_line(data: bytes) -> None:
    try:
        han.parse(data.decode("utf-8", errors="replace"), "r.han")
    except UserError as e:
        assert "\n" not in str(e)


def test_rules_check_han(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = han.build(selection())
    assert rules is not None
    good, bad = tmp_path / "good.han", tmp_path / "bad.han"
    good.write_text(han.format_rules(rules))
    bad.write_text("1\nbcast\n1\nglobal_communicator\n1\n3\n")
    assert main(["rules", "check", "--han", str(good)]) == 0
    assert "bcast global_communicator np>=4 >=4K: tuned" in capsys.readouterr().out
    assert main(["rules", "check", "--han", str(bad)]) == 1
    assert "configuration size: 3" in capsys.readouterr().out
    assert main(["rules", "check", "--han", str(tmp_path / "none")]) == 2


def test_tune_writes_the_han_file_where_the_default_was_hans(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 2-node folder whose default rows say han and binomial (tuned) wins from 4 KiB."""
    launches = {}
    for rep in range(6):
        lid = f"l{rep}"
        launches[lid] = [
            row(launch_id=lid, repetition=rep, nodes=2, ppn=2, component=comp,
                algorithm=alg, algorithm_id=aid, size_bytes=size,
                avg_us=(10 if alg == "default" else (20 if size < 4096 else 5)) * (1 + rep / 50))
            for alg, aid, comp in (("default", 0, "han"), ("binomial", 6, "tuned"))
            for size in (64, 1024, 4096, 65536)]
    store = folder(tmp_path / "res", launches)
    out = tmp_path / "rules.conf"
    assert main(["tune", str(store.root), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    hfile = tmp_path / "rules.conf.han"
    assert hfile.exists() and "coll_han_dynamic_rules_filename" in said, said
    rules = han.read(hfile)
    assert [rules.component("bcast", 4, s) for s in (64, 1024, 4096, 65536)] == \
        ["han", "han", "tuned", "tuned"]


def test_a_han_setting_that_won_is_in_the_han_file_or_in_mca_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """han's own simple algorithm wins below 4 KiB (han's rules file can name it), binomial
    (tuned) at 4 KiB, intra+up=adapt (han's up level: no rules file names it) at 64 KiB."""
    fast = {"simple": (64, 1024), "binomial": (4096,), "intra+up=adapt": (65536,)}
    launches = {}
    for rep in range(6):
        lid = f"l{rep}"
        launches[lid] = [
            row(launch_id=lid, repetition=rep, nodes=2, ppn=2, component=comp,
                algorithm=alg, algorithm_id=aid, size_bytes=size,
                avg_us=(10 if alg == "default" else (5 if size in fast[alg] else 20))
                * (1 + rep / 50))
            for alg, aid, comp in (("default", 0, "han"), ("simple", 2, "han"),
                                   ("binomial", 6, "tuned"), ("intra+up=adapt", 1, "han"))
            for size in (64, 1024, 4096, 65536)]
    store = folder(tmp_path / "res", launches)
    out = tmp_path / "rules.conf"
    assert main(["tune", str(store.root), "-o", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    rules = han.read(tmp_path / "rules.conf.han")
    (level,) = rules.collectives[0].levels
    config = next(c for c in level.configs if c.size == 4)
    assert [(r.size, r.component, r.algorithm) for r in config.rules] == [
        (0, "han", "simple"), (4096, "tuned", None), (65536, "han", None)]
    assert "han @simple" in said
    assert ("intra+up=adapt@han is fastest" in said and "mpirun --mca "
            "coll_han_use_bcast_algorithm intra --mca coll_han_bcast_up_module 1" in said), said
    # the coll/tuned rules keep the default where han's settings won
    assert "simple" not in out.read_text() and "intra" not in out.read_text()


@pytest.mark.slow
@pytest.mark.mpi
def test_a_han_rules_file_from_tune_fires_on_two_hosts(
        hosts: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Open MPI 5.0.11 on 2 hosts × 2 ranks with tune's two files active: below 4 KiB han
    serves bcast; from 4 KiB coll/tuned serves the whole communicator and runs binomial
    there, as the files say (the probe's component per row, the algtrace witness)."""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    sel = selection()
    rules = han.build(sel)
    assert rules is not None
    hfile, tfile = tmp_path / "r.han", tmp_path / "r.conf"
    hfile.write_text(han.format_rules(rules))
    tfile.write_text(writer.build(sel, version=2, source="test", path=tfile).text)
    mca = "\n".join(f'{k} = "{v}"' for k, v in [*han.activation(hfile),
                                                   *writer.activation(tfile)])
    spec = tmp_path / "spec.toml"
    text = spec_text(f'hostfile = "{hosts / "hosts.txt"}"\nssh_config = '
                     f'"{hosts / "ssh_config"}"').replace("sizes = [8, 1024]",
                                                          "sizes = [8, 65536]")
    spec.write_text(text + f"[mca.fixed]\n{mca}\n")
    mpi = the_mpi("openmpi-5.0")
    lib = build_shim(mpi.mpicc, tmp_path / "cache")
    prefix = tmp_path / "trace"
    camp = open_campaign(SpecSource.from_file(spec), mpi, Request(tmp_path / "out"),
                         say=lambda _: None)
    camp.run(wrapper=("env", f"LD_PRELOAD={lib}", f"COLLBENCH_ALGTRACE={prefix}"))
    got = {int(str(r["size_bytes"])): r for r in rows(tmp_path / "out")}
    assert {s: (r["status"], r["component"]) for s, r in got.items()} == \
        {8: ("ok", "han"), 65536: ("ok", "tuned")}, got
    assert "tuned" in json.loads(str(got[8]["metrics"]))["sub_components"]
    (trace,) = [t for t in read_traces(prefix, range(4)) if t.rank == 0]
    top = {(c.bytes, c.algorithm) for c in trace.calls
           if not c.world and c.collective == "bcast" and c.comm_size == 4}
    assert top == {(65536, 6)}, trace.calls


@pytest.mark.slow
@pytest.mark.mpi
def test_rules_verify_and_tune_validate_prove_both_files_on_two_hosts(
        hosts: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`rules verify --han` on 2 hosts × 2 ranks: every boundary served by the component
    han's file names, tuned's rule run at the top level where it is tuned; with han's
    priority lowered (han never serves) the same files fail the proof. `tune validate
    --han` measures the default (han) against both files there."""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    sel = selection()
    rules = han.build(sel)
    assert rules is not None
    hfile, tfile = tmp_path / "r.conf.han", tmp_path / "r.conf"
    hfile.write_text(han.format_rules(rules))
    tfile.write_text(writer.build(sel, version=2, source="test", path=tfile).text)
    where = ["-n", "4", "--ppn", "2", "--hostfile", str(hosts / "hosts.txt"),
             "--ssh-config", str(hosts / "ssh_config")]
    assert main(["rules", "verify", str(tfile), "--han", str(hfile), *where]) == 0
    out = capsys.readouterr().out
    assert "verified:" in out and "served by" in out and "coll/tuned: 6 binomial" in out, out
    assert main(["rules", "verify", str(tfile), "--han", str(hfile), *where,
                 "--mca", "coll_han_priority=0"]) == 1
    assert "MISMATCH" in capsys.readouterr().out

    folder_ = tmp_path / "ab"
    assert main(["tune", "validate", str(tfile), "--han", str(hfile), *where, "-o",
                 str(folder_), "--repetitions", "2", "--sizes", "8,64K", "--iterations",
                 "20"]) in (0, 1)
    got = {(r["algorithm"], int(str(r["size_bytes"]))): r["component"] for r in rows(folder_)}
    assert got == {("default", 8): "han", ("default", 65536): "han",
                   ("tuned", 8): "han", ("tuned", 65536): "tuned"}, got
