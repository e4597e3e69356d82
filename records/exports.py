"""A package's public names, declared once by its `if TYPE_CHECKING:` re-exports.

A package that imports its names lazily (so that importing one of its modules stays cheap)
declares each name once, as `from module import Name as Name` under `TYPE_CHECKING` (the form
strict mypy re-exports); these helpers derive from that block the name -> module table and
`__all__` that the interpreter needs, so the list is never written twice. `records` and
`metadata_log` both use them.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable

_IMPORT = re.compile(r"from ([\w.]+) import \(?\s*(\w+) as \2\b")
"""One `from <module> import <Name> as <Name>` line (or its parenthesised form)."""


def declared_exports(source_path: str | None) -> dict[str, str]:
    """{name: module} from the `X as X` imports of the `if TYPE_CHECKING:` block of a file.

    Read with a pattern rather than `ast`, whose import alone would cost more than the rest of
    a package's start-up, and as a file (a loader's `get_source` imports `tokenize`). The
    block ends at its first blank line.
    """
    if source_path is None or not source_path.endswith(".py"):
        raise ImportError(f"{source_path}: a package needs its source to know its public names")
    with open(source_path, encoding="utf-8") as source:
        text = source.read()
    block = text.split("\nif TYPE_CHECKING:\n", 1)[1].split("\n\n", 1)[0]
    return {name: module for module, name in _IMPORT.findall(block)}


def lazy_getattr(package: str, source_path: str | None) -> Callable[[str], object]:
    """A PEP 562 `__getattr__` for `package` (its `__init__` at `source_path`).

    Each declared name is imported from its module on first use, once; `__all__` is the
    sorted declared names. The declarations are read on the first lookup.
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
