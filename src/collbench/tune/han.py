"""coll/han's dynamic rules file: which component serves a collective, per topological
level, communicator size and message size (Open MPI 5.0: `coll_han_use_dynamic_file_rules`,
`coll_han_dynamic_rules_filename`; docs/components.md, "Tuning across components").

The format (coll_han_dynamic_file.h, read by coll_han_dynamic_file.c) nests counted sets:

    <collective count>
    <collective name>                  bcast, allreduce, ... (5.0 also reads ids)
    <topological level count>
    <level name>                       intra_node, inter_node, global_communicator
    <configuration count>
    <configuration size>               the level's size (communicator size at the global
                                       level); the first must be 1; ascending
    <message size rule count>
    <message size> <component>[ @<han algorithm>]   the first at 0; ascending

Each configuration size and message size is the smallest it applies to, up to the next.
`#` starts a comment. What collbench writes: at the global level, per measured regime
(collective, communicator size), `tuned` for the size ranges where a coll/tuned algorithm
measured on the whole communicator won over han's default, `han` elsewhere (`han
@simple` where one of han's own algorithms won: Selection.han_picks); the coll/tuned rules
file written beside it picks the algorithm. Outside the measured communicator sizes
the file says `han`, Open MPI's default: nothing is extended beyond what was measured.
han's message size is the count times the datatype size (a rank's block for gather,
scatter, allgather): OSU's size_bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from collbench.catalog.algorithms import DEFAULT
from collbench.errors import UserError
from collbench.tune.select import Selection
from collbench.version import __version__

# Collectives han's dynamic selection serves (mca_coll_han_is_coll_dynamic_implemented).
DYNAMIC: Final = ("allgather", "allgatherv", "allreduce", "barrier", "bcast", "gather",
                  "reduce", "scatter")
# Ids the 5.0 reader also accepts (COLLTYPE_T, coll_base_functions.h).
COLLTYPE_IDS: Final = {0: "allgather", 1: "allgatherv", 2: "allreduce", 5: "barrier",
                       6: "bcast", 8: "gather", 13: "reduce", 15: "scatter"}
LEVELS: Final = ("intra_node", "inter_node", "global_communicator")
COMPONENTS: Final = ("self", "basic", "libnbc", "tuned", "sm", "adapt", "han")
MAX_VALUE: Final = 2**62  # sizes and counts beyond this are no file Open MPI wrote for us
MAX_FILE: Final = 16 * 2**20
T = TypeVar("T")


@dataclass(frozen=True)
class MsgRule:
    size: int
    component: str
    algorithm: str | None = None  # han's own algorithm (`han @simple`), where given


@dataclass(frozen=True)
class Config:
    size: int
    rules: tuple[MsgRule, ...]


@dataclass(frozen=True)
class Level:
    name: str
    configs: tuple[Config, ...]


@dataclass(frozen=True)
class CollRules:
    collective: str
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class HanRules:
    collectives: tuple[CollRules, ...]

    def component(self, collective: str, comm_size: int, size: int,
                  level: str = "global_communicator") -> str | None:
        """The component the file makes han hand `collective` to (None: no rule)."""
        for c in self.collectives:
            if c.collective != collective:
                continue
            for lv in c.levels:
                if lv.name != level:
                    continue
                config = _last(lv.configs, lambda x: x.size <= comm_size)
                rule = _last(config.rules, lambda r: r.size <= size) if config else None
                if rule is not None:
                    return rule.component
        return None


def _last(items: Sequence[T], keep: Callable[[T], bool]) -> T | None:
    """The last of `items` (ascending sizes) that `keep` accepts: the rule that applies."""
    found = None
    for item in items:
        if keep(item):
            found = item
    return found


def build(selection: Selection) -> HanRules | None:
    """The han rules that make Open MPI run a selection's winners at the top level where
    han's default was measured (None: no regime had one)."""
    by_coll: dict[str, list[Config]] = {}
    for coll, nprocs in sorted(selection.han_defaults):
        if coll not in DYNAMIC or (coll, nprocs) not in selection.tables:
            continue
        rules: list[MsgRule] = []
        for size, comp, alg in _steps(selection, coll, nprocs):
            if not rules or (rules[-1].component, rules[-1].algorithm) != (comp, alg):
                rules.append(MsgRule(0 if not rules else size, comp, alg))
        by_coll.setdefault(coll, []).append(Config(nprocs, tuple(rules)))
    if not by_coll:
        return None
    out = []
    for coll, configs in by_coll.items():
        han = (MsgRule(0, "han"),)
        seq: list[Config] = [] if configs[0].size == 1 else [Config(1, han)]
        for i, cfg in enumerate(configs):
            seq.append(cfg)
            nxt = configs[i + 1].size if i + 1 < len(configs) else None
            if nxt != cfg.size + 1:  # back to han's default beyond the measured size
                seq.append(Config(cfg.size + 1, han))
        out.append(CollRules(coll, (Level("global_communicator", tuple(seq)),)))
    return HanRules(tuple(out))


