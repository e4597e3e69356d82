"""Spark's SQL parser in a JVM of its own: Spark's message for a refused statement, no false
alarm for a good one, a fallback (False) where that JVM cannot run, and its class-data-sharing
archive (built once, checked before use, dropped when unusable).

Each check starts a small JVM (a few seconds on a busy machine); the module builds one archive
in its own cache directory first, so no test starts a build in the background. The CLI's
end-to-end run of the same path is `test_a_syntax_error_is_reported_before_spark_is_up`
(test_audit_cli_process.py).
"""

from __future__ import annotations

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


@pytest.fixture(scope="module", autouse=True)
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The parser's archive, built in a cache directory of this module's own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        jars, java = spark_jars(), java_executable()
        assert jars is not None and java is not None
        path = archive_path(jars, java)
        assert path is not None
        assert build_archive(path, LOG4J)
        yield path


def test_a_refused_statement_is_spark_own_one_line_error(archive: Path) -> None:
    assert archive.is_file() and not list(archive.parent.glob("*.tmp"))
    with pytest.raises(AuditSqlError) as caught:
        check_statements([REFUSED], log4j_config=LOG4J)
    assert str(caught.value) == SPARK_SAYS


def test_an_unusable_archive_is_dropped_and_the_caller_parses_in_spark(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    whole = archive.read_bytes()
    archive.chmod(0o644)
    try:
        archive.write_bytes(whole[: len(whole) // 10])  # cut: the JVM that maps it crashes
        assert check_statements([REFUSED], log4j_config=LOG4J) is False
        assert not archive.exists()  # dropped, to be built anew
        assert list(tmp_path.iterdir()) == []  # no crash report left where the user is
    finally:
        archive.write_bytes(whole)
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
