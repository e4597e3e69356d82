"""examples/broker.py, the broker docs/brokers.md tells you to run, against a real quorum.

It is started with the quorum's bootstrap list, registers and is unfenced; the leader is
killed (kill -9) under it. It must follow the new leader and keep heartbeating there: never
fenced (in the broker's own output, in the quorum's `mlog brokers list` and in the log),
never registered again, no traceback and no task exception left unretrieved. Then SIGINT
asks for a controlled shutdown, which it reports as such (not as a fence), exit 0.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from records.model import (
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    RegisterBrokerRecord,
)
from tests.support.paths import REPO
from tests.support.quorum_processes import TIMERS, Quorum, free_ports, mlog
from tests.support.server_process import serve_process

pytestmark = pytest.mark.timeout(240)

EXAMPLE = REPO / "examples" / "broker.py"
BROKER_ID = 10
SESSION_TIMEOUT_S = 9.0
"""`broker.session.timeout.ms`'s default: a broker silent this long would be fenced."""


def _start_broker(bootstrap: str, out: Path, err: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout, err.open("wb") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLE),
                "--bootstrap-server",
                bootstrap,
                "--broker-id",
                str(BROKER_ID),
                "--listener",
                "PLAINTEXT://b10.example:9092",
                "--rack",
                "r1",
            ],
            stdout=stdout,
            stderr=stderr,
            cwd=REPO,
        )


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} in {timeout:.0f} s")
        time.sleep(0.1)


def _brokers(bootstrap: str) -> dict[int, dict[str, object]]:
    """`mlog brokers list` as JSON, by broker id: the active controller's view."""
    text = mlog("brokers", "list", "--bootstrap-server", bootstrap, "--output", "json")
    return {int(b["broker_id"]): b for b in json.loads(text)}


def _broker_records(
    log_dir: Path,
) -> list[RegisterBrokerRecord | BrokerRegistrationChangeRecord]:
    """This broker's registrations and registration changes, in log order."""
    with LogReader.open(log_dir) as log:
        return [
            e.record
            for e in log.read()
            if isinstance(e.record, RegisterBrokerRecord | BrokerRegistrationChangeRecord)
            and e.record.broker_id == BROKER_ID
        ]


