"""`mlog serve` as a real process: start, answer a Kafka client, stop on SIGTERM with exit 0."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from api.cli.main import main
from api.cli.serve import SERVING_LOGGERS
from api.server.server_log import server_log
from metadata_log.reader import LogReader
from records import TopicRecord
from tests.support.server_process import serve_process


def test_serve_answers_a_client_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert main(["--data-dir", str(data_dir), "brokers", "register", "--id", "1"]) == 0
    options = ("--socket-request-max-bytes", "4096")
    with serve_process(data_dir, tmp_path / "serve.log", *options) as served:
        # A frame above --socket-request-max-bytes closes its connection, not the server.
        host, port = served.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as oversized:
            oversized.sendall(struct.pack(">i", 4097) + bytes(64))
            assert oversized.recv(1) == b""  # closed without an answer
        admin = KafkaAdminClient(bootstrap_servers=served.address, request_timeout_ms=10_000)
        admin.create_topics([NewTopic("served", 2, 1)])
        admin.close()
        assert served.stop() == 0
    text = served.log()
    assert "create topic served: ok" in text
    assert "request size 4097 is outside 0..4096" in text
    # One line for the start and one for the stop (with why), none twice.
    assert len(re.findall("serving on", text)) == 1, text
    assert len(re.findall(r"stopped \(SIGTERM\); log end offset \d+", text)) == 1, text
    assert "cluster.id=" in (data_dir / "meta.properties").read_text()
    with LogReader.open(data_dir / "log") as log:
        names = [e.record.name for e in log.read() if isinstance(e.record, TopicRecord)]
    assert names == ["served"]


def test_a_sigterm_right_after_serving_on_still_stops_cleanly(tmp_path: Path) -> None:
    # Whoever reads "serving on" may stop the server at once: its handlers are in place by
    # then (they used to come after a collection and a freeze: 24 of 25 such stops died of
    # the signal's default action, exit -15).
    for attempt in range(5):
        data_dir = str(tmp_path / f"d{attempt}")
        command = ["-m", "api.cli", "serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0"]
        server = subprocess.Popen([sys.executable, *command], stderr=subprocess.PIPE)
        assert server.stderr is not None
        seen = b""
        while b"serving on" not in seen:
            chunk = os.read(server.stderr.fileno(), 4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
        server.send_signal(signal.SIGTERM)
        rest = server.stderr.read()
        assert server.wait(60) == 0, (seen + rest).decode(errors="replace")
        assert b"stopped (SIGTERM)" in rest


def test_serve_refuses_a_bad_listen_address(tmp_path: Path) -> None:
    try:
        main(["serve", "--data-dir", str(tmp_path), "--listen", "localhost"])
    except SystemExit as exc:
        assert exc.code == 2
    else:  # pragma: no cover
        raise AssertionError("a bad --listen was accepted")


@pytest.mark.parametrize("value", ["lots", "1023", "2147483648"])
def test_serve_refuses_a_bad_request_size_limit(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--data-dir", str(tmp_path), "--socket-request-max-bytes", value])
    assert exc.value.code == 2
    assert "--socket-request-max-bytes" in capsys.readouterr().err
    assert not (tmp_path / "log").exists()  # nothing was created


def test_server_log_writes_queued_lines_in_order_and_restores_logging() -> None:
    logger = logging.getLogger("test.server_log")
    stream = io.StringIO()
    before = (logging.logThreads, logging.logProcesses)
    with server_log(logger, stream):
        assert logging.logThreads is False
        for i in range(500):
            logger.info("change %d: %s", i, "ok")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("handler failed")
        logger.debug("not at INFO")
    assert (logging.logThreads, logging.logProcesses) == before
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 3)[3] for line in lines[:500]] == [
        f"change {i}: ok" for i in range(500)
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO change 0: ok", lines[0])
    assert lines[500].endswith("ERROR handler failed")
    assert "ValueError: boom" in stream.getvalue()
    assert "not at INFO" not in stream.getvalue()


def test_server_log_writes_the_serving_processs_other_lines_in_its_form() -> None:
    """`mlog serve`'s other loggers (snapshots, retention, the log) write through it, INFO too."""
    logger = logging.getLogger("test.server_log.own")
    others = [logging.getLogger(name) for name in SERVING_LOGGERS]
    before = [(other.level, other.propagate, list(other.handlers)) for other in others]
    stream = io.StringIO()
    root = io.StringIO()
    root_handler = logging.StreamHandler(root)
    logging.getLogger().addHandler(root_handler)
    try:
        with server_log(logger, stream, also=others):
            logger.info("serving")
            logging.getLogger("api.service.snapshots").info("snapshot 1 at offset 9 written")
            logging.getLogger("metadata_log").warning("segment rebuilt")
            logging.getLogger("replay.sql.store").info("creating the snapshot tables")
            logging.getLogger("api.service.retention").debug("not at INFO")
    finally:
        logging.getLogger().removeHandler(root_handler)
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO serving",
        "INFO snapshot 1 at offset 9 written",
        "WARNING segment rebuilt",
        "INFO creating the snapshot tables",
    ]
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", line) for line in lines)
    assert root.getvalue() == ""  # not a second time through the root's handler
    assert [(other.level, other.propagate, list(other.handlers)) for other in others] == before


