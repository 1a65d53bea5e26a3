"""Why an algorithm takes its time: per algorithm and regime (size band), the messages
(latency terms, one per hop, so also the rounds) and bytes on the critical path at each
placement level (intra-socket, inter-socket, inter-node), predicted from the algorithm's
schedule (models.schedules, costed by models.algorithms on the point's placement), and the
term that dominates the predicted time (a level's latency, a level's bandwidth, or the
reduction's computation). The critical path is the slowest rank's.

Measured beside predicted: rows of a campaign run with `[run] monitoring = true` (Open
MPI's pml/monitoring, kernel/monitoring.py) hold per call the messages and bytes every rank
sent per level; a second table shows them beside the schedule's own totals (all ranks, not
only the critical path: pml/monitoring counts senders, not paths) and says where they
differ. `compare A --against M.p2p.toml --explain` prints the tables; `section` gives them
as a report section (markdown).
"""

from __future__ import annotations

import json
import re
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
PREDICTED_ONLY: Final = ("predicted from the schedules only: these rows hold no Open MPI "
                         "pml/monitoring counts (run with [run] monitoring = true)")
MEASURED_NOTE: Final = ("measured: Open MPI pml/monitoring, per call, every rank's sends "
                        "(the timed loop's barriers subtracted), beside the schedule's "
                        "sends of all ranks on the modelled placement; 'differs' names "
                        "the levels where they do not agree")
MEASURED_COLUMNS: Final = ("collective", "algorithm", "nprocs", "mapping", "at",
                           *(f"{n} msgs" for n in LEVEL_NAMES.values()),
                           *(f"{n} bytes" for n in LEVEL_NAMES.values()), "agree")
_METRIC: Final = {"core": "intra_socket", "socket": "inter_socket", "node": "inter_node"}


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
    # measured at size_bytes (run.monitoring; one per segsize/fanout, which the algorithm
    # label names): level -> (msgs, bytes) per call of all senders, and the schedule's
    measured: tuple[Measured, ...] = ()


@dataclass(frozen=True)
class Measured:
    measured: dict[str, tuple[float, float]]
    schedule: dict[str, tuple[float, float]] | None

    def differs(self) -> list[str]:
        """The levels where measured and schedule disagree (all when there is no schedule)."""
        if self.schedule is None:
            return list(LEVEL_NAMES.values())
        return [LEVEL_NAMES[lv] for lv in LEVEL_NAMES
                if any(abs(m - s) > 1e-6 * max(1.0, s) for m, s in
                       zip(self.measured[lv], self.schedule[lv], strict=True))]


MeasuredRows = dict[tuple[str, str, int, str, int], list[tuple[int, int, dict[str, Any]]]]