def test_the_example_broker_lives_through_a_killed_leader(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers=TIMERS)
    quorum.start_all()
    out, err = tmp_path / "broker.out", tmp_path / "broker.err"
    broker: subprocess.Popen[bytes] | None = None
    try:
        asyncio.run(quorum.serving())
        first = asyncio.run(quorum.leader())
        bootstrap = ",".join(n.address for n in quorum.nodes.values())
        broker = _start_broker(bootstrap, out, err)
        _wait_for("unfence", lambda: "unfenced at metadata offset" in out.read_text())

        quorum.kill(first)
        second = asyncio.run(quorum.leader())
        assert second != first
        new_address = quorum.nodes[second].address
        _wait_for(
            "controller channel to the new leader",
            lambda: f"controller channel to {new_address}" in out.read_text(),
        )
        # Long enough for the new leader to fence a broker that did not heartbeat to it (its
        # sessions start when it takes over): heartbeats answered there keep it unfenced.
        time.sleep(SESSION_TIMEOUT_S + 3)
        survivors = ",".join(n.address for n in quorum.nodes.values() if n.running)
        view = _brokers(survivors)[BROKER_ID]
        assert view["fenced"] is False and view["in_controlled_shutdown"] is False, view
        assert broker.poll() is None, err.read_text()

        broker.send_signal(signal.SIGINT)
        try:
            code = broker.wait(90)  # its controlled shutdown gives up after 60 s
        except subprocess.TimeoutExpired:
            raise AssertionError(f"no exit: {out.read_text()}{err.read_text()}") from None
        view = _brokers(survivors)[BROKER_ID]
    finally:
        if broker is not None and broker.poll() is None:
            broker.kill()
            broker.wait(30)
        quorum.stop_all()

    story, complaints = out.read_text(), err.read_text()
    assert code == 0, story + complaints
    assert "Traceback" not in complaints and "never retrieved" not in complaints, complaints
    assert complaints == ""
    lines = story.splitlines()
    registered = [line for line in lines if "registered" in line]
    assert len(registered) == 1 and "registered, epoch" in registered[0], story
    assert "fenced by the controller" not in story  # the only "fenced" word is "unfenced"
    assert lines[-1] == f"broker {BROKER_ID}: controlled shutdown completed; shut down", story
    # Requested once; between that and its completion only a move to another leader is told
    # (the two left may elect again meanwhile on a loaded host: the broker follows it).
    [requested] = [i for i, line in enumerate(lines) if "controlled shutdown requested" in line]
    moves = ("controller channel to", "is not the active controller", "lost the controller")
    assert all(any(m in line for m in moves) for line in lines[requested + 1 : -1]), story
    assert view["in_controlled_shutdown"] is True, view

    # The log of the leader that answered last: one registration, unfenced once, then the
    # controlled shutdown; no fence in between.
    records = _broker_records(quorum.nodes[second].data_dir / "log")
    assert isinstance(records[0], RegisterBrokerRecord)
    changes = [r for r in records[1:] if isinstance(r, BrokerRegistrationChangeRecord)]
    assert len(changes) == len(records) - 1, records  # registered once
    assert [r.fenced for r in changes][:1] == [FencingChange.UNFENCE], records
    shutdown = [
        i
        for i, r in enumerate(changes)
        if r.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
    ]
    assert shutdown, records
    before = changes[: shutdown[0]]
    assert FencingChange.FENCE not in [r.fenced for r in before], records


def test_a_bad_bootstrap_list_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--broker-id", "1", "--bootstrap-server", "h:1,nohost"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "bootstrap server 'nohost' is not HOST:PORT" in done.stderr.splitlines()[-1]
    assert "Traceback" not in done.stderr


def test_a_stop_before_any_controller_answered_shuts_down_at_once(tmp_path: Path) -> None:
    (port,) = free_ports(1)  # nothing listens there
    out, err = tmp_path / "broker.out", tmp_path / "broker.err"
    broker = _start_broker(f"127.0.0.1:{port}", out, err)
    try:
        _wait_for("word of the unreachable controller", lambda: "no controller" in out.read_text())
        broker.send_signal(signal.SIGTERM)
        code = broker.wait(60)
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait(30)
    assert code == 0, err.read_text()
    assert out.read_text().splitlines()[-1] == f"broker {BROKER_ID}: shut down before registering"
    assert err.read_text() == ""


def test_a_second_signal_stops_a_shutdown_no_controller_answers(tmp_path: Path) -> None:
    out, err = tmp_path / "broker.out", tmp_path / "broker.err"
    with serve_process(tmp_path / "data", tmp_path / "serve.err") as served:
        broker = _start_broker(served.address, out, err)
        try:
            _wait_for("unfence", lambda: "unfenced at metadata offset" in out.read_text())
            served.process.send_signal(signal.SIGSTOP)  # hung: its kernel still accepts
            try:
                broker.send_signal(signal.SIGINT)
                _wait_for("shutdown request", lambda: "shutdown requested" in out.read_text())
                broker.send_signal(signal.SIGINT)
                code = broker.wait(60)
            finally:
                served.process.send_signal(signal.SIGCONT)
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait(30)
        served.stop()
    story = out.read_text()
    assert code == 1, story + err.read_text()
    assert story.splitlines()[-1] == (
        f"broker {BROKER_ID}: shut down without a controlled shutdown (a second SIGINT)"
    )
    assert "completed" not in story and "fenced by" not in story
    assert "Traceback" not in err.read_text() and "never retrieved" not in err.read_text()
