"""Snapshots written in a forked child: the result comes back, failures are one line, and the
parent's own database connections survive the child."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import Connection, text

from api.service.service import MetadataService
from api.service.snapshot_runners import AbandonedError, ForkedRunner, ThreadRunner
from api.service.snapshots import Snapshotter
from metadata_log.reader import LogReader
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.loader import load_image
from replay.sql.errors import SnapshotStoreError
from replay.sql.store import SnapshotStore

T = TypeVar("T")


def _nothing() -> None:
    """No preparation in the child."""


def test_the_work_runs_in_another_process_and_its_result_comes_back() -> None:
    parent = os.getpid()
    child, niceness = ForkedRunner(niceness=7).run(
        lambda: (os.getpid(), os.nice(0)), in_child=_nothing
    )
    assert child != parent
    assert niceness == os.nice(0) + 7


def test_in_child_runs_in_the_child_before_the_work(tmp_path: Path) -> None:
    marks = tmp_path / "marks"

    def prepare() -> None:
        marks.write_text(str(os.getpid()))

    def work() -> tuple[int, str]:
        return os.getpid(), marks.read_text()

    child, prepared_in = ForkedRunner().run(work, in_child=prepare)
    assert prepared_in == str(child) != str(os.getpid())


def test_a_store_error_in_the_child_is_the_parents_error() -> None:
    def work() -> None:
        raise SnapshotStoreError("database is locked; retry later")

    with pytest.raises(SnapshotStoreError, match=r"^database is locked; retry later$"):
        ForkedRunner().run(work, in_child=_nothing)


def test_any_other_error_in_the_child_is_named() -> None:
    def work() -> None:
        raise ValueError("bad row")

    with pytest.raises(SnapshotStoreError, match=r"^ValueError: bad row$"):
        ForkedRunner().run(work, in_child=_nothing)


def test_a_child_killed_mid_write_is_a_store_error_naming_the_signal() -> None:
    def work() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(SnapshotStoreError, match="killed by SIGKILL"):
        ForkedRunner().run(work, in_child=_nothing)


def test_a_child_that_exits_without_a_result_is_a_store_error() -> None:
    def work() -> None:
        os._exit(3)

    with pytest.raises(SnapshotStoreError, match=r"ended \(status 3\) without a result"):
        ForkedRunner().run(work, in_child=_nothing)


@pytest.mark.parametrize("niceness", [-1, 20])
def test_a_niceness_out_of_range_is_refused(niceness: int) -> None:
    with pytest.raises(SnapshotStoreError, match=r"niceness must be 0\.\.19"):
        ForkedRunner(niceness=niceness)


def _fill(service: MetadataService, topics: int) -> None:
    for broker_id in (1, 2):
        request = RegisterBroker(broker_id=broker_id)
        service.execute(functools.partial(service.controller.register_broker, request=request))
    for n in range(topics):
        topic = CreatableTopic(name=f"t{n}", num_partitions=2, replication_factor=2)
        service.execute(functools.partial(service.controller.create_topics, topics=[topic]))


def test_a_forked_snapshot_is_the_image_and_the_parent_keeps_its_connections(
    tmp_path: Path, database_url: str
) -> None:
    log_dir = tmp_path / "log"
    store = SnapshotStore(database_url)
    snapshotter = Snapshotter(store, retention=2, runner=ForkedRunner())
    with MetadataService.open(log_dir, snapshots=snapshotter) as service:
        _fill(service, 5)
        first = snapshotter.request(service.image, service.log).result()
        assert first is not None
        # The parent now holds a pooled connection of its own (a session on PostgreSQL).
        with store.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            before = conn.connection.dbapi_connection
        service.execute(
            functools.partial(
                service.controller.create_topics,
                topics=[CreatableTopic(name="late", num_partitions=1, replication_factor=1)],
            )
        )
        second = snapshotter.request(service.image, service.log).result()
        assert second is not None and second.offset == service.image.provenance.offset
        assert snapshotter.written == second
        # The child's connections were its own: the parent's pooled one still answers (the
        # pool's pre-ping would have replaced a connection the child had used or closed).
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
            assert conn.connection.dbapi_connection is before
        assert [s.id for s in store.snapshots()] == [first.id, second.id]
        loaded = store.load(second.id)
        assert loaded == service.image
    with LogReader.open(log_dir) as log:
        assert load_image(log) == loaded


def _session(conn: Connection) -> object:
    """PostgreSQL's backend process of a connection (None on SQLite)."""
    if conn.dialect.name != "postgresql":
        return None
    return conn.execute(text("SELECT pg_backend_pid()")).scalar()


def test_the_child_opens_connections_of_its_own(database_url: str) -> None:
    store = SnapshotStore(database_url)
    with store.engine.connect() as conn:
        parents = conn.connection.dbapi_connection
        parents_session = _session(conn)

    def work() -> tuple[bool, object]:
        # `parents` stays alive here, so a new connection cannot take its address.
        with store.engine.connect() as conn:
            return conn.connection.dbapi_connection is parents, _session(conn)

    reused, childs_session = ForkedRunner().run(work, in_child=store.forget_connections)
    assert not reused
    assert childs_session is None or childs_session != parents_session
    with store.engine.connect() as conn:
        assert conn.connection.dbapi_connection is parents
    store.close()


