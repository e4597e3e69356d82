"""ACLs and SCRAM credentials in time travel: their diff, their descriptions, what they touch.

`replay.timetravel` asks this module about the four security records. A credential is shown by
user, mechanism and iteration count only: its salt and keys appear nowhere (a change of them
is the field `keys`, "(hidden)" on both sides). Records that leave the server (FetchLog,
ImageAt) and `mlog log dump` without `--show-secrets` carry `redacted` credentials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from records.json_form import record_to_json
from records.model import (
    AccessControlEntryRecord,
    PatternType,
    Record,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.changes import Change
from replay.image import MetadataImage
from replay.rules import WILDCARD_RESOURCE
from replay.security.scram_rules import KEY_SIZES

HIDDEN = "(hidden)"
"""What is shown in place of a salt or a key."""

SECRET_FIELDS: Mapping[type[Record], tuple[str, ...]] = {
    UserScramCredentialRecord: ("salt", "stored_key", "server_key"),
}
"""The fields human output never shows, by record type."""


REDACTED_SALT = b"\x00"
"""The salt of a redacted credential (replay refuses an empty one)."""


def redacted(record: Record) -> Record:
    """`record` with a credential's salt and keys replaced by zeros; any other record as is.

    A redacted credential keeps user, mechanism and iterations (what Kafka's
    DescribeUserScramCredentials shows) and stays a record replay accepts: salt one zero
    byte, StoredKey and ServerKey all-zero of the hash's size. No password matches it (that
    needs H(ClientKey) = 0), so a copy of the log made from it logs nobody in.
    """
    if type(record) is not UserScramCredentialRecord:
        return record
    size = KEY_SIZES.get(record.mechanism, 0)
    return dataclasses.replace(
        record, salt=REDACTED_SALT, stored_key=bytes(size), server_key=bytes(size)
    )


SECRET_RECORD_TYPES = frozenset({UserScramCredentialRecord.RECORD_TYPE})
"""The record types `redacted` changes: a block holding none of them is sent as stored."""


def shown_json(record: Record) -> dict[str, Any]:
    """A record's JSON form for people: secret fields are "(hidden)".

    The exact form (`records.json_form`) stays for `--output json`, which `mlog log append`
    reads back: a copy of the log must keep its bytes.
    """
    data = record_to_json(record)
    for name in SECRET_FIELDS.get(type(record), ()):
        data["data"][name] = HIDDEN
    return data


SECURITY_RECORDS = (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    UserScramCredentialRecord,
    RemoveUserScramCredentialRecord,
)


def resource_text(acl: AccessControlEntryRecord) -> str:
    """The resource of an ACL as people say it: `topic orders`, `cluster kafka-cluster`."""
    return f"{acl.resource_type.name.lower()} {acl.resource_name}"


def acl_text(acl: AccessControlEntryRecord) -> str:
    """An ACL in one line: `ALLOW User:alice READ on topic orders (LITERAL) from host *`."""
    return (
        f"{acl.permission_type.name} {acl.principal} {acl.operation.name} on "
        f"{resource_text(acl)} ({acl.pattern_type.name}) from host {acl.host}"
    )


def acl_applies(acl: AccessControlEntryRecord, resource_type: ResourceType, name: str) -> bool:
    """Whether an ACL's pattern covers the resource `name` of `resource_type`."""
    if acl.resource_type != resource_type:
        return False
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return acl.resource_name in (name, WILDCARD_RESOURCE)


Fields = tuple[tuple[str, object, object], ...]


def _acl_fields(acl: AccessControlEntryRecord, added: bool) -> Fields:
    values = (
        ("permission", acl.permission_type.name),
        ("principal", acl.principal),
        ("operation", acl.operation.name),
        ("pattern", acl.pattern_type.name),
        ("host", acl.host),
    )
    return tuple((name, None, v) if added else (name, v, None) for name, v in values)


def diff_acls(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    """ACLs removed, then added (an ACL never changes: a new one has a new id)."""
    old, new = before.acls.by_id, after.acls.by_id
    if old is new:
        return
    removed = [a for i, a in old.items() if new.get(i) != a]
    added = [a for i, a in new.items() if old.get(i) != a]
    for acls, op in ((removed, "-"), (added, "+")):
        for acl in sorted(acls, key=lambda a: (resource_text(a), acl_text(a), a.id.bytes)):
            yield Change(
                op=op,
                kind="acl",
                name=resource_text(acl),
                id=str(acl.id),
                fields=_acl_fields(acl, op == "+"),
            )


def diff_scram(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    """Credentials added, removed or replaced: by user and mechanism, never a salt or key."""
    old, new = before.scram.credentials, after.scram.credentials
    if old is new:
        return
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        name = f"{key[0]} {key[1].mechanism_name}"
        if a is None or b is None:
            fields: Fields = (
                (
                    "iterations",
                    None if a is None else a.iterations,
                    None if b is None else b.iterations,
                ),
            )
            yield Change(op="+" if a is None else "-", kind="credential", name=name, fields=fields)
            continue
        changed: list[tuple[str, object, object]] = []
        if a.iterations != b.iterations:
            changed.append(("iterations", a.iterations, b.iterations))
        if (a.salt, a.stored_key, a.server_key) != (b.salt, b.stored_key, b.server_key):
            changed.append(("keys", HIDDEN, HIDDEN))
        yield Change(op="~", kind="credential", name=name, fields=tuple(changed))


def describe_security(record: Record, acls: Mapping[Uuid, AccessControlEntryRecord]) -> str:
    """One line for a security record; `acls` knows the ACLs created so far, by id."""
    if isinstance(record, AccessControlEntryRecord):
        return f"added ACL {record.id}: {acl_text(record)}"
    if isinstance(record, RemoveAccessControlEntryRecord):
        removed = acls.get(record.id)
        what = "an ACL not in the log read" if removed is None else acl_text(removed)
        return f"removed ACL {record.id}: {what}"
    if isinstance(record, UserScramCredentialRecord):
        return (
            f"set {record.mechanism.mechanism_name} credential of user {record.name} "
            f"({record.iterations} iterations)"
        )
    if isinstance(record, RemoveUserScramCredentialRecord):
        return f"removed {record.mechanism.mechanism_name} credential of user {record.name}"
    raise TypeError(f"{type(record).__name__} is not a security record")


def the_acl(
    record: Record, acls: Mapping[Uuid, AccessControlEntryRecord]
) -> AccessControlEntryRecord | None:
    """The ACL an ACL record creates or removes (a removal's from `acls`), else None."""
    if isinstance(record, AccessControlEntryRecord):
        return record
    if isinstance(record, RemoveAccessControlEntryRecord):
        return acls.get(record.id)
    return None


def touches_user(record: Record, user: str, acls: Mapping[Uuid, AccessControlEntryRecord]) -> bool:
    """Whether a record concerns a user: its credentials, or an ACL for it or for `User:*`."""
    if isinstance(record, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
        return record.name == user
    acl = the_acl(record, acls)
    return acl is not None and acl.principal in (f"User:{user}", "User:*")


def touches_resource(
    record: Record,
    resource_type: ResourceType,
    name: str,
    acls: Mapping[Uuid, AccessControlEntryRecord],
) -> bool:
    """Whether a record grants or revokes an ACL covering the resource `name`."""
    acl = the_acl(record, acls)
    return acl is not None and acl_applies(acl, resource_type, name)
