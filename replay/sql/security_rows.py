"""ACLs and SCRAM credentials as snapshot rows, and rows back into records.

The rows of `snapshot_acls` and `snapshot_scram_credentials`; `replay.sql.content` counts them
into the checksum. Enums are stored by name, ids as Kafka's 22-character text, salts and keys
as bytes. Reading a row back checks it as replay checks the record (`acl_problem`,
`scram_problem`): a snapshot edited by hand cannot bring in an ACL or a credential the log
could not hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import Any, TypeVar

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialRecord,
)
from replay.image import AclsImage, ScramImage
from replay.rules import acl_problem, scram_problem
from replay.sql.errors import SnapshotContentError
from replay.sql.ids import parse_id

Row = tuple[Any, ...]
E = TypeVar("E", bound=IntEnum)

ACLS = "snapshot_acls"
SCRAM = "snapshot_scram_credentials"

ACL_COLUMNS = (
    "acl_id",
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)
SCRAM_COLUMNS = ("name", "mechanism", "salt", "stored_key", "server_key", "iterations")


def acl_rows(acls: AclsImage) -> Iterator[Row]:
    """One row per ACL, in id text order (the primary key's)."""
    for acl_id, acl in sorted((str(a.id), a) for a in acls.by_id.values()):
        yield (
            acl_id,
            acl.resource_type.name,
            acl.resource_name,
            acl.pattern_type.name,
            acl.principal,
            acl.host,
            acl.operation.name,
            acl.permission_type.name,
        )


def scram_rows(scram: ScramImage) -> Iterator[Row]:
    """One row per credential, by user then mechanism (the primary key's order)."""
    for (name, mechanism), credential in sorted(
        scram.credentials.items(), key=lambda item: (item[0][0], item[0][1].name)
    ):
        yield (
            name,
            mechanism.name,
            credential.salt,
            credential.stored_key,
            credential.server_key,
            credential.iterations,
        )


def _enum(kind: type[E], value: object, what: str) -> E:
    member = kind.__members__.get(value) if isinstance(value, str) else None
    if member is None:
        raise SnapshotContentError(f"{what} has unknown {kind.__name__} {value!r}")
    return member


def acl_from_row(row: Row) -> AccessControlEntryRecord:
    """The ACL a row holds; SnapshotContentError if it is not one replay would accept."""
    acl_id = parse_id(row[0], "ACL id")
    where = f"ACL {row[0]}"
    for index in (2, 4, 5):
        if not isinstance(row[index], str):
            raise SnapshotContentError(f"{where} has a {type(row[index]).__name__} where text is")
    acl = AccessControlEntryRecord(
        id=acl_id,
        resource_type=_enum(ResourceType, row[1], where),
        resource_name=row[2],
        pattern_type=_enum(PatternType, row[3], where),
        principal=row[4],
        host=row[5],
        operation=_enum(AclOperation, row[6], where),
        permission_type=_enum(AclPermissionType, row[7], where),
    )
    problem = acl_problem(acl)
    if problem is not None:
        raise SnapshotContentError(f"{where} breaks rule {problem[0]}: {problem[1]}")
    return acl


def normalized_scram_row(row: Row) -> Row:
    """A credential row with its binary columns as bytes (drivers may give memoryview)."""
    return (
        row[0],
        row[1],
        *(bytes(v) if isinstance(v, bytes | bytearray | memoryview) else v for v in row[2:5]),
        row[5],
    )


def scram_from_row(row: Row) -> UserScramCredentialRecord:
    """The credential a (normalized) row holds; SnapshotContentError if replay would refuse it.

    The error names the user and the mechanism, never the salt or a key.
    """
    name = row[0]
    if not isinstance(name, str):
        raise SnapshotContentError(f"a SCRAM credential has a user name {name!r} that is not text")
    where = f"the SCRAM credential of user {name!r}"
    mechanism = _enum(ScramMechanism, row[1], where)
    salt, stored_key, server_key, iterations = row[2], row[3], row[4], row[5]
    if not all(isinstance(v, bytes) for v in (salt, stored_key, server_key)):
        raise SnapshotContentError(f"{where} has a salt or key that is not bytes")
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise SnapshotContentError(f"{where} has an iteration count that is not a number")
    credential = UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=salt,
        stored_key=stored_key,
        server_key=server_key,
        iterations=iterations,
    )
    problem = scram_problem(credential)
    if problem is not None:
        raise SnapshotContentError(f"{where} breaks rule {problem[0]}: {problem[1]}")
    return credential
