"""Spark's SQL parser in a JVM of its own: Spark's message for a refused statement, no false
alarm for a good one, and a fallback (False) where that JVM cannot run.

Each check starts a small JVM (a few seconds on a busy machine). The CLI's end-to-end run of
the same path is `test_a_syntax_error_is_reported_before_spark_is_up`
(test_audit_cli_process.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from replay.audit.errors import AuditSqlError
from replay.audit.parser_jvm import check_statements, spark_jars
from replay.audit.session import _log4j_config

pytestmark = pytest.mark.spark

LOG4J = _log4j_config()


def test_a_refused_statement_is_spark_own_one_line_error() -> None:
    with pytest.raises(AuditSqlError) as caught:
        check_statements(["SELECT offset FROM metadata_log WHERE offset = = 3"], log4j_config=LOG4J)
    assert str(caught.value) == (
        "SQL error: [PARSE_SYNTAX_ERROR] Syntax error at or near '='. SQLSTATE: 42601 "
        "(line 1, pos 47)"
    )


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
    assert check_statements(bad, log4j_config=LOG4J) is False
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))  # no jars directory there
    assert spark_jars() is None
    assert check_statements(bad, log4j_config=LOG4J) is False
    (tmp_path / "jars").mkdir()  # jars without Spark's classes: the JVM runs, the parser not
    assert check_statements(bad, log4j_config=LOG4J) is False