class _FailingOnce(io.StringIO):
    """A stream whose first write fails, as a closed or broken stderr would."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = threading.Event()

    def write(self, text: str) -> int:
        if not self.failed.is_set():
            self.failed.set()
            raise OSError("stream gone")
        return super().write(text)


def test_server_log_escapes_control_characters_so_a_client_cannot_forge_a_line() -> None:
    logger = logging.getLogger("test.server_log.escaped")
    stream = io.StringIO()
    forged = "x\n2026-11-23 22:00:00,000 INFO User:admin delete topic payments: ok"
    with server_log(logger, stream):
        logger.info("User:ANONYMOUS create topic %s: INVALID_TOPIC_EXCEPTION", forged)
        logger.info("NUL \x00, escape \x1b[2J, separator \u2028 end")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(
        "create topic x\\n2026-11-23 22:00:00,000 INFO User:admin delete topic payments: ok: "
        "INVALID_TOPIC_EXCEPTION"
    )
    assert lines[1].endswith("NUL \\x00, escape \\x1b[2J, separator \\u2028 end")


def test_server_log_survives_a_failed_write() -> None:
    logger = logging.getLogger("test.server_log.failing")
    stream = _FailingOnce()
    with server_log(logger, stream):
        logger.info("lost, not fatal")
        assert stream.failed.wait(10)
        logger.info("written after the failure")
    # The writer thread went on after the failed write: the later line is there.
    assert stream.getvalue().endswith("INFO written after the failure\n")


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--queued-max-request-bytes", "lots", "'lots' is not an integer (bytes)"),
        ("--queued-max-request-bytes", "1023", "1023 is outside 1024..2147483647"),
        ("--connections-max-idle-ms", "0", "0 is outside 1..2147483647"),
        ("--max-connections", "-1", "-1 is outside 1..2147483647"),
        ("--max-connections-per-ip", "2147483648", "2147483648 is outside 1..2147483647"),
    ],
)
def test_serve_refuses_a_bad_connection_limit(
    tmp_path: Path, flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--data-dir", str(tmp_path), flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {message}" in err
    assert not (tmp_path / "log").exists()


def test_serve_refuses_a_bad_limit_in_the_environment_and_a_queue_below_the_frame_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLOG_MAX_CONNECTIONS_PER_IP", "none")
    assert main(["serve", "--data-dir", str(tmp_path)]) == 2
    assert "MLOG_MAX_CONNECTIONS_PER_IP (max.connections.per.ip): 'none' is not an integer" in (
        capsys.readouterr().err
    )
    monkeypatch.delenv("MLOG_MAX_CONNECTIONS_PER_IP")
    args = ["serve", "--data-dir", str(tmp_path), "--queued-max-request-bytes", "4096"]
    assert main(args) == 2
    assert "queued.max.request.bytes=4096 is below socket.request.max.bytes=104857600" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "log").exists()


def test_serve_closes_idle_and_excess_connections_with_one_summary_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    options = ("--connections-max-idle-ms", "500", "--max-connections-per-ip", "2")
    env = {**os.environ, "MLOG_MAX_CONNECTIONS": "100"}
    with serve_process(data_dir, tmp_path / "serve.log", *options, env=env) as served:
        host, port = served.address.rsplit(":", 1)
        kept = [socket.create_connection((host, int(port)), timeout=20) for _ in range(2)]
        excess = [socket.create_connection((host, int(port)), timeout=20) for _ in range(5)]
        # Closed at once (the two over the per-ip limit), or after 500 ms idle (the kept ones).
        for sock in [*excess, *kept]:
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
            sock.close()
        assert served.stop() == 0
    text = served.log()
    assert "max.connections=100, max.connections.per.ip=2, connections.max.idle.ms=500" in text
    summaries = re.findall(r"closed (\d+) connections? over limits: (.*)", text)
    assert 1 <= len(summaries) <= 3, text  # one per interval, not one per connection
    assert sum(int(count) for count, _ in summaries) == 7, text
    assert "over max.connections.per.ip=2" in text
    assert "over connections.max.idle.ms=500" in text
