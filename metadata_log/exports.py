"""A package's public names, declared once by its `if TYPE_CHECKING:` re-exports.

A package that imports its names lazily (so that importing one of its modules stays cheap)
declares each name once, as `from module import Name as Name` under `TYPE_CHECKING` (what mypy
reads); these helpers derive from that block the name -> module table and `__all__` that the
interpreter needs, so the list is never written twice.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def declared_exports(source_path: str) -> dict[str, str]:
    """{name: module} from the `from M import N as N` lines under `if TYPE_CHECKING:`."""
    import ast  # only on a package's first lazy lookup: `ast` costs a start-up otherwise

    with open(source_path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), source_path)
    homes: dict[str, str] = {}
    for node in tree.body:
        if not (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                for alias in statement.names:
                    homes[alias.asname or alias.name] = statement.module
    return homes


def lazy_getattr(package: str, source_path: str) -> Callable[[str], object]:
    """A PEP 562 `__getattr__` for `package` (its `__init__` at `source_path`).

    Each declared name is imported from its module on first use, once; `__all__` is the
    declared names. The declarations are read on the first lookup.
    """
    homes: dict[str, str] = {}

    def __getattr__(name: str) -> object:  # noqa: N807 - the module hook's own name
        """`<package>.<name>`: import the module that defines it, once."""
        if not homes:
            homes.update(declared_exports(source_path))
        if name == "__all__":
            return sorted(homes)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
