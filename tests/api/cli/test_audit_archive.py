"""api/cli/audit.py and audit_shell.py over an archive: every argument checked before Spark.

No test here starts a JVM: `audit_session` is replaced by one that fails the test if called,
so each refusal shown is made before Spark would start. The queries themselves over an
archive, on a standalone cluster, are in tests/replay/audit/test_audit_cluster.py.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from api.cli import audit
from api.cli.audit_shell import _shell_line, _shell_parser
from api.cli.common import CliError
from api.cli.main import main
from records.errors import MetadataLogError
from replay.audit import session
from tests.support.archives import archive_all, grow


@pytest.fixture(autouse=True)
def _no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> Any:
        raise AssertionError("Spark was started before the arguments were checked")

    monkeypatch.setattr(session, "audit_session", refuse)


@pytest.fixture(scope="module")
def archive_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("audit-archive")
    grow(base / "log", 30)
    url = (base / "archive").as_uri()
    archive_all(base / "log", url, base / "work")
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`mlog ARGV` in-process: (exit code, stderr)."""
    code = main(list(argv), out=io.StringIO())
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("who-changed", "--since", "last tuesday"), "'last tuesday' is not a time"),
        (
            ("access-changes", "--since", "2026-02-01", "--until", "2026-01-01"),
            "--since is after --until",
        ),
        (("access-changes", "--user", ""), "--user needs a user name"),
        (("topic-lifecycle", "--topic", "team:"), "--topic needs a topic name"),
        (("sql", "SELEC count(*) FROM metadata_log"), "did you mean SELECT?"),
        (("churn", "--output", "parquet"), "--output parquet needs a directory"),
    ],
)
def test_a_bad_flag_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], archive_url: str, argv: tuple[str, ...], says: str
) -> None:
    code, err = run(capsys, "audit", *argv, "--archive-url", archive_url)
    assert code == 2
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_bad_or_unusable_archive_url_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, archive_url: str
) -> None:
    for url, says in (
        ("ftp://host/archive", "scheme 'ftp' is not one of"),
        ("relative/path", "has no scheme"),
        ((tmp_path / "nothing").as_uri(), "holds no archived segment"),
    ):
        code, err = run(capsys, "audit", "churn", "--archive-url", url)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    code, err = run(
        capsys, "audit", "churn", "--archive-url", archive_url, "--log-dir", str(tmp_path)
    )
    assert code == 2 and "not both" in err


def test_state_at_an_offset_past_the_archive_is_refused(
    capsys: pytest.CaptureFixture[str], archive_url: str
) -> None:
    code, err = run(capsys, "audit", "state", "--at-offset", "999999", "--archive-url", archive_url)
    assert code == 2 and "is not in the archive; its offsets are 0.." in err


def test_a_cluster_s_executors_get_the_object_store_s_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    conf = audit.executor_env("spark://127.0.0.1:7077", "s3://bucket/prefix")
    assert conf["spark.executorEnv.AWS_ACCESS_KEY_ID"] == "key"
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL_S3"] == "http://127.0.0.1:9000"
    assert "spark.executorEnv.AWS_SESSION_TOKEN" not in conf
    # A local master's executors share this process's environment; a directory needs none.
    assert audit.executor_env("local[*]", "s3://bucket/prefix") == {}
    assert audit.executor_env("spark://127.0.0.1:7077", Path("/data/log")) == {}


def test_an_executor_s_exception_is_the_line_shown() -> None:
    worker_failure = Exception(
        "\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/replay/audit/archived.py", line 130, in read_archived\n'
        "metadata_log.archive.errors.ArchiveDamage: s3://b/p/segments/0-8.avro differs from "
        "what the manifest says it holds\n"
        "JVM stacktrace:\norg.apache.spark.SparkException: Job aborted\n\tat org.apache..."
    )
    assert str(audit._one_line(worker_failure)) == (
        "ArchiveDamage: s3://b/p/segments/0-8.avro differs from what the manifest says it holds"
    )
    assert str(audit._one_line(Exception("[UNRESOLVED_COLUMN] x\n'Project"))) == (
        "[UNRESOLVED_COLUMN] x"
    )


def test_the_shell_gives_the_sql_hints_of_audit_sql() -> None:
    parser = _shell_parser()
    with pytest.raises(MetadataLogError, match="did you mean SELECT"):
        _shell_line(parser, "SELEC count(*) FROM metadata_log")
    with pytest.raises(CliError, match="invalid choice"):
        _shell_line(parser, "who-chnged --principal alice")
    query = _shell_line(parser, "select count(*) from metadata_log")
    assert isinstance(query, argparse.Namespace) and query.verb == "sql"
