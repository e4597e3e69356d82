"""The SQL check before Spark runs a statement: what it refuses at once, and what it lets by.

Spark's own parser is the judge: the test in test_audit.py checks against it that every word
refused here as a first word is refused by Spark too.
"""

from __future__ import annotations

import pytest

from replay.audit.errors import AuditSqlError
from replay.audit.sql_check import STATEMENT_WORDS, precheck


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT principal, count(*) FROM metadata_log GROUP BY principal",
        "select 1",
        "  -- a comment\n/* and another */ WITH t AS (SELECT 1) SELECT * FROM t",
        "(SELECT 1) UNION (SELECT 2)",
        "SELECT 'it''s', 'a\\'b', \"(\", `odd``name` FROM metadata_log",
        "SELECT ')' -- ( in a comment\n",
        "FROM metadata_log |> WHERE offset < 3",
        "SHOW TABLES",
        "DESCRIBE metadata_log",
        "EXPLAIN SELECT 1",
        "VALUES (1), (2)",
        "label: BEGIN SELECT 1; END",
        "SELECT principal count(*) FROM metadata_log",  # Spark's parser refuses it, later
    ],
)
def test_statements_spark_may_accept_pass(statement: str) -> None:
    precheck(statement)


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("", "the SQL statement is empty"),
        ("  -- only a comment", "the SQL statement is empty"),
        (
            "SELEC principal FROM metadata_log",
            "at 'SELEC', the statement's first word: did you mean SELECT?",
        ),
        ("GROUP BY principal", "at 'GROUP'"),
        ("* FROM metadata_log", ""),
        ("SELECT 'open FROM metadata_log", "the string opened with ' at position 7 is not closed"),
        ("SELECT `open FROM metadata_log", "the identifier opened with ` at position 7"),
        ("SELECT count(* FROM metadata_log", "1 '(' not closed by ')'"),
        ("SELECT count(*)) FROM metadata_log", "')' at position 15 closes no '('"),
        ("SELECT 1 /* open", "a /* comment is not closed"),
    ],
)
def test_sure_errors_are_refused_at_once(statement: str, said: str) -> None:
    if not said:  # a first symbol is left to Spark's parser (it may start a statement)
        precheck(statement)
        return
    with pytest.raises(AuditSqlError) as caught:
        precheck(statement)
    assert said in str(caught.value)


def test_the_statement_words_are_upper_case_words() -> None:
    assert all(word.isupper() and word.isalpha() for word in STATEMENT_WORDS)
    assert {"SELECT", "WITH", "FROM", "SHOW", "DESCRIBE", "EXPLAIN"} <= STATEMENT_WORDS
