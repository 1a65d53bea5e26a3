"""The DuckDB connections a command has open, interrupted when a stop ends it.

A Ctrl-C raised in Python ends only the main thread's share of a DuckDB query: DuckDB then
waits for the task each worker thread runs to its end, which in a long query takes minutes
(one start in four, measured on DuckDB 2.0.1). Interrupting the connection ends those tasks
too, within a chunk."""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import duckdb

# weak: a connection closed and dropped leaves the set on its own
_OPEN: Final[weakref.WeakSet[duckdb.DuckDBPyConnection]] = weakref.WeakSet()


def opened(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """`con`, interrupted by interrupt() for as long as it lives."""
    _OPEN.add(con)
    return con


def interrupt() -> None:
    """Interrupt the query of every open connection (none, none at all: nothing happens)."""
    if not _OPEN:
        return  # DuckDB was not imported: do not import it here (a signal handler)
    import duckdb

    for con in list(_OPEN):
        with contextlib.suppress(duckdb.ConnectionException):  # closed already
            con.interrupt()