def test_only_an_in_memory_store_is_not_shared_with_a_child(tmp_path: Path) -> None:
    # A child's in-memory database would vanish with it: such a store stays on the thread.
    assert not SnapshotStore("sqlite://").shared_between_processes
    assert SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}").shared_between_processes
    assert SnapshotStore("postgresql+psycopg://postgres@127.0.0.1/test").shared_between_processes


def test_the_thread_runner_runs_the_work_here() -> None:
    assert ThreadRunner().run(os.getpid, in_child=_nothing) == os.getpid()


def test_abandon_kills_the_child_under_way() -> None:
    runner = ForkedRunner()
    assert not runner.abandon()  # nothing under way

    def slow() -> None:
        time.sleep(60)

    outcome: list[BaseException] = []

    def run() -> None:
        try:
            runner.run(slow, in_child=_nothing)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    started = time.monotonic()
    thread.start()
    deadline = started + 30
    while not runner.abandon():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)
    thread.join(30)
    assert not thread.is_alive()
    (error,) = outcome
    assert isinstance(error, AbandonedError)
    assert "server is stopping" in str(error)
    assert time.monotonic() - started < 30


def test_a_connection_closed_while_the_child_runs_ends_at_once(tmp_path: Path) -> None:
    """The child holds no copy of the parent's sockets: a close reaches the peer now."""
    marks = tmp_path / "child-started"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        with client, accepted:

            def slow() -> bool:
                marks.touch()
                time.sleep(30)
                return True

            runner = ForkedRunner()

            def run() -> None:
                with contextlib.suppress(AbandonedError):  # given up below, once checked
                    runner.run(slow, in_child=_nothing)

            thread = threading.Thread(target=run)
            thread.start()
            try:
                deadline = time.monotonic() + 30
                while not marks.exists():
                    assert time.monotonic() < deadline, "the child never started"
                    time.sleep(0.01)
                accepted.close()
                client.settimeout(20)  # well before the child's 30 s end would close it
                assert client.recv(1) == b""  # the end of the stream, not a timeout
            finally:
                runner.abandon()
                thread.join(30)


def test_the_child_writes_no_signal_to_a_descriptor_it_closed() -> None:
    """The loop's wake-up socket is unset in the child before its sockets are closed."""
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        previous = signal.set_wakeup_fd(left.fileno())
        try:
            in_child = ForkedRunner().run(lambda: signal.set_wakeup_fd(-1), in_child=_nothing)
        finally:
            signal.set_wakeup_fd(previous)
    assert in_child == -1


async def test_a_sigterm_to_the_child_ends_the_child_not_the_parent(tmp_path: Path) -> None:
    """As `mlog serve` handles SIGTERM: the parent's handler must not hear the child's."""
    started = tmp_path / "child-started"  # made by `in_child`, after the child's own set-up

    def mark_started() -> None:
        started.write_text(str(os.getpid()))

    loop = asyncio.get_running_loop()
    heard: list[str] = []
    loop.add_signal_handler(signal.SIGTERM, heard.append, "parent")
    runner = ForkedRunner()
    try:
        ran = loop.run_in_executor(
            None, lambda: runner.run(lambda: time.sleep(30), in_child=mark_started)
        )
        deadline = time.monotonic() + 30
        while not started.exists() or not started.read_text():
            assert time.monotonic() < deadline, "the child never started"
            await asyncio.sleep(0.01)
        os.kill(int(started.read_text()), signal.SIGTERM)
        with pytest.raises(SnapshotStoreError, match="killed by SIGTERM"):
            await asyncio.wait_for(ran, 30)
        await asyncio.sleep(0.2)  # a wake-up byte, had one been written, is read by now
        assert heard == []
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


class _SlowChild(ForkedRunner):
    """A child whose snapshot takes a minute (a busy host at the lowest priority)."""

    def run(self, work: Callable[[], T], *, in_child: Callable[[], None]) -> T:
        def slow() -> T:
            time.sleep(60)
            return work()

        return super().run(slow, in_child=in_child)


def test_a_stopping_service_gives_up_a_snapshot_in_its_child(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}")
    runner = _SlowChild()
    snapshotter = Snapshotter(store, runner=runner)
    service = MetadataService.open(tmp_path / "log", snapshots=snapshotter)
    _fill(service, 2)
    pending = snapshotter.request(service.image, service.log)
    deadline = time.monotonic() + 30
    while runner._child is None:  # the child under test
        assert time.monotonic() < deadline and not pending.done()
        time.sleep(0.01)
    caplog.set_level(logging.INFO, logger="api.service.snapshots")
    started = time.monotonic()
    service.close()
    assert time.monotonic() - started < 30  # not the child's minute
    assert pending.result() is None
    assert "given up: the server is stopping" in caplog.text
    assert snapshotter.last_error is None  # not a failure to retry and warn about
    assert store.snapshots() == []


def test_a_fork_that_fails_is_a_store_error_and_leaks_no_descriptor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_fork() -> int:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    runner = ForkedRunner()
    open_before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(SnapshotStoreError, match="could not start the snapshot's child process"):
        runner.run(os.getpid, in_child=_nothing)
    assert len(os.listdir("/proc/self/fd")) == open_before
    assert not runner.abandon()  # no child is left to give up
