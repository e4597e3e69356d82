"""The network rooms import only downward: protocol below server and client, cli above both."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO

ALLOWED = {
    "api.protocol": ("api.protocol", "api.controller.commands", "api.controller.errors"),
    "api.server": ("api.server", "api.protocol", "api.service", "api.controller", "api.security"),
    "api.client": ("api.client", "api.protocol", "api.controller", "api.security"),
    # A leaf: the controller, the server, the client and the CLI all use it.
    "api.security": ("api.security",),
}
"""What each room may import from `api`; the layers below `api` (records, replay) are free."""


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_a_network_room_imports_only_the_rooms_below_it(room: str) -> None:
    files = sorted((ROOT / room.replace(".", "/")).rglob("*.py"))
    assert files
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _imports(path)
        if (name == "api" or name.startswith("api."))
        and not any(name == ok or name.startswith(ok + ".") for ok in ALLOWED[room])
    }
    assert not wrong, sorted(wrong)
