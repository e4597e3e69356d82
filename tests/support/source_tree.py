"""The repository's Python sources, each read and parsed once per test process.

The static checks (import rooms, the Raft boundaries, the CLI's conventions, the docs' facts)
each walk every source file; parsing them again in every check cost seconds of the units'
run. They share these cached trees instead: a tree is read-only by agreement (no check
mutates one).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.support.paths import REPO

PRODUCT = ("records", "metadata_log", "replay", "api", "migrations")
"""The product's packages."""

SOURCES = (*PRODUCT, "tools", "bench", "tests")
"""Every directory of Python code in the repository."""


@functools.cache
def source(path: Path) -> str:
    """The text of a source file, read once."""
    return path.read_text()


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The AST of a source file, parsed once (shared: never mutate it)."""
    return ast.parse(source(path), str(path))


@functools.cache
def python_files(*folders: str) -> tuple[Path, ...]:
    """The `.py` files under `folders` (relative to the repository), sorted, no virtualenv."""
    return tuple(
        path
        for folder in folders
        for path in sorted((REPO / folder).rglob("*.py"))
        if ".venv" not in path.parts and "node_modules" not in path.parts
    )


def module_path(name: str) -> Path | None:
    """The file of a dotted module name (`replay.delta.topics`), or None if there is none."""
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_level_names(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top (functions, classes, assignments)."""
    names: set[str] = set()
    for node in parsed(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:`, guarded imports
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    names.update(
                        (alias.asname or alias.name).split(".")[0] for alias in inner.names
                    )
                elif isinstance(inner, ast.FunctionDef | ast.ClassDef):
                    names.add(inner.name)
                elif isinstance(inner, ast.Assign):
                    names.update(t.id for t in inner.targets if isinstance(t, ast.Name))
    return frozenset(names)
