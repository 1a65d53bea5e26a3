"""What `tune` writes and prints besides the coll/tuned rules: the file writer, the
per-regime summary, and coll/han's rules file beside the rules (shared by `tune RESULTS`
and `tune --model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collbench.errors import UserError


def write_file(path: Path, text: str) -> None:
    from collbench.storefiles import atomic_write

    try:
        atomic_write(path, text.encode())
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror or e}") from None


def summary(selection: Any, notes: Any) -> None:
    from collbench.sizes import format_size

    for (coll, nprocs), choices in sorted(selection.tables.items()):
        parts = []
        for ch in choices:
            gain = f" ({ch.ratio:.2f}x)" if ch.ratio is not None and ch.algorithm != \
                "default" else ""
            seg = f"[seg={ch.segsize}]" if ch.segsize else ""
            fan = f"[fanout={ch.fanout}]" if ch.fanout else ""
            parts.append(f">={format_size(ch.threshold)} {ch.algorithm}{seg}{fan}{gain}")
        print(f"{coll} np={nprocs}: " + ", ".join(parts))
    for n in notes:
        print(f"note: {n}")
    for e in selection.evidence:
        print(f"evidence: {e}")


def han_rules_beside(selection: Any, output: Path, source: str) -> list[tuple[str, str]]:
    """Where han's hierarchy was the default (Open MPI 5.0 on several nodes), han's dynamic
    rules file beside the tuned one (OUTPUT.han): it hands the top level to coll/tuned where
    a tuned algorithm won (docs/components.md). Its activation settings ([] when none)."""
    from collbench.tune import han

    rules = han.build(selection)
    if rules is None:
        return []
    if not selection.mpi_version.startswith("5."):
        print(f"note: the default was coll/han's at {len(selection.han_defaults)} regime(s); "
              f"han rules files are written for Open MPI 5.0 (measured: "
              f"{selection.mpi_version}), so none was")
        return []
    path = output.with_name(output.name + ".han")
    write_file(path, han.format_rules(rules, source))
    han.read(path)  # our own output must read back as Open MPI reads it
    print(f"wrote {path} (coll/han dynamic rules: coll/tuned at the top level where a tuned "
          "algorithm won over han's default, han elsewhere)")
    for line in han.describe(rules):
        print(f"  {line}")
    return han.activation(path)
