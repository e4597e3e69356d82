"""A SQL statement checked before Spark runs it: first in Python, then by Spark's own parser.

`mlog audit sql` would otherwise report a typo only after a full Spark start (10-20 s). Two
checks come first:

- `precheck` (pure Python, instant) refuses only what Spark's parser refuses too: an empty
  statement, a first word no Spark statement starts with (`SELEC ...`; the words are those
  with which Spark 4's parser accepts a statement, checked against Spark's keyword list in
  the tests), an unterminated quote or comment, and unbalanced parentheses.
- Spark's `SparkSqlParser` then parses it in a small JVM of its own started beside the full
  Spark start (`replay.audit.parser_jvm`; 2-4 s into the command at load 10, not 10-13), or,
  where that JVM cannot run, in Spark's JVM as soon as it is up, before the SparkContext
  starts (`replay.audit.session.parse_in_jvm`). Either way the error is Spark's own message.
"""

from __future__ import annotations

import difflib

from replay.audit.errors import AuditSqlError

_STATEMENT_WORDS_TEXT = """
ADD ALTER ANALYZE BEGIN CACHE CALL CLEAR CLOSE COMMENT COMMIT CREATE DECLARE DELETE
DESC DESCRIBE DFS DROP EXECUTE EXPLAIN EXPORT FETCH FROM GRANT IMPORT INSERT LIST
LOAD LOCK MAP MERGE MSCK OPEN REDUCE REFRESH REPAIR REPLACE RESET REVOKE ROLLBACK
SELECT SET SHOW START TABLE TRUNCATE UNCACHE UNLOCK UPDATE USE VALUES WITH
"""
# SQL scripting (when enabled, a script may start with these or with a label `name:`).
_SCRIPT_WORDS_TEXT = "IF WHILE LOOP REPEAT FOR CASE LEAVE ITERATE SIGNAL RESIGNAL GET"

STATEMENT_WORDS = frozenset(_STATEMENT_WORDS_TEXT.split() + _SCRIPT_WORDS_TEXT.split())
"""Words a Spark statement may start with (upper case); any other first word is refused."""

_COMMON = ("SELECT", "WITH", "FROM", "SHOW", "DESCRIBE", "EXPLAIN", "VALUES", "TABLE")


def precheck(statement: str) -> None:
    """Raise `AuditSqlError` for a statement Spark's parser is sure to refuse; else nothing."""
    first, rest_start = _first_word(statement)
    if first is None:
        raise AuditSqlError(
            'the SQL statement is empty; give one, e.g. "SELECT * FROM metadata_log"'
        )
    if first and first.upper() not in STATEMENT_WORDS and not _is_label(statement, rest_start):
        near = difflib.get_close_matches(first.upper(), STATEMENT_WORDS, n=1, cutoff=0.6)
        hint = (
            f"did you mean {near[0]}?"
            if near
            else f"statements start with {', '.join(_COMMON)}, ..."
        )
        raise AuditSqlError(f"SQL syntax error at {first!r}, the statement's first word: {hint}")
    _check_balance(statement)


def spark_parse_error(message: str) -> AuditSqlError:
    """The error for a statement Spark's parser refused with `message`: its first line."""
    line = next((part.strip() for part in message.splitlines() if part.strip()), "")
    return AuditSqlError(f"SQL error: {line or 'Spark refused the statement'}")


def _first_word(statement: str) -> tuple[str | None, int]:
    """The statement's first word ('' if it starts with a symbol; None if empty) and its end."""
    i = _skip_space_and_comments(statement, 0)
    if i >= len(statement):
        return None, i
    j = i
    while j < len(statement) and (statement[j].isalnum() or statement[j] == "_"):
        j += 1
    return statement[i:j], j


def _is_label(statement: str, end: int) -> bool:
    """Whether the first word is a SQL-scripting label (`name: BEGIN ...`)."""
    rest = statement[end:].lstrip()
    return rest.startswith(":")


def _skip_space_and_comments(text: str, i: int) -> int:
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise AuditSqlError("SQL syntax error: a /* comment is not closed with */")
            i = close + 2
        else:
            break
    return i


def _check_balance(statement: str) -> None:
    """Refuse an unterminated string, identifier or comment, and unbalanced parentheses."""
    depth = 0
    i = 0
    n = len(statement)
    while i < n:
        c = statement[i]
        if c in "'\"`":
            i = _close_quote(statement, i)
            continue
        if statement.startswith("--", i) or statement.startswith("/*", i):
            i = _skip_space_and_comments(statement, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise AuditSqlError(f"SQL syntax error: ')' at position {i} closes no '('")
        i += 1
    if depth:
        raise AuditSqlError(f"SQL syntax error: {depth} '(' not closed by ')'")


def _close_quote(statement: str, start: int) -> int:
    """The position after the quote opened at `start` (Spark: backslash escapes in strings)."""
    quote = statement[start]
    i = start + 1
    while i < len(statement):
        c = statement[i]
        if c == "\\" and quote != "`":
            i += 2
            continue
        if c == quote:
            return i + 1
        i += 1
    what = "identifier" if quote == "`" else "string"
    raise AuditSqlError(
        f"SQL syntax error: the {what} opened with {quote} at position {start} is not closed"
    )
