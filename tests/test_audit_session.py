"""Starting Spark for `mlog audit`: bad and unreachable masters, banners, progress, time taken.

Most of these run without a JVM. Two start one in a child process (slow: 15-60 s each on a
busy machine): an audit as a user runs it, whose stderr must hold only the time it took, and
a master that accepts connections but never registers the application.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from api.cli.audit import SparkStart
from api.cli.main import main
from metadata_log import MetadataLog
from records.model import FeatureLevelRecord, TopicRecord
from records.uuids import Uuid
from replay.audit.errors import AuditSessionError
from replay.audit.session import SPARK_BANNERS, _forward_jvm_output, check_master, reach_masters

ROOT = Path(__file__).resolve().parents[1]
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
    err = capsys.readouterr().err
    assert err.startswith("mlog: error: cannot reach the Spark master (127.0.0.1:")
    assert len(err.strip().splitlines()) == 1, err
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


def test_the_progress_line_shows_on_a_terminal_only_and_is_erased() -> None:
    terminal = _Terminal()
    with SparkStart("local[*]", terminal):
        assert terminal.getvalue() == "mlog: starting Spark (local[*]) ..."
    assert terminal.getvalue().endswith("\r\033[K")
    piped = io.StringIO()
    with SparkStart("local[*]", piped):
        pass
    assert piped.getvalue() == ""


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


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
    # stderr is not a terminal here: no progress line, no JVM banner, one line with the time.
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mlog: audit took ") and "(Spark start " in lines[0]


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
