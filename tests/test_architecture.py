"""The shape of the package: no import cycles, one module that knows the folder layout,
no caller that tests a backend's name or class, the layer contract kept."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "collbench"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every collbench module this file imports, wherever the import stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("collbench"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("collbench")}
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others() -> None:
    modules = _modules()
    graph = {m: {t for t in _imports(p, modules) if t in modules and t != "collbench"}
             for m, p in modules.items()}
    assert _cycles(graph) == []


# File names of the folder, and its sub-folders used as path segments.
LAYOUT = re.compile(r"""["'](provenance\.json|spec\.toml|plan\.json|campaign\.json|"""
                    r"""ompi_info\.txt)["']|/\s*["'](launches|work|samples)["']|"""
                    r"""["'](launches|work|samples)/""")


def test_only_the_store_spells_the_folder_layout() -> None:
    offenders = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") if p.name != "store.py"
                 for i, line in enumerate(p.read_text().splitlines(), start=1)
                 if LAYOUT.search(line) and not line.lstrip().startswith("#")]
    assert offenders == []


# Who may read a results folder's rows without collbench.points, and why.
RAW_READERS = {
    "store.py": "defines the measurements and samples views",
    "points.py": "the read door",
    "commands/query.py": "the user's own SQL over the stored rows",
    "api.py": "DataFrames of the stored rows as they are",
    "commands/tune.py": "the stored mpi keys that Store(only_mpi=...) filters on",
    "tune/adaptive/replay.py": "the per-iteration samples side table",
    "__init__.py": "a docstring example of Store.connect",
}


def test_every_reader_of_rows_goes_through_the_read_door() -> None:
    pattern = re.compile(r"FROM measurements|\.connect\(\)")
    readers = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
               if pattern.search(p.read_text())}
    assert readers <= set(RAW_READERS), sorted(readers - set(RAW_READERS))


BACKEND_TEST = re.compile(r"""backend(_name)?\s*[!=]=\s*["']|isinstance\([^)]*Backend\)|"""
                          r"""\.name\s*==\s*["'](local|slurm|simgrid|fake)["']""")


def test_no_caller_tests_what_kind_a_backend_is() -> None:
    allowed = {"runner.py", "campaign.py", "launch/base.py"}  # the one dispatch, the opener
    offenders = [f"{p.relative_to(SRC)}:{i}: {line.strip()}" for p in SRC.rglob("*.py")
                 if str(p.relative_to(SRC)) not in allowed
                 for i, line in enumerate(p.read_text().splitlines(), start=1)
                 if BACKEND_TEST.search(line)]
    assert offenders == []


def test_no_argparse_namespace_below_the_commands() -> None:
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if "Namespace" in p.read_text()
                 and p.relative_to(SRC).parts[0] not in ("commands", "cli.py")]
    assert offenders == []


def test_layer_contract_is_kept() -> None:
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("import-linter is not installed")
    done = subprocess.run([tool, "--no-cache"], cwd=SRC.parents[1], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 kept, 0 broken" in done.stdout


def test_public_api_names_resolve() -> None:
    import collbench

    for name in collbench.__all__:
        assert getattr(collbench, name) is not None
    assert {"open", "Results"} <= set(collbench.__all__)  # the notebook API (api.py)
    with pytest.raises(AttributeError):
        collbench.no_such_name  # noqa: B018
