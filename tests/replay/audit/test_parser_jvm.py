"""Spark's SQL parser in a JVM of its own: Spark's message for a refused statement, no false
alarm for a good one, a fallback (False) where that JVM cannot run, and its class-data-sharing
archive (built once, checked before use, dropped when unusable).

Each check starts a small JVM (a few seconds on a busy machine); the run builds one archive in
a cache directory of its own first (once, whichever worker gets there first), so no test starts
a build in the background. The CLI's
end-to-end run of the same path is `test_a_syntax_error_is_reported_before_spark_is_up`
(test_audit_cli_process.py).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from replay.audit.errors import AuditSqlError
from replay.audit.parser_jvm import (
    archive_path,
    build_archive,
    check_statements,
    java_executable,
    spark_jars,
)
from replay.audit.session import _log4j_config

pytestmark = pytest.mark.spark

LOG4J = _log4j_config()
REFUSED = "SELECT offset FROM metadata_log WHERE offset = = 3"
SPARK_SAYS = (
    "SQL error: [PARSE_SYNTAX_ERROR] Syntax error at or near '='. SQLSTATE: 42601 (line 1, pos 47)"
)


def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this test run that every xdist worker of it shares (no other run)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module", autouse=True)
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The parser's archive, built once per test run in a cache directory of the run's own.

    The workers that get a test of this module share it (a build is a JVM loading all of
    Spark's SQL classes): the first builds it under a lock, the others use it. No test changes
    it: the one that cuts an archive cuts a copy of its own.
    """
    cache = _run_root(tmp_path_factory) / "parser-jvm-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        jars, java = spark_jars(), java_executable()
        assert jars is not None and java is not None
        path = archive_path(jars, java)
        assert path is not None
        with (cache / "build.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.is_file():
                assert build_archive(path, LOG4J)
        yield path


def test_a_refused_statement_is_spark_own_one_line_error(archive: Path) -> None:
    # Its own drafts only: another worker may be building another key's archive beside it.
    assert archive.is_file() and not list(archive.parent.glob(f"{archive.name}.*.tmp"))
    with pytest.raises(AuditSqlError) as caught:
        check_statements([REFUSED], log4j_config=LOG4J)
    assert str(caught.value) == SPARK_SAYS


def test_an_unusable_archive_is_dropped_and_the_caller_parses_in_spark(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the run's archive in a cache of this test's own: the shared one stays whole.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jars, java = spark_jars(), java_executable()
    assert jars is not None and java is not None
    own = archive_path(jars, java)
    assert own is not None and own != archive
    own.parent.mkdir(parents=True)
    whole = archive.read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    own.write_bytes(whole[: len(whole) // 10])  # cut: the JVM that maps it crashes
    assert check_statements([REFUSED], log4j_config=LOG4J) is False
    assert not own.exists()  # dropped, to be built anew
    assert list(work.iterdir()) == []  # no crash report left where the user is
    own.write_bytes(whole)
    with pytest.raises(AuditSqlError, match="PARSE_SYNTAX_ERROR"):
        check_statements([REFUSED], log4j_config=LOG4J)


def test_good_statements_pass_and_a_later_bad_one_is_still_found() -> None:
    good = [
        "SELECT principal, count(*) FROM metadata_log GROUP BY principal",
        "WITH t AS (SELECT 1) SELECT * FROM t",
        "SHOW TABLES",
        "SET spark.sql.ansi.enabled=true",
        "EXPLAIN SELECT offset FROM metadata_log WHERE offset > 3",
        "FROM metadata_log |> WHERE offset < 3",
    ]
    assert check_statements(good, log4j_config=LOG4J) is True
    with pytest.raises(AuditSqlError, match=r"\[PARSE_SYNTAX_ERROR\] .* near '\('"):
        check_statements(
            ["SELECT 1", "SELECT principal count(*) FROM metadata_log"], log4j_config=LOG4J
        )


def test_without_java_or_spark_jars_the_caller_parses_in_spark_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = ["SELECT = ="]
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    assert java_executable() is None
    assert check_statements(bad, log4j_config=LOG4J) is False
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))  # no jars directory there
    assert spark_jars() is None
    assert check_statements(bad, log4j_config=LOG4J) is False
    (tmp_path / "jars").mkdir()  # jars without Spark's classes: the JVM runs, the parser not
    assert check_statements(bad, log4j_config=LOG4J) is False
