"""The `access-changes` audit query: who granted or revoked what, for whom, and when.

One row per ACL created (`grant`, whatever its permission: a DENY ACL is granted too) or
removed (`revoke`), and per SCRAM credential set (`credential-set`) or removed
(`credential-removed`). A removal record holds only the ACL's id; its fields are those of the
ACL that id named when it was removed (the latest creation of that id before the removal: an id
may be created again after a removal), found with a window over each id's records. Salts and
keys are never read: the table has no column for them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from replay.audit.queries import AuditQueryError

ACL_FIELDS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "acl_principal",
    "acl_host",
    "operation",
    "permission_type",
)
"""The columns of an ACL, as the table and the query name them."""

ACCESS_COLUMNS = (
    "offset",
    "timestamp",
    "principal",
    "action",
    "acl_id",
    *ACL_FIELDS,
    "user_name",
    "mechanism",
    "iterations",
)
"""The columns of `access_changes`, in order (documented in docs/audit.md)."""

_KINDS = {
    "AccessControlEntryRecord": "grant",
    "RemoveAccessControlEntryRecord": "revoke",
    "UserScramCredentialRecord": "credential-set",
    "RemoveUserScramCredentialRecord": "credential-removed",
}


ACTIONS = tuple(_KINDS.values())
"""The actions, one per record type: grant, revoke, credential-set, credential-removed."""


def _action() -> Column:
    kind = F.col("record_type")
    (first, first_name), *rest = _KINDS.items()
    action = F.when(kind == first, F.lit(first_name))
    for record_type, name in rest:
        action = action.when(kind == record_type, F.lit(name))
    return action


def access_changes(
    log: DataFrame,
    *,
    principal: str | None = None,
    user: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> DataFrame:
    """Every ACL and credential change (see the module docstring), oldest first.

    `principal` keeps the changes made by that principal (who wrote the entry); `user` those
    concerning a user: its credentials, and ACLs for `User:<user>` or for every user
    (`User:*`). `since_ms` and `until_ms` bound the time, inclusive.
    """
    if since_ms is not None and until_ms is not None and since_ms > until_ms:
        raise AuditQueryError("--since is after --until; give the earlier time first")
    if user is not None and not user:
        raise AuditQueryError("--user needs a user name, e.g. alice")
    # One scan of the log, with the window over it: filters on time or principal stay above
    # the window. (Two scans of one relation in a query, e.g. a union of two branches, were
    # seen to share the block pruning pushed into one of them.)
    ids = Window.partitionBy("acl_id").orderBy("offset")
    changes = log.where(F.col("record_type").isin(*_KINDS)).select(
        "offset",
        "timestamp",
        "principal",
        _action().alias("action"),
        "acl_id",
        # A create's own fields; for a removal (none of its own), the latest create's.
        *(F.last(name, ignorenulls=True).over(ids).alias(name) for name in ACL_FIELDS),
        "user_name",
        F.regexp_replace(F.col("mechanism"), "_", "-").alias("mechanism"),
        "iterations",
    )
    if principal is not None:
        changes = changes.where(F.col("principal") == principal)
    if since_ms is not None:
        changes = changes.where(F.col("timestamp") >= F.timestamp_millis(F.lit(since_ms)))
    if until_ms is not None:
        changes = changes.where(F.col("timestamp") <= F.timestamp_millis(F.lit(until_ms)))
    if user is not None:
        changes = changes.where(
            F.col("acl_principal").isin(f"User:{user}", "User:*") | (F.col("user_name") == user)
        )
    return changes.orderBy("offset").select(*ACCESS_COLUMNS)
