"""`collbench study DIR --report`: each stage's verdict, the kept settings, the mpirun line."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.errors import UserError
from collbench.store import Store
from collbench.study.decide import Decision, Setting, Values, complete_repetitions, fetch_rows
from collbench.study.run import read_decisions, read_meta, stage_dir
from collbench.study.spec import Parameter, Study, parameters_from_json, parse_study


@dataclass(frozen=True)
class StudyReport:
    markdown: str
    figures: list[Path]
    command: list[str]


def final_command(study: Study, params: Sequence[Parameter],
                  decisions: Sequence[Decision], program: str = "./your_program") -> list[str]:
    """mpirun with the kept settings: every kept setting that differs from Open MPI's
    default, plus the study's fixed ones (what was measured is what is recommended)."""
    m = study.spec.measure
    launcher = {"map_by": m.map_by[0], "bind_to": m.bind_to[0]}
    mca = dict(study.spec.mca.fixed)
    for p, d in zip(params, decisions, strict=False):
        if p.kind == "launcher":
            launcher[p.name] = d.kept
        elif d.kept != p.mpi_default:
            mca[p.name] = d.kept
    argv = ["mpirun", "-np", str(m.nprocs[-1]), "--map-by", launcher["map_by"],
            "--bind-to", launcher["bind_to"]]
    for key, value in mca.items():
        argv += ["--mca", key, value]
    return [*argv, program]


def _fmt(v: float | None, digits: int = 3) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _verdict(s: Setting, kept: str) -> str:
    if s.is_baseline:
        return "kept (baseline)" if s.value == kept else "baseline"
    if s.better is None:
        return "not testable"
    word = ("significantly better" if s.better else "significantly worse" if s.worse
            else "no significant difference")
    return f"{word}, kept" if s.value == kept else word


def stage_table(d: Decision) -> list[str]:
    pct = f"{d.confidence:.0%}"
    lines = [f"| setting | complete reps | median score | ratio | {pct} CI | p (Holm) | verdict |",
             "|---|---:|---:|---:|---|---:|---|"]
    for s in d.settings:
        lines.append(f"| {s.value}{' (baseline)' if s.is_baseline else ''} | "
                     f"{len(s.scores)}/{s.planned} | {_fmt(s.score)} | {_tested(s, d.kept)} |")
    return lines


def _tested(s: Setting, kept: str) -> str:
    ci = "" if s.ci_low is None or s.ci_high is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
    return (f"{'' if s.is_baseline else _fmt(s.ratio)} | {ci} | "
            f"{'' if s.p_holm is None else f'{s.p_holm:.3g}'} | {_verdict(s, kept)}")


def band_table(d: Decision) -> list[str]:
    """Each candidate tested on each message-size range alone (empty: one range)."""
    if not d.bands:
        return []
    lines = [f"| size range | points | setting | ratio | {d.confidence:.0%} CI | p (Holm) | "
             "verdict |", "|---|---:|---|---:|---|---:|---|"]
    for b in d.bands:
        lines += [f"| {b.name} | {b.points} | {s.value} | {_tested(s, '')} |"
                  for s in b.settings[1:]]
    return lines


def build(out: Path, figures_dir: Path | None = None) -> StudyReport:
    """The report of the study folder `out`; figures under figures_dir (default out/report),
    linked relative to it (report.md is written there)."""
    meta = read_meta(out)
    study = parse_study((out / "study.toml").read_text(), str(out / "study.toml"))
    params = parameters_from_json(meta["parameters"])
    decisions = read_decisions(out, params)
    if not decisions:
        raise UserError(f"{out}: no stage decided yet; run the study first (collbench study "
                        "SPEC -o DIR, or --resume)")
    fig_dir = figures_dir or out / "report"
    written: list[Path] = []
    md = [f"# MCA study {meta['name']}", "",
          f"{meta['mpi']}; {meta['repetitions']} repetitions per setting in random order; "
          f"statistic {meta['column']}; confidence {meta['confidence']:.0%}"
          + (f"; minimum gain {meta['min_gain']:.0%}" if meta["min_gain"] else "") + ".",
          "Score of a repetition: geometric mean over every measured point of its latency "
          "divided by the baseline's median at that point (1 = as fast as the baseline), "
          "over every size and over each size range alone. A setting is kept when it is "
          "significantly better than the baseline over every size or in a size range, and "
          "significantly worse in none (exact Mann-Whitney, Holm over the stage's "
          "candidates, Hodges-Lehmann ratio interval below 1, or above 1 for worse); "
          "docs/study.md.", ""]
    for i, (p, d) in enumerate(zip(params, decisions, strict=False)):
        stem = p.stage_name(i)
        default = f"; Open MPI default {p.mpi_default}" if p.kind == "mca" else ""
        md += [f"## {i + 1}. {p.name} (baseline {p.baseline}{default})", "",
               *stage_table(d), "", *band_table(d), *([""] if d.bands else []),
               f"Kept: **{d.kept}** ({d.reason}; {d.points} points per repetition).", ""]
        rows = fetch_rows(Store(stage_dir(out, p, i)), d.column)
        _, values = complete_repetitions(rows, p, d.column)
        files = _draw(d, values, fig_dir, stem, f"{i + 1}. {p.name}")
        md += [f"![{p.name}]({_rel(f, fig_dir)})" for f in files] + [""]
        written += files
    if len(decisions) < len(params):
        left = ", ".join(p.name for p in params[len(decisions):])
        md += [f"Not yet studied: {left} (resume with `collbench study SPEC -o {out} "
               "--resume`).", ""]
    md += ["## Kept settings", "", "| parameter | Open MPI default | baseline | kept |",
           "|---|---|---|---|"]
    md += [f"| {p.name} | {p.mpi_default} | {p.baseline} | {d.kept} |"
           for p, d in zip(params, decisions, strict=False)]
    command = final_command(study, params, decisions)
    md += ["", "## Final command", "", "```", shlex.join(command), "```", ""]
    return StudyReport("\n".join(md), written, command)


def _draw(d: Decision, values: Values, folder: Path, stem: str, title: str) -> list[Path]:
    # matplotlib loads slowly: only when figures are drawn.
    from collbench.study.figures import write_stage

    return write_stage(d, values, folder, stem, title)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
