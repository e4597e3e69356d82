"""The network rooms import only downward: protocol below server and client, cli above both."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.source_tree import parsed

ROOT = REPO

QUORUM_VALUES = ("api.protocol.quorum.messages", "api.protocol.quorum.bounds")
"""The quorum's messages and the ranges their numbers must be in: the wire codec decodes to them,
the core steps them, the client reads them. They sit with the codec so that `api.client` needs
nothing of `api.raft`, and import nothing of `api` so that the core stays sans-IO."""

CANCELLATION = "api.cancellation"
"""Ending a task without hiding the caller's cancellation: a leaf module (asyncio only) that
every asyncio shell uses."""

HISTORY_DIR = "api.history_dir"
"""Where a data directory's history is read: its log, or its view over the archive. A leaf over
`metadata_log` (checked below): the CLI, the Python API and the server (its reads below the
local log start, from its own archive) open the history through it."""

ALLOWED = {
    "api.protocol": ("api.protocol",),
    "api.server": (
        "api.server",
        "api.protocol",
        "api.service",
        "api.security",
        "api.raft",
        # Forwarding (KIP-590): a follower sends writes to the leader over a client
        # connection, secured as the quorum's links are.
        "api.client.connection",
        CANCELLATION,
        HISTORY_DIR,
    ),
    "api.client": (
        "api.client",
        "api.protocol",
        "api.security",
        CANCELLATION,
        # DescribeQuorum (`mlog quorum describe`): the wire codec and the messages it decodes to.
    ),
    # The quorum: its links are clients, its shell drives the service.
    "api.raft": (
        "api.raft",
        "api.protocol",
        "api.client.connection",
        "api.service",
        "api.security",
        CANCELLATION,
    ),
    # The sans-IO core imports nothing of `api` but itself and the quorum's messages (the
    # values it steps and hands out) with their bounds: two modules that import nothing of
    # `api` themselves (checked below), so the core loads no codec, socket or service.
    "api.raft.core": ("api.raft.core", *QUORUM_VALUES),
    # A leaf: the controller, the server, the client and the CLI all use it.
    "api.security": ("api.security",),
}
"""What each room may import from `api`; the layers below `api` (records, replay) are free."""

PROTOCOL_REPLAY = ("replay.controller.commands", "replay.controller.errors")
"""All the wire codec may import of replay: the domain's commands and errors, which it carries.
The image, the deltas and time travel stay out; the server and the client convert."""


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(parsed(path)):
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


def test_the_wire_codec_imports_of_replay_only_the_domain_values() -> None:
    files = sorted((ROOT / "api" / "protocol").rglob("*.py"))
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _imports(path)
        if (name == "replay" or name.startswith("replay.")) and name not in PROTOCOL_REPLAY
    }
    assert not wrong, sorted(wrong)


def test_loading_the_wire_codec_loads_no_image_delta_or_time_travel() -> None:
    code = (
        "import sys\n"
        "import api.protocol.codec, api.protocol.connection, api.protocol.private\n"
        "print(sorted(m for m in sys.modules if m.startswith('replay.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert ast.literal_eval(out) == ["replay.controller", *PROTOCOL_REPLAY]


def test_the_quorum_messages_import_nothing_of_api_but_each_other() -> None:
    files = [ROOT / (name.replace(".", "/") + ".py") for name in QUORUM_VALUES]
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _imports(path)
        if (name == "api" or name.startswith("api.")) and name not in QUORUM_VALUES
    }
    assert not wrong, sorted(wrong)


def test_the_history_dir_imports_nothing_of_api_when_run() -> None:
    # Its one name of `api` is a type (the settings), imported for the type checker only.
    code = (
        "import sys\n"
        "import api.history_dir\n"
        "print(sorted(m for m in sys.modules if m.startswith('api.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert ast.literal_eval(out) == [HISTORY_DIR]


def test_loading_the_raft_core_loads_no_codec() -> None:
    code = (
        "import sys\n"
        "import api.raft.core\n"
        "names = (m for m in sys.modules if m.startswith('api.'))\n"
        "print(sorted(m for m in names if not m.startswith('api.raft')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert ast.literal_eval(out) == ["api.protocol", "api.protocol.quorum", *sorted(QUORUM_VALUES)]


@pytest.mark.parametrize("layer", ["records", "metadata_log", "replay"])
def test_a_layer_below_api_imports_nothing_of_api(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _imports(path)
        if name == "api" or name.startswith("api.")
    }
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("module", ["api/python_api.py", "api/targets.py"])
def test_the_python_api_and_its_targets_import_nothing_of_the_cli(module: str) -> None:
    wrong = {n for n in _imports(ROOT / module) if n == "api.cli" or n.startswith("api.cli.")}
    assert not wrong, sorted(wrong)


def test_opening_a_data_directory_from_python_loads_no_cli_module(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from api import Metadata\n"
        f"with Metadata.open({str(tmp_path)!r}) as md:\n"
        "    md.register_broker(1)\n"
        "    md.create_topic('orders', partitions=1)\n"
        "    assert len(list(md.read())) > 1\n"
        "print(sorted(m for m in sys.modules if m == 'api.cli' or m.startswith('api.cli.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert ast.literal_eval(out.splitlines()[-1]) == []


def test_the_cancellation_helper_imports_nothing_of_api() -> None:
    path = ROOT / "api" / "cancellation.py"
    assert not {n for n in _imports(path) if n == "api" or n.startswith("api.")}
