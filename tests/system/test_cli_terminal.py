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
