"""`ompi_info --all --parsable`, run once per Open MPI and environment, for every reader.

Each ompi_info start costs about 50 ms here whatever it is asked (it opens every
component), and a `run` or `plan` asked it four things: the version, coll/tuned's and
libnbc's algorithms, and the provenance dump. The full parsable listing holds all four
verbatim (`ompi:version:full:...`, the `mca:coll:tuned:...` and `mca:coll:libnbc:...`
lines), so one run serves them all. The key includes the Open MPI environment variables,
which change the listed values.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

ENV_PREFIXES = ("OMPI_", "OPAL_", "PMIX_", "PRTE_")
TIMEOUT_S = 120
_VERSION = re.compile(r"^ompi:version:full:(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Listing:
    argv: tuple[str, ...]
    text: str  # stdout; empty when ompi_info could not run
    error: str | None  # why it could not run (None: it ran)
    returncode: int | None = None

    def version(self) -> str | None:
        m = _VERSION.search(self.text)
        return m.group(1) if m else None


_lock = threading.Lock()
_runs: dict[tuple[str, tuple[tuple[str, str], ...]], Future[Listing]] = {}


def _run(argv: tuple[str, ...], done: Future[Listing]) -> None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                             check=False)
        done.set_result(Listing(argv, out.stdout, None, out.returncode))
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        done.set_result(Listing(argv, "", str(e)))


def start(ompi_info: Path) -> Future[Listing]:
    """The listing of this ompi_info, started in the background unless already asked."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)))
    try:  # a reinstalled Open MPI at the same path is another one
        st = ompi_info.stat()
        ident = f"{ompi_info}:{st.st_ino}:{st.st_mtime_ns}"
    except OSError:
        ident = str(ompi_info)
    key = (ident, env)
    with _lock:
        done = _runs.get(key)
        if done is None:
            done = _runs[key] = Future()
            argv = (str(ompi_info), "--all", "--parsable")
            threading.Thread(target=_run, args=(argv, done), daemon=True).start()
    return done


def listing(ompi_info: Path) -> Listing:
    """`ompi_info --all --parsable` of this Open MPI (run at most once per environment)."""
    return start(ompi_info).result()
