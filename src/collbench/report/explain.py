"""Why an algorithm takes its time: per algorithm and regime (size band), the messages
(latency terms, one per hop, so also the rounds) and bytes on the critical path at each
placement level (intra-socket, inter-socket, inter-node), predicted from the algorithm's
schedule (models.schedules, costed by models.algorithms on the point's placement), and the
term that dominates the predicted time (a level's latency, a level's bandwidth, or the
reduction's computation). The critical path is the slowest rank's.

Predicted only: collbench records no Open MPI pml/monitoring counts in its runs, so no
measured counterpart is shown. `compare A --against M.p2p.toml --explain` prints the table;
`section` gives it as a report section (markdown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench.analyse.against import BANDS, band_of
from collbench.errors import UserError
from collbench.models.accuracy import Key
from collbench.models.algorithms import TERMS, detail
from collbench.models.p2p import P2PModel
from collbench.models.predict import DEFAULT, Shape, default_choice, inner_algorithms, topology
from collbench.sizes import format_size

LEVEL_NAMES: Final = {"core": "intra-socket", "socket": "inter-socket", "node": "inter-node"}
COLUMNS: Final = ("collective", "algorithm", "nprocs", "mapping", "regime", "at",
                  *(f"{n} msgs" for n in LEVEL_NAMES.values()),
                  *(f"{n} bytes" for n in LEVEL_NAMES.values()), "dominant term", "share")
PREDICTED_ONLY: Final = ("predicted from the schedules only: collbench records no Open MPI "
                         "pml/monitoring counts, so nothing measured is shown")


@dataclass(frozen=True)
class Why:
    collective: str
    algorithm: str
    nprocs: int
    mapping: str
    band: str
    size_bytes: int  # the regime's largest size among the points (the one explained)
    messages: dict[str, float]  # level -> latency terms on the critical path
    nbytes: dict[str, float]  # level -> bytes on the critical path
    dominant: str
    share: float  # of the predicted time


def explain(model: P2PModel, keys: Iterable[Key], shape: Shape | None = None,
            placement: dict[tuple[int, str], tuple[int | None, int | None]] | None = None
            ) -> tuple[list[Why], list[str]]:
    """One Why per (collective, algorithm, nprocs, mapping, size band) of `keys`, at the
    band's largest size; notes for what cannot be explained (han's composite default,
    algorithms without a schedule)."""
    placement = placement or {}
    largest: dict[tuple[str, str, int, str, str], int] = {}
    for k in keys:
        cell = (k.collective, k.algorithm, k.nprocs, k.mapping, band_of(k.size_bytes))
        largest[cell] = max(largest.get(cell, 0), k.size_bytes)
    out: list[Why] = []
    notes: set[str] = set()
    order = {name: i for i, (name, _, _) in enumerate(BANDS)}
    for (coll, label, n, mapping, band), size in sorted(
            largest.items(), key=lambda kv: (*kv[0][:4], order[kv[0][4]])):
        nodes, ppn = placement.get((n, mapping), (None, None))
        topo = topology(n, nodes, ppn, mapping or None, shape or Shape())
        alg = label
        if label == DEFAULT:
            choice = default_choice(topo, coll, size)
            if choice.han is not None:
                notes.add(f"{coll} default on {topo.nodes} nodes is coll/han's hierarchy: "
                          "not explained per level here (model predict shows its calls)")
                continue
            alg = "pipeline" if choice.algorithm == "chain" else choice.algorithm
        try:
            pred = detail(model, topo, coll, alg, size,
                          inner=inner_algorithms(coll, alg, n, size))
        except UserError as e:
            notes.add(f"{coll} {label}: not explained ({e})")
            continue
        terms = dict(zip(TERMS, pred.stat_terms("max"), strict=True))
        msgs = {lv: terms[f"alpha_{lv}"] for lv in LEVEL_NAMES}
        nb = {lv: terms[f"bytes_{lv}"] for lv in LEVEL_NAMES}
        parts: dict[str, float] = {}
        for lv, name in LEVEL_NAMES.items():
            if msgs[lv] <= 0 or lv not in model.levels:
                continue
            each = nb[lv] / msgs[lv]
            level = model.level(lv)
            parts[f"{name} latency"] = msgs[lv] * level.alpha_us(each)
            parts[f"{name} bandwidth"] = msgs[lv] * level.bandwidth_part_us(each)
        parts["reduction"] = terms["reduce_bytes"] * model.gamma_us_per_byte
        total = sum(parts.values())
        top = max(parts, key=lambda p: parts[p])
        out.append(Why(coll, label, n, mapping, band, size, msgs, nb, top,
                       parts[top] / total if total > 0 else 0.0))
    return out, sorted(notes)


def rows(whys: Sequence[Why]) -> list[dict[str, Any]]:
    out = []
    for w in whys:
        row: dict[str, Any] = {"collective": w.collective, "algorithm": w.algorithm,
                               "nprocs": w.nprocs, "mapping": w.mapping or "-",
                               "regime": w.band, "at": format_size(w.size_bytes),
                               "dominant term": w.dominant, "share": f"{w.share:.0%}"}
        for lv, name in LEVEL_NAMES.items():
            row[f"{name} msgs"] = f"{w.messages[lv]:g}"
            row[f"{name} bytes"] = format_size(int(w.nbytes[lv])) if w.nbytes[lv] else "0"
        out.append(row)
    return out


def render(whys: Sequence[Why], notes: Sequence[str], md: bool = False) -> str:
    from collbench.analyse.render import text_or_markdown_table

    title = "Why: critical path per level and the dominant term (predicted)"
    out = [("## " if md else "") + title, "", text_or_markdown_table(rows(whys), COLUMNS, md),
           "", f"note: {PREDICTED_ONLY}"]
    out += [f"note: {n}" for n in notes]
    return "\n".join(out) + "\n"


def section(whys: Sequence[Why], notes: Sequence[str]) -> str:
    """The report section (markdown)."""
    return render(whys, notes, md=True)


def explain_store(store: Any, model: P2PModel, points: Iterable[Key], stat: str = "avg",
                  collective: str | None = None) -> tuple[list[Why], list[str]]:
    """`explain` at the points of a results folder, on its placements and machine shape."""
    from collbench.analyse.modeldata import collective_rows, machine_shape

    where = {(r.nprocs, r.mapping or ""): (r.nodes, r.ppn)
             for r in collective_rows(store, stat, collective, zero=True)}
    return explain(model, points, machine_shape(store), where)


def table(whys: Sequence[Why]) -> Any:
    """The report's table (report --model: the models section)."""
    from collbench.report import html

    return html.Table(COLUMNS, tuple(tuple(str(r[c]) for c in COLUMNS) for r in rows(whys)),
                      "Why: messages and bytes per level on the critical path (the slowest "
                      f"rank's) and the dominant term of the predicted time; {PREDICTED_ONLY}")
