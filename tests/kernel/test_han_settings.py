"""coll/han's own settings are variants of component han that really ran as named (issue 24):
one real campaign on two emulated hosts (Open MPI 5.0, 2 ranks each) sweeping han settings
beside han's default and a coll/tuned algorithm under han. The witness is the kernel's probe
(kernel/collprobe.c): every row says han served it, and what han's sub-communicators used
shows each knob took effect (docs/components.md, "han's own settings")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from collbench.analyse.compare import compare
from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog import components, ompi_decisions
from collbench.plan import han_levels
from collbench.store import Store
from collbench.tune import han
from collbench.tune.shim import build_shim, read_traces
from tests.launch.test_hosts import rows, spec_text, the_mpi

ALGORITHMS = ('["default", "binomial", "simple", "intra+low=sm", "intra+up=adapt", '
              '{name = "intra", segsize = [16384]}]')


@pytest.mark.slow
@pytest.mark.mpi
def test_han_settings_run_as_named_across_hosts(hosts: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "spec.toml"
    text = spec_text(f'hostfile = "{hosts / "hosts.txt"}"\nssh_config = '
                     f'"{hosts / "ssh_config"}"', 'nprocs = [4]\nppn = [2]\n'
                     'components = ["han"]')
    spec.write_text(text.replace('algorithms = "default"', f"algorithms = {ALGORITHMS}")
                    .replace("sizes = [8, 1024]", "sizes = [8, 65536]"))
    got = _run(spec, tmp_path / "out")

    def subs(algorithm: str, size: int, segsize: int = 0) -> set[str]:
        (row,) = [r for r in got if (r["algorithm"], r["size_bytes"], r["segsize"])
                  == (algorithm, size, segsize)]
        return set(str(json.loads(str(row["metrics"]))["sub_components"]).split(","))

    for size in (8, 65536):
        # han's simple algorithm calls blocking collectives only; its intra one the levels
        # the knobs name: sm within the node, adapt between the nodes
        assert not subs("simple", size) & {"libnbc", "adapt"}
        assert "sm" in subs("intra+low=sm", size)
        assert "adapt" in subs("intra+up=adapt", size)
        assert "tuned" in subs("binomial", size)  # forced tuned, on han's sub-communicators
    # the segment size took effect: 64 KiB in 16 KiB segments pipelines through the up
    # level's ibcast (libnbc); han's default segment (64 KiB) is one, sent without it
    assert "libnbc" in subs("intra", 65536, 16384)
    assert "libnbc" not in subs("default", 65536)
    # every variant is labelled with its component, the settings are not parameters
    assert {json.dumps(json.loads(str(r["params"]))["mca"]) for r in got} == {"{}"}
    labels = {p.label for p in compare(Store(tmp_path / "out"), baseline="default").points}
    assert labels == {"default@han", "binomial@han", "simple@han", "intra+low=sm@han",
                      "intra+up=adapt@han", "intra[seg=16384]@han"}

    # what `tune` writes where simple@han won: `han @simple` in han's rules file makes han
    # run its simple algorithm (1 MiB: han's default pipelines 16 segments through libnbc)
    rules = han.HanRules((han.CollRules("bcast", (han.Level("global_communicator", (
        han.Config(1, (han.MsgRule(0, "han"),)),
        han.Config(4, (han.MsgRule(0, "han", "simple"),)))),)),))
    hfile = tmp_path / "rules.han"
    hfile.write_text(han.format_rules(rules))
    spec.write_text(text.replace('algorithms = "default"', 'algorithms = ["default"]')
                    .replace("sizes = [8, 1024]", "sizes = [1048576]")
                    + f'[mca.fixed]\ncoll_han_dynamic_rules_filename = "{hfile}"\n'
                    '[mca.sweep]\ncoll_han_use_dynamic_file_rules = ["0", "1"]\n')
    by_file = {json.loads(str(r["params"]))["swept"]["coll_han_use_dynamic_file_rules"]:
               set(str(json.loads(str(r["metrics"]))["sub_components"]).split(","))
               for r in _run(spec, tmp_path / "file")}
    assert "libnbc" in by_file["0"] and not by_file["1"] & {"libnbc", "adapt"}, by_file


PER_LEVEL = "simple+low=tuned:binomial+up=tuned:pipeline"


@pytest.mark.slow
@pytest.mark.mpi
def test_a_tuned_algorithm_forced_per_level_runs_on_that_level_only(
        hosts: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One launch, 2 hosts x 3 ranks, han's simple bcast with coll/tuned's binomial on the
    3-rank low level and pipeline on the 2-rank up level (a rules file keyed by size,
    plan/han_levels.py): the row is ok because the kernel's probe saw each level's algorithm
    (served.py), and the algtrace library (each tuned decision with its communicator's size,
    as `rules verify` uses it) agrees. Then the rules file is tampered to force chain on the
    up level: the same variant's point fails, saying what ran."""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    three = tmp_path / "hosts3.txt"  # 3 slots per host, unbound: the machine has 2 cores
    three.write_text("".join(f"{line.split(':')[0]}:3\n" for line in
                             (hosts / "hosts.txt").read_text().split()))
    spec = tmp_path / "spec.toml"
    text = spec_text(f'hostfile = "{three}"\nssh_config = "{hosts / "ssh_config"}"',
                     'nprocs = [6]\nppn = [3]\nbind_to = ["none"]\ncomponents = ["han"]')
    spec.write_text(text.replace('algorithms = "default"', f'algorithms = ["{PER_LEVEL}"]')
                    .replace("sizes = [8, 1024]", "sizes = [8, 65536]"))
    mpi = the_mpi("openmpi-5.0")
    lib, prefix = build_shim(mpi.mpicc, tmp_path / "cache"), tmp_path / "trace"
    camp = open_campaign(SpecSource.from_file(spec), mpi, Request(tmp_path / "out"),
                         say=lambda _: None)
    camp.run(wrapper=("env", f"LD_PRELOAD={lib}", f"COLLBENCH_ALGTRACE={prefix}"))
    got = rows(tmp_path / "out")
    assert {(r["status"], r["component"], r["algorithm"]) for r in got} == {
        ("ok", "han", PER_LEVEL)}, [r["error"][-3000:] for r in got]
    assert all("tuned" in json.loads(str(r["metrics"]))["sub_components"] for r in got)
    # rank 0 leads node 1: it is on the 3-rank low and the 2-rank up communicator
    ids = {a: ompi_decisions.ALGORITHMS["bcast"].index(a) + 1
           for a in ("binomial", "pipeline", "chain")}
    want = {(3, ids["binomial"]), (2, ids["pipeline"])}
    for row in got:  # what the row's check read: the probe's, in the row's metrics
        probed = han_levels.traced(json.loads(str(row["metrics"]))["sub_algorithms"])
        assert {(s, a) for c, s, a in probed or () if c == "bcast"} == want, row["metrics"]
    (trace,) = [t for t in read_traces(prefix, range(6)) if t.rank == 0]
    ran = {(c.comm_size, c.algorithm) for c in trace.calls
           if not c.world and c.collective == "bcast" and c.bytes in (8, 65536)}
    assert ran == want, trace.calls

    # named but not run: the cached rules file (content-addressed, reused as it is) now
    # forces chain on the 2-rank up level; no tracer, the probe alone fails the point
    setting = components.han_setting_of(PER_LEVEL)
    assert setting is not None
    (rules,) = (tmp_path / "cache" / "han-levels").glob("*/tuned.rules")
    rules.write_text(han_levels.rules_text(replace(setting, up_tuned="chain"), "bcast", 6, 3))
    spec.write_text(spec.read_text().replace("sizes = [8, 65536]", "sizes = [8]"))
    open_campaign(SpecSource.from_file(spec), mpi, Request(tmp_path / "tampered"),
                  say=lambda _: None).run()
    (row,) = rows(tmp_path / "tampered")
    assert (row["status"], row["component"], row["algorithm"]) == ("failed", "han", PER_LEVEL)
    assert str(row["error"]).startswith("coll/tuned ran bcast chain on han's up communicator "
                                        "(2 ranks), not pipeline"), row["error"]


def _run(spec: Path, out: Path) -> list[dict[str, object]]:
    camp = open_campaign(SpecSource.from_file(spec), the_mpi("openmpi-5.0"), Request(out),
                         say=lambda _: None)
    camp.run()
    got = rows(out)
    assert {(r["status"], r["component"]) for r in got} == {("ok", "han")}, got
    return got
