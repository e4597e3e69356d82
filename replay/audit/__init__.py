"""Audit replay in PySpark: the log as a DataFrame, named audit queries, state at an offset.

PySpark is imported lazily (the server and most tests never start a JVM): importing this package
costs nothing; `audit_session()` builds a local (or cluster) SparkSession with the
`metadata_log` data source registered, and `register(spark)` adds it to an existing session.
"""

from __future__ import annotations

from replay.audit.session import audit_session, register

__all__ = ["audit_session", "register"]
