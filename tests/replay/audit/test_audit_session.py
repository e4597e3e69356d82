"""Starting Spark for `mlog audit`: bad and unreachable masters, banners, progress, time taken.

Most of these run without a JVM. Two start one in a child process (slow: 15-60 s each on a
busy machine): an audit as a user runs it, whose stderr must say what it does and the time it
took, and a master that accepts connections but never registers the application.
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.driver_archives import plant_driver_archive
from tests.support.paths import REPO

pytest.importorskip("pyspark")

from api.cli.audit import StatusLine
from api.cli.main import main
from metadata_log import MetadataLog
from records.model import FeatureLevelRecord, TopicRecord
from records.uuids import Uuid
from replay.audit.errors import AuditSessionError
from replay.audit.session import (
    SPARK_BANNERS,
    _bounded,
    _first_line,
    _forward_jvm_output,
    _log4j_config,
    check_master,
    reach_masters,
    read_log,
)

ROOT = REPO
COUNT = "SELECT count(*) AS n FROM metadata_log"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit-session")
    with MetadataLog.open(path / "log") as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        log.append([TopicRecord(name="orders", topic_id=Uuid.random())])
    return path


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def silent_master() -> Iterator[int]:
    """A port that accepts connections and never answers: not a Spark master."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_master_forms() -> None:
    for master in ("local", "local[*]", "local[4]", "local[2,3]", "local-cluster[2,1,1024]"):
        assert check_master(master) == []
    assert check_master("k8s://https://api:6443") == []
    assert check_master("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert check_master("spark://[::1]:7077") == [("::1", 7077)]
    for master in (
        "bogus",
        "local[0]",
        "local[x]",
        "spark://",
        "spark://h",
        "spark://h:0",
        "k8s://",
    ):
        with pytest.raises(AuditSessionError, match="--master"):
            check_master(master)


@pytest.mark.parametrize(
    ("master", "says"),
    [
        ("bogus", "is not a Spark master URL"),
        ("local[abc]", "is not a Spark master URL"),
        ("spark://host", "is not HOST:PORT"),
        ("yarn", "needs HADOOP_CONF_DIR or YARN_CONF_DIR"),
    ],
)
def test_a_bad_master_is_one_line_and_exit_2(
    data_dir: Path,
    master: str,
    says: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    args = ["audit", "sql", "SELECT 1", "--data-dir", str(data_dir), "--master", master]
    assert main(args, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlog: error: --master") and says in err
    assert len(err.strip().splitlines()) == 1, err


def test_an_unreachable_master_fails_at_once(
    data_dir: Path, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    master = f"spark://127.0.0.1:{closed_port}"
    args = ["audit", "churn", "--data-dir", str(data_dir), "--master", master]
    assert main(args, out=io.StringIO()) == 2
    # What was starting, then the reason it could not, in one line.
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == f"mlog: starting Spark ({master}) ...", lines
    assert lines[1].startswith("mlog: error: cannot reach the Spark master (127.0.0.1:")
    assert len(lines) == 2, lines
    with pytest.raises(
        AuditSessionError, match=r"did not answer within 0\.2 s|refused|unreachable"
    ):
        # An address nothing routes to: the wait is bounded by the timeout, not by Spark.
        reach_masters([("192.0.2.1", 7077), ("127.0.0.1", closed_port)], timeout=0.2)


def test_the_jvm_output_loses_only_the_banners() -> None:
    lines = [
        "WARNING: Using incubator modules: jdk.incubator.vector\n",
        'Setting default log level to "WARN".\n',
        "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel.\n",
        "12:00:01 ERROR Executor: something real\n",
    ]
    assert all(line.startswith(SPARK_BANNERS) for line in lines[:3])
    sink = io.StringIO()
    _forward_jvm_output(io.BytesIO("".join(lines).encode()), sink)
    assert sink.getvalue() == lines[3]
    _forward_jvm_output(io.BytesIO("".join(lines).encode()), None)  # drained, nothing shown


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_is_rewritten_on_a_terminal_and_lines_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    status = StatusLine(terminal)
    status.say("starting Spark (local[*]) ...")
    assert terminal.getvalue() == "\r\033[Kmlog: starting Spark (local[*]) ..."
    status.progress("running: stage 0: 0/1 tasks (1 s)")
    assert terminal.getvalue().endswith("\r\033[Kmlog: running: stage 0: 0/1 tasks (1 s)")
    status.clear()
    assert terminal.getvalue().endswith("\r\033[K")
    size = len(terminal.getvalue())
    status.clear()  # nothing shown: nothing to erase
    assert len(terminal.getvalue()) == size

    piped = io.StringIO()
    clock = [100.0]
    monkeypatch.setattr("api.cli.audit.time.monotonic", lambda: clock[0])
    status = StatusLine(piped)
    status.say("starting Spark (local[*]) ...")
    status.progress("running: stage 0: 0/1 tasks (1 s)")  # too soon after the last line
    clock[0] += 5
    status.progress("running: stage 1: 0/1 tasks (6 s)")
    status.clear()
    assert piped.getvalue() == (
        "mlog: starting Spark (local[*]) ...\nmlog: running: stage 1: 0/1 tasks (6 s)\n"
    )


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.process
@pytest.mark.spark
def test_an_audit_prints_its_result_and_the_time_taken_and_no_banner(data_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", "audit", "sql", COUNT, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_child_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "2"]
    # stderr is not a terminal here: what starts and runs as lines, no JVM banner, then the
    # time taken.
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "mlog: starting Spark (local[*]) ...", done.stderr
    assert lines[1] == "mlog: running the query ...", done.stderr
    assert all(line.startswith("mlog: running: ") for line in lines[2:-1]), done.stderr
    assert lines[-1].startswith("mlog: audit took ") and "(Spark start " in lines[-1]


@pytest.mark.spark
def test_a_master_that_never_registers_the_audit_gives_up_in_time(silent_master: int) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from replay.audit.errors import AuditSessionError
        from replay.audit.session import audit_session
        try:
            audit_session(master="spark://127.0.0.1:{silent_master}", registration_timeout=3)
        except AuditSessionError as exc:
            print(exc)
            sys.exit(0)
        sys.exit("the session started")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=_child_env(),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "did not register this application within 3 s" in done.stdout
    assert "Traceback" not in done.stderr


def test_master_bounds_and_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_master("local[1]") == [] and check_master("local[3,1]") == []
    assert check_master("spark://h:1") == [("h", 1)]
    assert check_master("spark://h:65535") == [("h", 65535)]
    for master in ("spark://h:65536", "spark://a:1,b", "local[1,0]", "local-cluster[0,1,1]"):
        with pytest.raises(AuditSessionError, match="--master"):
            check_master(master)
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(AuditSessionError, match="needs HADOOP_CONF_DIR or YARN_CONF_DIR"):
        check_master("yarn")
    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        with monkeypatch.context() as env:
            env.setenv(name, "/etc/hadoop")
            assert check_master("yarn") == []


def test_reaching_masters(closed_port: int, silent_master: int) -> None:
    reach_masters([])  # nothing to reach: no connection tried
    # One master that accepts a connection is enough, wherever it is in the list.
    reach_masters([("127.0.0.1", closed_port), ("127.0.0.1", silent_master)], timeout=2)
    with pytest.raises(AuditSessionError) as caught:
        reach_masters([("127.0.0.1", closed_port), ("127.0.0.1", closed_port)], timeout=2)
    text = str(caught.value)
    assert text.startswith("cannot reach the Spark master (127.0.0.1:")
    # Each master's reason in words (the OS's text, without Python's "[Errno N]").
    refused = f"127.0.0.1:{closed_port}: Connection refused"
    assert text.count(refused) == 2 and f"{refused}; {refused})" in text
    assert "Errno" not in text
    assert "check that it is running" in text


def test_each_forwarded_line_is_flushed() -> None:
    raw = io.BytesIO()
    sink = io.TextIOWrapper(raw, encoding="utf-8")  # buffers until flushed
    _forward_jvm_output(io.BytesIO(b"ERROR one\nERROR two\n"), sink)
    assert raw.getvalue() == b"ERROR one\nERROR two\n"


def test_a_master_that_does_not_answer_is_given_up_on_in_time() -> None:
    # A listening socket whose backlog is full: the kernel drops further connection requests.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        queued = []
        try:
            for _ in range(8):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
                queued.append(client)
            started = time.monotonic()
            with pytest.raises(AuditSessionError) as caught:
                reach_masters([("127.0.0.1", port)], timeout=0.5)
            assert time.monotonic() - started < 20  # a connect's own give-up takes minutes
        finally:
            for client in queued:
                client.close()
    assert f"127.0.0.1:{port} did not answer within 0.5 s" in str(caught.value)


def test_a_closed_sink_does_not_stop_the_draining() -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise ValueError("I/O operation on closed file")

    stream = io.BytesIO(b"one\ntwo\nthree\n")
    _forward_jvm_output(stream, Closed())
    assert stream.read() == b""  # every line was read


def test_a_start_is_bounded_only_when_asked() -> None:
    calls: list[str] = []
    _bounded(lambda: calls.append("now"), None, "local[*]")
    assert calls == ["now"]
    threads: list[threading.Thread] = []

    class Recorded(threading.Thread):
        def start(self) -> None:
            threads.append(self)
            super().start()

    def slow_start() -> None:
        time.sleep(0.3)
        calls.append("thread")

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(threading, "Thread", Recorded)
        _bounded(slow_start, 5.0, "spark://h:7077")  # waited for, well within its bound
    assert calls == ["now", "thread"]
    # A start left behind never keeps the process from exiting.
    (starter,) = threads
    assert starter.daemon and starter.name == "spark-context-start"

    def fails() -> None:
        raise RuntimeError("refused by the master")

    with pytest.raises(RuntimeError, match="refused by the master"):
        _bounded(fails, 5.0, "spark://h:7077")
    release = threading.Event()
    try:
        with pytest.raises(AuditSessionError, match=r"spark://h:7077 .* within 0\.2 s"):
            _bounded(release.wait, 0.2, "spark://h:7077")
    finally:
        release.set()


def test_the_first_line_of_a_failure() -> None:
    class Java:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def toString(self) -> str:  # noqa: N802 - py4j's name
            if self.text is None:
                raise ConnectionError("the JVM is gone")
            return self.text

    def failure(text: str, java: str | None = "", *, has_java: bool = True) -> Exception:
        exc = RuntimeError(text)
        if has_java:
            exc.java_exception = Java(java)  # type: ignore[attr-defined]  # as py4j's errors have
        return exc

    java = "org.apache.spark.SparkException: bad\n\tat Foo.bar"
    assert _first_line(failure("py text", java)) == "org.apache.spark.SparkException: bad"
    assert _first_line(failure("py first\npy second", None)) == "py first"
    assert _first_line(failure("  only python\nmore  ", has_java=False)) == "only python"
    assert _first_line(failure("", has_java=False)) == "RuntimeError"


def test_the_log_settings_ship_with_the_package() -> None:
    path = Path(_log4j_config())
    assert path.name == "log4j2.properties" and path.is_file()


def test_the_default_master_is_local_on_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.audit import session

    asked: list[str] = []

    def refuse(master: str) -> list[tuple[str, int]]:
        asked.append(master)
        raise AuditSessionError("stop before a JVM starts")

    monkeypatch.setattr(session, "check_master", refuse)
    for master in (None, ""):
        with pytest.raises(AuditSessionError, match="stop before"):
            session.audit_session(master=master)
    assert asked == ["local[*]", "local[*]"]


BUILDS: list[tuple[Path, str]] = []
"""The driver archive builds `prepared` saw started (the archive, the module)."""


class _Started(BaseException):
    """Raised by a stand-in for the JVM's start (not an Exception: nothing may catch it)."""


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """audit_session up to the JVM's start, with the start replaced: the conf it would use.

    The cache directory is the test's own and empty: no driver archive, and the build that
    would start is recorded in `builds`, not run."""
    from replay.audit import driver_archive, session

    seen: list[dict[str, Any]] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(
        driver_archive,
        "build_archive_in_background",
        lambda path, *args, module: BUILDS.append((path, module)),
    )
    BUILDS.clear()

    def launch(spark_conf: Any, jvm_log: Any) -> object:
        seen.append({"conf": dict(spark_conf.getAll()), "jvm_log": jvm_log})
        return object()

    def bounded(create: Any, timeout: float | None, master: str) -> None:
        seen[-1].update(timeout=timeout, master=master)
        raise _Started

    monkeypatch.setattr(session, "_launch_jvm", launch)
    monkeypatch.setattr(session, "_bounded", bounded)
    monkeypatch.setattr("pyspark.SparkContext._gateway", None)
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP"):
        monkeypatch.delenv(name, raising=False)
    return seen


def test_a_local_session_is_prepared_as_documented(prepared: list[dict[str, Any]]) -> None:
    from replay.audit import session

    sink = io.StringIO()
    with pytest.raises(_Started):
        session.audit_session(master="local[2]", jvm_log=sink)
    (start,) = prepared
    log4j = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    assert start["conf"] == {
        "spark.master": "local[2]",
        "spark.app.name": "mlog audit",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "4g",
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
    }
    assert start["jvm_log"] is sink
    assert start["timeout"] is None  # a local start is not bounded
    # No driver archive yet: the start goes without, and one is built for the next ones.
    assert [module for _, module in BUILDS] == ["replay.audit.driver_archive"]
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_a_cluster_session_is_bounded_and_keeps_what_was_set(
    prepared: list[dict[str, Any]], silent_master: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay.audit import session

    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python3")
    master = f"spark://127.0.0.1:{silent_master}"
    conf = {"spark.sql.shuffle.partitions": "64", "spark.app.name": "nightly audit"}
    with pytest.raises(_Started):
        session.audit_session(master=master, conf=conf, registration_timeout=7.5)
    (start,) = prepared
    assert (start["timeout"], start["master"]) == (7.5, master)
    assert start["conf"]["spark.master"] == master
    # `conf` comes last; a cluster run gets none of the local defaults.
    assert start["conf"]["spark.sql.shuffle.partitions"] == "64"
    assert start["conf"]["spark.app.name"] == "nightly audit"
    assert "spark.driver.memory" not in start["conf"]
    assert "spark.sql.inMemoryColumnarStorage.compressed" not in start["conf"]
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python3"  # set already: kept
    assert "SPARK_LOCAL_IP" not in os.environ  # a cluster needs the network


def test_a_failed_start_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.audit import session

    def broken(spark_conf: Any, jvm_log: Any) -> object:
        raise RuntimeError("Java gateway process exited\nbefore sending its port number")

    monkeypatch.setattr(session, "_launch_jvm", broken)
    monkeypatch.setattr("pyspark.SparkContext._gateway", None)
    with pytest.raises(AuditSessionError) as caught:
        session.audit_session(master="local[1]")
    assert str(caught.value) == "Spark did not start: Java gateway process exited"

    def stuck(create: Any, timeout: float | None, master: str) -> None:
        raise AuditSessionError("the Spark master did not register this application")

    monkeypatch.setattr(session, "_launch_jvm", lambda conf, log: object())
    monkeypatch.setattr(session, "_bounded", stuck)
    with pytest.raises(AuditSessionError) as caught:
        session.audit_session(master="local[1]")
    assert str(caught.value) == "the Spark master did not register this application"


def test_the_jvm_is_launched_with_its_stderr_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.audit import session

    launched: list[Any] = []

    class Gateway:
        class proc:  # noqa: N801 - py4j's attribute
            stderr = io.BytesIO(b"Setting default log level to WARN\nERROR real trouble\n")

    def launch_gateway(conf: Any, popen_kwargs: dict[str, Any]) -> Gateway:
        launched.append((conf, popen_kwargs))
        return Gateway()

    threads: list[threading.Thread] = []

    class Recorded(threading.Thread):
        def start(self) -> None:
            threads.append(self)
            super().start()

    monkeypatch.setattr("pyspark.java_gateway.launch_gateway", launch_gateway)
    monkeypatch.setattr(threading, "Thread", Recorded)
    sink = io.StringIO()
    conf = object()
    gateway = session._launch_jvm(conf, sink)  # type: ignore[arg-type]  # a stand-in conf
    assert isinstance(gateway, Gateway)
    assert launched == [(conf, {"stderr": subprocess.PIPE})]
    (forwarder,) = threads
    assert forwarder.daemon and forwarder.name == "spark-jvm-stderr"
    forwarder.join(10)
    assert sink.getvalue() == "ERROR real trouble\n"


def test_register_adds_the_source_to_any_session() -> None:
    from replay.audit.session import register
    from replay.audit.source import MetadataLogDataSource

    calls: list[tuple[str, Any]] = []

    class Session:
        class conf:  # noqa: N801 - SparkSession's attribute
            @staticmethod
            def set(key: str, value: str) -> None:
                calls.append(("conf", (key, value)))

        class dataSource:  # noqa: N801 - SparkSession's attribute
            @staticmethod
            def register(source: type) -> None:
                calls.append(("source", source))

    register(Session())  # type: ignore[arg-type]  # a stand-in session
    assert calls == [
        ("conf", ("spark.sql.python.filterPushdown.enabled", "true")),
        ("source", MetadataLogDataSource),
    ]


@pytest.mark.parametrize(
    ("columns", "named"),
    [(["offset", "record_type", "isrs"], "unknown ['isrs']"), (["topic_id"], "missing ['offset'")],
    ids=["unknown", "missing"],
)
def test_read_log_refuses_columns_it_cannot_read_before_spark(
    columns: list[str], named: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        read_log(None, "/nonexistent", columns=columns)  # type: ignore[arg-type]  # never reached


def test_a_driver_maps_the_archive_once_built_and_checks_it(
    prepared: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from replay.audit import driver_archive, session

    path = plant_driver_archive(monkeypatch, tmp_path / "cache")
    assert not BUILDS
    with pytest.raises(_Started):
        session.audit_session(master="local[1]")
    options = prepared[0]["conf"]["spark.driver.extraJavaOptions"].split()
    assert options[0] == f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    assert options[1:] == [
        "-XX:+VerifySharedSpaces",
        driver_archive.CRASH_REPORT,
        f"-XX:SharedArchiveFile={path}",
    ]
    assert not BUILDS
    # Given options (a training driver's), or a JVM already running: no archive, no build.
    with pytest.raises(_Started):
        session.audit_session(master="local[1]", class_sharing="-XX:ArchiveClassesAtExit=x")
    assert prepared[1]["conf"]["spark.driver.extraJavaOptions"].endswith(
        " -XX:ArchiveClassesAtExit=x"
    )
    assert not BUILDS


def test_a_driver_that_cannot_start_with_the_archive_starts_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An archive cut short crashes the JVM that maps it: the start is made again without it,
    # and the archive goes (the next audit builds it anew). Anything else is raised as it is.
    from pyspark import SparkConf

    from replay.audit import driver_archive, session

    archive = plant_driver_archive(monkeypatch, tmp_path / "cache", b"cut")
    launches: list[str] = []

    class _Gateway:
        proc = type("P", (), {"stderr": io.BytesIO()})()

    def launch(conf: Any, popen_kwargs: Any) -> _Gateway:
        launches.append(conf.get("spark.driver.extraJavaOptions"))
        if "SharedArchiveFile" in launches[-1] or "no-java" in launches[-1]:
            raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited")
        return _Gateway()

    monkeypatch.setattr("pyspark.java_gateway.launch_gateway", launch)
    log4j = "-Dlog4j2.configurationFile=file:/x"
    sharing = driver_archive.sharing_options()
    assert f"-XX:SharedArchiveFile={archive}" in sharing
    conf = SparkConf(loadDefaults=False).set("spark.driver.extraJavaOptions", f"{log4j} {sharing}")
    session._launch_jvm(conf, None)
    assert launches == [f"{log4j} {sharing}", log4j] and not archive.exists()
    with pytest.raises(RuntimeError, match="JAVA_GATEWAY_EXITED"):
        session._launch_jvm(conf.set("spark.driver.extraJavaOptions", "-Dno-java"), None)
    assert launches[2:] == ["-Dno-java"]  # no archive named: tried once
