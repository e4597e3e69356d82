"""A hung server first in a CLI's `--bootstrap-server` list costs seconds (issue 54, finding 10).

Before: the CLI waited its 30 s request timeout on a server that accepts connections and never
answers (a quorum node stopped with SIGSTOP: 21-26 s with two healthy nodes after it). Now each
server of the list gets `api.client.bootstrap.SETUP_TIMEOUT_MS` (2 s) to connect and answer
ApiVersions. The tests check that the write succeeds and lands on the healthy servers, that a
hung socket sees the CLI close its connection, and print the CLI's time beside the same write
bootstrapped at a healthy server (a figure, not an assertion: the machine may be loaded).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.quorum_processes import TIMERS, Quorum, mlog
from tests.support.server_process import serve_process

pytestmark = pytest.mark.timeout(300)

HOLD_S = 120.0
"""How long the hung socket waits for the client to close its connection."""


@contextmanager
def hung_socket() -> Iterator[tuple[str, threading.Event]]:
    """A server that accepts one connection and never answers; the event: the client closed it."""
    listener = socket.create_server(("127.0.0.1", 0))
    closed = threading.Event()

    def hold() -> None:
        connection, _ = listener.accept()
        connection.settimeout(HOLD_S)
        try:
            while connection.recv(65536):
                pass  # requests read, never answered
            closed.set()
        except OSError:
            pass
        finally:
            connection.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", closed
    finally:
        listener.close()


def _timed(*args: str) -> tuple[str, float]:
    started = time.monotonic()
    out = mlog(*args)
    return out, time.monotonic() - started


def test_a_cli_write_leaves_a_hung_socket_for_the_next_server(tmp_path: Path) -> None:
    with (
        serve_process(tmp_path / "data", tmp_path / "serve.log") as healthy,
        hung_socket() as (hung, closed),
    ):
        _, baseline = _timed(
            "namespaces", "create", "--namespace", "first", "--bootstrap-server", healthy.address
        )
        _, seconds = _timed(
            "namespaces",
            "create",
            "--namespace",
            "after-hung",
            "--bootstrap-server",
            f"{hung},{healthy.address}",
        )
        assert closed.wait(HOLD_S), "the CLI never closed its connection to the hung server"
        listed = mlog("namespaces", "list", "--bootstrap-server", healthy.address)
    print(
        f"\nCLI write, hung socket first: {seconds:.2f} s; at the healthy server: {baseline:.2f} s"
    )
    assert "after-hung" in listed


def test_a_cli_write_leaves_a_stopped_quorum_node_for_the_healthy_ones(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers=TIMERS)
    quorum.start_all()
    try:
        asyncio.run(quorum.register_brokers())
        leader = asyncio.run(quorum.leader())
        stopped = next(i for i in quorum.nodes if i != leader)
        healthy = [node.address for i, node in quorum.nodes.items() if i != stopped]
        _, baseline = _timed(
            "topics", "create", "--topic", "first", "--bootstrap-server", ",".join(healthy)
        )
        quorum.signal(stopped, signal.SIGSTOP)
        try:
            _, seconds = _timed(
                "topics",
                "create",
                "--topic",
                "after-stopped",
                "--bootstrap-server",
                ",".join([quorum.nodes[stopped].address, *healthy]),
            )
            described = mlog("topics", "list", "--bootstrap-server", healthy[0])
        finally:
            quorum.signal(stopped, signal.SIGCONT)
    finally:
        quorum.stop_all()
    print(
        f"\nCLI write, stopped node first of 3: {seconds:.2f} s; at the healthy nodes: "
        f"{baseline:.2f} s"
    )
    assert "after-stopped" in described
