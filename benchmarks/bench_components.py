"""Components on two hosts: coll/han's default against coll/tuned's, and whether a forced
point's label is what Open MPI ran (docs/components.md).

Two emulated hosts (scripts/hosts-up.sh: network namespaces, sshd), 2 ranks each, Open MPI
5.0.11 (the wheel). One campaign, `components = ["tuned", "han"]` (on two hosts Open
MPI's own choice is han's default: `default@han`), bcast and
allreduce with a few coll/tuned algorithms and coll/han settings (variants of han only:
simple@han, intra+up=adapt@han, ...), 1 B-1 MiB, 3 repetitions. `collbench compare`
(baseline default@han, Open MPI's own choice there) gives each variant's median and its
significance; the launch a row came from says which component it asked for.

Label match: a forced coll/tuned point is labelled with a tuned algorithm; it matches when
the component that served the measured communicator (the kernel's probe) is tuned. "Before"
is what the kernel did before it measured forced points on a communicator without han: the
same forcing with han kept (the `han` launches' forced points, which collbench now labels
`<algorithm>@han`, and which earlier versions labelled `<algorithm>`).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from math import comb
from pathlib import Path

from common import ROOT, run_campaign

from collbench.analyse.compare import compare
from collbench.catalog.components import han_setting_of
from collbench.sizes import format_size
from collbench.store import Store

REPS = 5  # a side: the exact test's smallest two-sided p is 2 / C(2 REPS, REPS)
SPEC = """\
[campaign]
name = "components"
[measure]
collectives = ["bcast", "allreduce"]
sizes = ["1", "64", "4K", "64K", "1M"]
nprocs = [4]
ppn = [2]
iterations = 10
warmup = 2
components = ["tuned", "han"]
[measure.algorithms]
bcast = ["default", "knomial", "simple", "intra+low=sm", "intra+up=adapt"]
allreduce = ["default", "recursive_doubling", "simple", "intra+up=adapt"]
[run]
backend = "hosts"
repetitions = {reps}
seed = 24
timeout = 300
[run.hosts]
hostfile = "{state}/hosts.txt"
ssh_config = "{state}/ssh_config"
"""


def _asked(out: Path) -> dict[str, str]:
    """launch_id -> the component its launch asked for (plan.json)."""
    plan = json.loads((out / "plan.json").read_text())
    return {la["launch_id"]: la.get("component", "default") for la in plan["launches"]}


def _rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for f in sorted((out / "launches").glob("*.jsonl"))
            for line in f.read_text().splitlines()]


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "hosts"
        subprocess.run(["bash", str(ROOT / "scripts" / "hosts-up.sh"), str(state)],
                       check=True, capture_output=True)
        try:
            out = Path(tmp) / "components"
            wall = run_campaign(SPEC.format(state=state, reps=REPS), out)
            c = compare(Store(out), baseline="default@han")
            asked, rows = _asked(out), _rows(out)
        finally:
            subprocess.run(["bash", str(ROOT / "scripts" / "hosts-down.sh"), str(state)],
                           check=False, capture_output=True)
    forced = [r for r in rows if r["algorithm"] != "default"]
    after = [r for r in forced if asked[str(r["launch_id"])] != "han"]
    before = [r for r in forced if asked[str(r["launch_id"])] == "han"]
    share_after = sum(r["status"] == "ok" and r["component"] == "tuned" for r in after)
    # han settings: served by han, and the probe's sub-components bear out the knobs
    settings = [r for r in before if han_setting_of(str(r["algorithm"]))]
    before = [r for r in before if not han_setting_of(str(r["algorithm"]))]
    share_before = sum(r["component"] == "tuned" for r in before)
    settings_ok = sum(r["status"] == "ok" and r["component"] == "han" for r in settings)

    ratios = {(r.point.label, r.point.size_key): r for r in c.ratios}
    significant = sum(bool(r.significant) for r in c.ratios)
    lines = ["| collective | size | default@han (µs) | default, tuned (µs) | best tuned "
             "algorithm | best tuned under han | best han setting |",
             "|---|---|---:|---:|---|---|---|"]

    def cell(points: list, key: tuple) -> str:  # type: ignore[type-arg]
        if not points:
            return "-"
        best = min(points, key=lambda p: p.value)
        r = ratios.get((best.label, key))
        mark = "" if r is None else (" (significant)" if r.significant else " (n.s.)")
        ratio = "" if r is None else f" ×{r.ratio:.2f}"
        return f"{best.label} {best.value:.1f}{ratio}{mark}"

    by_key: dict[tuple, list] = {}  # type: ignore[type-arg]
    for p in c.points:
        by_key.setdefault(p.size_key, []).append(p)
    for key, pts in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][7])):
        han_default = [p for p in pts if p.label == "default@han"]
        tuned_default = [p for p in pts if p.label == "default"]
        tuned = [p for p in pts if p.component == "tuned" and p.algorithm != "default"]
        under = [p for p in pts if p.component == "han" and p.algorithm != "default"
                 and not han_setting_of(p.algorithm)]
        han = [p for p in pts if p.component == "han" and han_setting_of(p.algorithm)]
        lines.append(f"| {key[0]} | {format_size(key[7])} | "
                     f"{han_default[0].value:.1f} | {cell(tuned_default, key)} | "
                     f"{cell(tuned, key)} | {cell(under, key)} | {cell(han, key)} |"
                     if han_default else f"| {key[0]} | {format_size(key[7])} | - | - | - | - "
                     "| - |")
    return (
        "## Components on two hosts: han's default, tuned's, and labels that match\n\n"
        "Command: `python benchmarks/run_all.py components`: two emulated hosts × 2 ranks "
        "(`scripts/hosts-up.sh`), one campaign with `components = [\"tuned\", \"han\"]` "
        "(Open MPI's own choice on two hosts is han's default, `default@han`), bcast "
        "(default, knomial; han settings simple, intra+low=sm, intra+up=adapt) and "
        "allreduce (default, recursive_doubling; simple, intra+up=adapt), 1 B–1 MiB, 10 "
        f"iterations, {REPS} repetitions ({wall:.0f} s); then `collbench compare RESULTS "
        "--baseline default@han`. Best tuned under han: a coll/tuned algorithm forced on "
        "han's sub-communicators (`binomial@han`); best han setting: han's own "
        "(`simple@han`, docs/components.md). Medians of avg_us over repetitions; ×ratio to "
        "default@han with the exact Mann-Whitney verdict (Holm per size). Both hosts share "
        "this machine's 2 cores: the inter-node level is a veth pair, so han's hierarchy "
        "has no real network to save and these figures say nothing about a cluster's; "
        "they show what collbench measures and labels.\n\n"
        + "\n".join(lines)
        + f"\n\nLabel match of forced coll/tuned points: **before** (han kept on the "
        f"measured communicator, as the kernel did): {share_before} of {len(before)} "
        f"served by tuned ({100 * share_before / max(len(before), 1):.0f} %); **after** "
        f"(measured without han, the probe checking every point): {share_after} of "
        f"{len(after)} ({100 * share_after / max(len(after), 1):.0f} %). coll/han settings: "
        f"{settings_ok} of {len(settings)} points served by han with the knobs borne out by "
        "the probe's sub-components (no such check before).\n"
        f"{significant} of {len(c.ratios)} ratios are significant; with {REPS} repetitions a "
        f"side the exact two-sided test cannot go below p = {2 / comb(2 * REPS, REPS):.3f} "
        "before Holm's correction over a size's variants. The machine was shared with other "
        "jobs while this ran: timings are noisy.\n")


if __name__ == "__main__":
    print(main())