def explain(model: P2PModel, keys: Iterable[Key], shape: Shape | None = None,
            placement: dict[tuple[int, str], tuple[int | None, int | None]] | None = None,
            measured: MeasuredRows | None = None) -> tuple[list[Why], list[str]]:
    """One Why per (collective, algorithm, nprocs, mapping, size band) of `keys`, at the
    band's largest size; notes for what cannot be explained (han's composite default,
    algorithms without a schedule). `measured`: (collective, algorithm, nprocs, mapping,
    size) -> (segsize, fanout, metrics) of rows with pml/monitoring counts."""
    placement = placement or {}
    measured = measured or {}
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
        alg, seg, fan = _split_label(label)
        if label == DEFAULT:
            choice = default_choice(topo, coll, size)
            if choice.han is not None:
                notes.add(f"{coll} default on {topo.nodes} nodes is coll/han's hierarchy: "
                          "not explained per level here (model predict shows its calls)")
                continue
            alg = "pipeline" if choice.algorithm == "chain" else choice.algorithm
        try:
            pred = detail(model, topo, coll, alg, size, segsize=seg, fanout=fan,
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
            overhead = sum(level.overhead_us(int(each)))  # a platform's o_s + o_r
            if overhead > 0:
                parts[f"{name} overhead"] = msgs[lv] * overhead
        parts["reduction"] = terms["reduce_bytes"] * model.gamma_us_per_byte
        total = sum(parts.values())
        top = max(parts, key=lambda p: parts[p])
        seen = tuple(_measured(topo, coll, alg, size, variants)
                     for variants in _variants(measured.get((coll, label, n, mapping, size))))
        out.append(Why(coll, label, n, mapping, band, size, msgs, nb, top,
                       parts[top] / total if total > 0 else 0.0, seen))
    return out, sorted(notes)


_LABEL: Final = re.compile(r"(\w+)\[(?:seg=(\d+))?,?(?:fanout=(\d+))?\]")


def _split_label(label: str) -> tuple[str, int, int | None]:
    """'pipeline[seg=1024]' -> ('pipeline', 1024, None): compare's algorithm_label read back."""
    m = _LABEL.fullmatch(label)
    if m is None:
        return label, 0, None
    return m[1], int(m[2] or 0), int(m[3]) if m[3] else None


def _variants(rows: list[tuple[int, int, dict[str, Any]]] | None
              ) -> list[tuple[int, int, dict[str, tuple[float, float]]]]:
    """Per (segsize, fanout): the median counts per level over the rows (repetitions)."""
    from statistics import median

    by: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for seg, fan, metrics in rows or ():
        by.setdefault((seg, fan), []).append(metrics)
    return [(seg, fan, {lv: (median(m[f"measured_msgs_{name}"] for m in ms),
                             median(m[f"measured_bytes_{name}"] for m in ms))
                        for lv, name in _METRIC.items()})
            for (seg, fan), ms in sorted(by.items())]


def _measured(topo: Any, coll: str, alg: str, size: int,
              variant: tuple[int, int, dict[str, tuple[float, float]]]) -> Measured:
    """One variant's measured counts beside its schedule's sends on the modelled placement."""
    from collbench.models.schedules import messages, program
    from collbench.models.steps import Params

    seg, fan, counts = variant
    params: dict[str, Any] = {"segsize": seg}
    if fan:
        params["fanout"] = fan
    inner = inner_algorithms(coll, alg, topo.nprocs, size)
    if inner:
        params["inner"] = inner
    try:
        sent = messages(program(coll, alg, topo.nprocs, size, Params(**params)))
    except UserError:
        return Measured(counts, None)
    sched = {lv: [0.0, 0.0] for lv in LEVEL_NAMES}
    for src, dst, nbytes in sent:
        cell = sched[topo.level(src, dst)]
        cell[0] += 1
        cell[1] += nbytes
    return Measured(counts, {lv: (c[0], c[1]) for lv, c in sched.items()})


def measured_rows(whys: Sequence[Why]) -> list[dict[str, Any]]:
    """The measured table: schedule / measured per level, per variant."""
    out = []
    for w in whys:
        for m in w.measured:
            row: dict[str, Any] = {
                "collective": w.collective,
                "algorithm": w.algorithm, "nprocs": w.nprocs,
                "mapping": w.mapping or "-", "at": format_size(w.size_bytes)}
            for lv, name in LEVEL_NAMES.items():
                s = ("?", "?") if m.schedule is None else (
                    f"{m.schedule[lv][0]:g}", _bytes(m.schedule[lv][1]))
                row[f"{name} msgs"] = f"{s[0]} / {m.measured[lv][0]:g}"
                row[f"{name} bytes"] = f"{s[1]} / {_bytes(m.measured[lv][1])}"
            bad = m.differs()
            row["agree"] = ("no schedule" if m.schedule is None
                            else "yes" if not bad else "differs: " + ", ".join(bad))
            out.append(row)
    return out


def _bytes(n: float) -> str:
    return format_size(int(n)) if n == int(n) else f"{n:g} B"


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
    out = [("## " if md else "") + title, "", text_or_markdown_table(rows(whys), COLUMNS, md)]
    seen = measured_rows(whys)
    if seen:
        out += ["", ("## " if md else "") + "Measured with Open MPI pml/monitoring: "
                "messages and bytes per call per level (schedule / measured)", "",
                text_or_markdown_table(seen, MEASURED_COLUMNS, md), "",
                f"note: {MEASURED_NOTE}"]
    else:
        out += ["", f"note: {PREDICTED_ONLY}"]
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
    return explain(model, points, machine_shape(store), where,
                   measured_store(store, collective))


def measured_store(store: Any, collective: str | None = None) -> MeasuredRows:
    """The ok rows with pml/monitoring counts (run.monitoring), by point."""
    from collbench import points as pts
    from collbench.analyse.compare import algorithm_label
    from collbench.kernel.monitoring import KEYS

    out: MeasuredRows = {}
    for r in pts.read(store, collective=collective, ok=True):
        try:
            metrics = json.loads(r.get("metrics") or "{}")
        except ValueError:
            continue
        if not isinstance(metrics, dict) or not all(
                isinstance(metrics.get(k), int | float) for k in KEYS):
            continue
        seg, fan = int(r["segsize"] or 0), int(r["fanout"] or 0)
        key = (r["collective"], algorithm_label(r["algorithm"], seg, fan), r["nprocs"],
               r["mapping"] or "", r["size_bytes"])
        out.setdefault(key, []).append((seg, fan, {k: metrics[k] for k in KEYS}))
    return out


def table(whys: Sequence[Why]) -> Any:
    """The report's table (report --model: the models section)."""
    from collbench.report import html

    seen = any(w.measured for w in whys)
    return html.Table(COLUMNS, tuple(tuple(str(r[c]) for c in COLUMNS) for r in rows(whys)),
                      "Why: messages and bytes per level on the critical path (the slowest "
                      "rank's) and the dominant term of the predicted time; "
                      f"{'measured counts: the next table' if seen else PREDICTED_ONLY}")


def measured_table(whys: Sequence[Why]) -> Any:
    """The report's measured table (None when no row holds pml/monitoring counts)."""
    from collbench.report import html

    seen = measured_rows(whys)
    if not seen:
        return None
    return html.Table(MEASURED_COLUMNS,
                      tuple(tuple(str(r[c]) for c in MEASURED_COLUMNS) for r in seen),
                      f"Measured with Open MPI pml/monitoring (schedule / measured); "
                      f"{MEASURED_NOTE}")