def _steps(selection: Selection, coll: str, nprocs: int
           ) -> list[tuple[int, str, str | None]]:
    """(from size, component, han algorithm) of a regime: `tuned` where the table left the
    default, `han` elsewhere, with the han algorithm that won at each measured size where
    one did (Selection.han_picks)."""
    table = selection.tables[(coll, nprocs)]
    picks = selection.han_picks.get((coll, nprocs))
    if not picks:
        return [(c.threshold, "han" if c.algorithm == DEFAULT else "tuned", None)
                for c in table]
    out = []
    for size, alg in picks:
        covering = [c for c in table if c.threshold <= size]
        choice = covering[-1] if covering else table[0]
        tuned = choice.algorithm != DEFAULT
        out.append((size, "tuned" if tuned else "han", None if tuned else alg))
    return out


def format_rules(rules: HanRules, source: str = "") -> str:
    lines = [f"# coll/han dynamic rules written by collbench {__version__}"
             + (f" from {source}" if source else ""),
             "# read with coll_han_use_dynamic_file_rules=1 and coll_han_dynamic_rules_filename",
             f"{len(rules.collectives)} # collectives"]
    for c in rules.collectives:
        lines += [c.collective, f"{len(c.levels)} # topological levels"]
        for lv in c.levels:
            lines += [f"{lv.name}", f"{len(lv.configs)} # configurations"]
            for cfg in lv.configs:
                lines += [f"{cfg.size} # communicator size", f"{len(cfg.rules)} # message sizes"]
                lines += [f"{r.size} {r.component}" + (f" @{r.algorithm}" if r.algorithm else "")
                          for r in cfg.rules]
    return "\n".join(lines) + "\n"


def activation(path: Path) -> list[tuple[str, str]]:
    """The MCA settings that make Open MPI 5.0's coll/han read the file."""
    return [("coll_han_use_dynamic_file_rules", "1"),
            ("coll_han_dynamic_rules_filename", str(path.resolve()))]


# --- reading, as coll_han_dynamic_file.c does ------------------------------------------------

_TOKEN: Final = re.compile(r"\S+")


class _Tokens:
    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.items: list[tuple[int, str]] = []
        for n, line in enumerate(text.splitlines(), 1):
            body = line.split("#", 1)[0]
            self.items += [(n, t) for t in _TOKEN.findall(body)]
        self.pos = 0

    def peek(self) -> str | None:
        return self.items[self.pos][1] if self.pos < len(self.items) else None

    def next(self, what: str, valid: str) -> tuple[int, str]:
        if self.pos >= len(self.items):
            last = self.items[-1][0] if self.items else 1
            raise UserError(f"{self.path}:{last}: {what}: the file ends here; valid: {valid}")
        self.pos += 1
        return self.items[self.pos - 1]

    def number(self, what: str, low: int, valid: str) -> int:
        line, tok = self.next(what, valid)
        try:
            value = int(tok)
        except ValueError:
            value = None
        if value is None or not low <= value <= MAX_VALUE:
            raise UserError(f"{self.path}:{line}: {what}: {tok[:40]!r} is not valid; "
                            f"valid: {valid}")
        return value

    def name(self, what: str, names: tuple[str, ...], ids: dict[int, str]) -> str:
        line, tok = self.next(what, ", ".join(names))
        if tok in names:
            return tok
        if tok.isdigit() and int(tok) in ids:
            return ids[int(tok)]
        raise UserError(f"{self.path}:{line}: {what}: {tok[:40]!r} is not valid; valid: "
                        f"{', '.join(names)}")

    def fail(self, what: str, value: object, valid: str) -> UserError:
        line = self.items[self.pos - 1][0] if self.pos else 1
        return UserError(f"{self.path}:{line}: {what}: {value!r} is not valid; valid: {valid}")


