"""`mlog` at a terminal: Ctrl-C ends any command with one line and exit 130, nothing written."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.cli import entries, ok
from tests.support.terminal import Terminal

pytestmark = pytest.mark.process


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory with a broker and a topic."""
    ok(tmp_path, "brokers", "register", "--id", "1")
    ok(tmp_path, "topics", "create", "--topic", "orders", "--partitions", "2")
    return tmp_path


def test_ctrl_c_in_log_append_prints_one_line_and_writes_nothing(data_dir: Path) -> None:
    before = entries(data_dir)
    term = Terminal(["--data-dir", str(data_dir), "log", "append"])
    term.wait_reading_input()
    term.type('{"type": "NAMESPACE_RECORD", "name": "org"}\n')  # half an input, then Ctrl-C
    term.type("\x03")
    code, shown = term.finish()
    assert code == 130
    assert "Traceback" not in shown
    assert shown.rstrip().endswith("mlog: interrupted")
    assert entries(data_dir) == before


def test_ctrl_c_in_the_interactive_shell_ends_it_with_one_line(data_dir: Path) -> None:
    term = Terminal(["--data-dir", str(data_dir), "shell"])
    term.read_until("/ $ ")
    term.type("cd /topics/byName\n")
    term.read_until("byName $ ")
    term.type("ls\n")
    assert "orders" in term.read_until("orders")
    term.type("\x03")
    code, shown = term.finish()
    assert code == 130
    assert "Traceback" not in shown and "KeyboardInterrupt" not in shown
    assert shown.splitlines()[-1] == "mlog: interrupted"


def test_ctrl_c_while_waiting_for_a_server_prints_one_line(data_dir: Path) -> None:
    # A server that accepts the connection and never answers: the command waits on it.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        term = Terminal(["topics", "list", "--bootstrap-server", f"127.0.0.1:{port}"])
        connection, _ = silent.accept()
        with connection:
            term.type("\x03")
            code, shown = term.finish()
    assert code == 130
    assert "Traceback" not in shown
    assert shown.splitlines()[-1] == "mlog: interrupted"


def _silent_server() -> socket.socket:
    """A server that accepts connections and never answers: a command waits on it.

    Its accept and reads give up after a minute: a command that never connects fails the
    test instead of hanging it.
    """
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)
    return server


READING_INPUT = {
    "log append": ["log", "append"],
    "log import": ["log", "import"],
    "users scram-set --password-stdin": [
        *("users", "scram-set", "--name", "alice", "--mechanism", "SCRAM-SHA-256"),
        "--password-stdin",
    ],
    "acls remove (its confirmation)": ["acls", "remove", "--topic", "orders"],
}
"""Commands that wait for standard input, by what they are."""


@pytest.mark.parametrize("args", READING_INPUT.values(), ids=READING_INPUT.keys())
def test_ctrl_c_in_every_command_reading_input_ends_it_with_130(
    args: list[str], data_dir: Path, tmp_path: Path
) -> None:
    # `log import` goes to a new data directory: the interrupted import leaves none behind.
    where = tmp_path / "imported" if args[:2] == ["log", "import"] else data_dir
    before = entries(data_dir)
    term = Terminal(["--data-dir", str(where), *args])
    term.wait_reading_input()
    term.type("\x03")
    code, shown = term.finish()
    assert code == 130, shown
    assert "Traceback" not in shown
    assert shown.splitlines()[-1] == "mlog: interrupted"
    assert entries(data_dir) == before
    assert where == data_dir or not where.exists()


WAITING_ON_A_SERVER = {
    "topics list": ["topics", "list"],
    "topics create (a write never answered)": ["topics", "create", "--topic", "t"],
    "log dump --follow": ["log", "dump", "--follow"],
    "history": ["history", "--topic", "orders"],
    "quorum describe": ["quorum", "describe"],
    "acls add": [
        "acls",
        "add",
        "--allow-principal",
        "User:a",
        "--topic",
        "t",
        "--operation",
        "Read",
    ],
}
"""Commands waiting for a server's answer, by what they are."""


@pytest.mark.parametrize("args", WAITING_ON_A_SERVER.values(), ids=WAITING_ON_A_SERVER.keys())
def test_ctrl_c_in_every_command_waiting_on_a_server_ends_it_with_130(args: list[str]) -> None:
    with _silent_server() as silent:
        port = silent.getsockname()[1]
        term = Terminal([*args, "--bootstrap-server", f"127.0.0.1:{port}"])
        connection, _ = silent.accept()
        with connection:
            connection.settimeout(60)
            assert connection.recv(1)  # the command's first request: it waits for the answer
            term.type("\x03")
            code, shown = term.finish()
    assert code == 130, shown
    assert "Traceback" not in shown
    assert shown.splitlines()[-1] == "mlog: interrupted"


def test_ctrl_c_in_log_dump_follow_on_the_data_directory_ends_it_with_130(data_dir: Path) -> None:
    term = Terminal(["--data-dir", str(data_dir), "log", "dump", "--follow"])
    term.read_until("PARTITION_RECORD")
    term.type("\x03")
    code, shown = term.finish()
    assert code == 130, shown
    assert shown.splitlines()[-1] == "mlog: interrupted"
    assert shown.count("TOPIC_RECORD") == 1  # what it printed is intact


def test_ctrl_c_stops_serve_cleanly_with_130(data_dir: Path) -> None:
    # SIGTERM (a service manager's stop) exits 0 (test_serve_cli.py); a Ctrl-C is 130, after
    # the same clean shutdown.
    term = Terminal(["--data-dir", str(data_dir), "serve", "--listen", "127.0.0.1:0"])
    term.read_until("serving on")
    term.type("\x03")
    code, shown = term.finish()
    assert code == 130, shown
    assert "stopped (SIGINT)" in shown
    assert "Traceback" not in shown
