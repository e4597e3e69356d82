"""The arguments the audit's named queries refuse before they build any Spark plan.

`replay/audit/queries.py` (and the access query's actions, `replay/audit/access.py`), in
process: no JVM.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.errors import PySparkRuntimeError

from replay.audit import queries
from replay.audit.access import access_changes
from replay.audit.queries import AuditQueryError

# The queries refuse arguments they cannot use before building any Spark plan.
NO_LOG: Any = object()


def test_a_time_range_must_be_in_order() -> None:
    for query in (queries.who_changed, access_changes):
        with pytest.raises(AuditQueryError, match="--since is after --until"):
            query(NO_LOG, since_ms=2, until_ms=1)


def test_named_query_arguments_are_checked() -> None:
    with pytest.raises(AuditQueryError, match="--user needs a user name"):
        access_changes(NO_LOG, user="")
    with pytest.raises(AuditQueryError, match="--topic needs a topic name"):
        queries.topic_lifecycle(NO_LOG, "")
    with pytest.raises(AuditQueryError, match="--topic needs a topic name"):
        queries.topic_lifecycle(NO_LOG, "team:")
    for by in ("week", "", "HOUR"):
        with pytest.raises(AuditQueryError, match="--by must be one of hour, day"):
            queries.churn(NO_LOG, by=by)
    for statement in ("", "  \n"):
        with pytest.raises(AuditQueryError, match="sql needs a statement"):
            queries.sql(NO_LOG, NO_LOG, statement)


class _Planned(Exception):
    """The query got past its checks and used the log."""


class _Log:
    """A stand-in log: any use of it means the query is being planned."""

    def __getattr__(self, name: str) -> Any:
        raise _Planned(name)


def _accepted(call: Any) -> None:
    """`call` gets past its argument checks, to planning (which fails: there is no session)."""
    with pytest.raises((_Planned, PySparkRuntimeError, AssertionError)):
        # AssertionError, PySparkRuntimeError: pyspark's own "no SparkContext" checks.
        call()


def test_arguments_that_are_fine_are_not_refused() -> None:
    log: Any = _Log()
    for query in (queries.who_changed, access_changes):
        _accepted(lambda query=query: query(log))
        _accepted(lambda query=query: query(log, since_ms=5))
        _accepted(lambda query=query: query(log, until_ms=5))
        _accepted(lambda query=query: query(log, since_ms=5, until_ms=5))
    _accepted(lambda: access_changes(log, user="bob"))
    _accepted(lambda: queries.topic_lifecycle(log, "team:orders"))
    for by in ("hour", "day"):
        _accepted(lambda by=by: queries.churn(log, by=by))
    _accepted(lambda: queries.sql(NO_LOG, log, "SELECT 1"))


def test_the_access_actions_one_per_record_type() -> None:
    from replay.audit.access import ACTIONS

    assert ACTIONS == ("grant", "revoke", "credential-set", "credential-removed")