def parse(text: str, path: str) -> HanRules:
    """The rules of a han dynamic rules file, refused in one line (file:line, field, bad
    value, valid choices) where Open MPI would reject the file."""
    t = _Tokens(text, path)
    colls = []
    for _ in range(t.number("collective count", 1, "a count >= 1")):
        coll = t.name("collective", DYNAMIC + tuple(sorted(
            {"alltoall", "alltoallv", "reduce_scatter", "scan", "exscan"})),
            COLLTYPE_IDS)
        levels = []
        for _ in range(t.number("topological level count", 0, "a count >= 0")):
            level = t.name("topological level", LEVELS, dict(enumerate(LEVELS)))
            configs: list[Config] = []
            for k in range(t.number("configuration count", 0, "a count >= 0")):
                size = t.number("configuration size", 1, "a communicator size >= 1")
                if k == 0 and size != 1:
                    raise t.fail("configuration size", size, "1 for the first one")
                if configs and size <= configs[-1].size:
                    raise t.fail("configuration size", size,
                                 f"above the previous one ({configs[-1].size})")
                rules: list[MsgRule] = []
                for m in range(t.number("message size count", 0, "a count >= 0")):
                    msg = t.number("message size", 0, "bytes >= 0")
                    if m == 0 and msg != 0:
                        raise t.fail("message size", msg, "0 for the first one")
                    if rules and msg <= rules[-1].size:
                        raise t.fail("message size", msg,
                                     f"above the previous one ({rules[-1].size})")
                    comp = t.name("component", COMPONENTS, dict(enumerate(COMPONENTS)))
                    alg = None
                    nxt = t.peek()
                    if comp == "han" and nxt is not None and nxt.startswith("@"):
                        alg = t.next("han algorithm", "@<name>")[1][1:] or None
                    rules.append(MsgRule(msg, comp, alg))
                configs.append(Config(size, tuple(rules)))
            levels.append(Level(level, tuple(configs)))
        colls.append(CollRules(coll, tuple(levels)))
    if t.peek() is not None:
        raise t.fail("end of file", t.peek(), "nothing after the last collective's rules")
    return HanRules(tuple(colls))


def load(path: Path) -> str:
    """A han rules file's text (one line when it cannot be read)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot be read ({e.strerror}); valid: a readable han "
                        "rules file") from None
    if len(data) > MAX_FILE:
        raise UserError(f"{path}: {len(data)} bytes; valid: a han rules file (at most "
                        f"{MAX_FILE // 2**20} MiB)")
    return data.decode("utf-8", errors="replace")


def read(path: Path) -> HanRules:
    return parse(load(path), str(path))


def describe(rules: HanRules) -> Iterator[str]:
    """One line per message-size rule: 'bcast global_communicator np>=4 >=64K: tuned'."""
    from collbench.sizes import format_size

    for c in rules.collectives:
        for lv in c.levels:
            for cfg in lv.configs:
                for r in cfg.rules:
                    alg = f" @{r.algorithm}" if r.algorithm else ""
                    yield (f"{c.collective} {lv.name} np>={cfg.size} >={format_size(r.size)}: "
                           f"{r.component}{alg}")
