"""The ACL and SCRAM credential APIs of `AdminClient`, over its `ClientConnection`.

CreateAcls, DescribeAcls, DeleteAcls, DescribeUserScramCredentials and
AlterUserScramCredentials take and return the controller's values (`replay.controller.commands`),
so `mlog acls` and `mlog users` print the same thing on a data directory and through a server.
Codes a client may not know (a newer server's) come back as ints. Only salted passwords are
ever sent; a password never leaves the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeVar

from api.client.connection import ClientConnection, ClientError, RemoteError, known_error_code
from records.fields import INT32_MAX, INT32_MIN
from records.model import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from replay.controller.commands import (
    AclBinding,
    AclFilter,
    AlterScramResult,
    CreateAclResult,
    DeleteAclsResult,
    DescribeScramResult,
    Outcome,
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
)

_INT8 = (-128, 127)
_INT32 = (INT32_MIN, INT32_MAX)


def _fits(values: Sequence[int], bounds: tuple[int, int], what: str) -> None:
    """Refuse locally a value the request's field cannot carry."""
    low, high = bounds
    for value in values:
        if not low <= value <= high:
            raise ClientError(
                f"{what} {value} cannot be sent: the protocol field holds {low}..{high}"
            )


def _fits_codes(*codes: int) -> None:
    """Refuse locally an enum code an int8 field cannot carry."""
    _fits(list(codes), _INT8, "a code of")


E = TypeVar("E", bound=IntEnum)


def _enum(enum: type[E], code: Any) -> E | int:
    """A code from the wire as its enum member, or the int if this client does not know it."""
    try:
        return enum(int(code))
    except ValueError:
        return int(code)


def _remote(code: Any, message: str | None) -> RemoteError:
    error = known_error_code(int(code))
    return RemoteError(int(code), f"{error.name} ({int(code)}): {message or error.name}")


def _outcome(code: Any, message: str | None) -> Outcome:
    error = known_error_code(int(code))
    return Outcome(error_code=error, error_message=message if error else None)


class SecurityApis(ClientConnection):
    """ACL and SCRAM credential APIs (the base of `AdminClient`)."""

    async def write(self, api_key: int, **values: Any) -> Any:
        """A Kafka write API, sent once; `AdminClient.write` makes it idempotent (retried)."""
        return await self.request(api_key, **values)

    async def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """DescribeAcls: the ACLs a filter matches (every ACL without one)."""
        f = acl_filter or AclFilter()
        _fits_codes(f.resource_type, f.pattern_type, f.operation, f.permission_type)
        response = await self.request(
            29,
            resource_type_filter=f.resource_type,
            resource_name_filter=f.resource_name,
            pattern_type_filter=f.pattern_type,
            principal_filter=f.principal,
            host_filter=f.host,
            operation=f.operation,
            permission_type=f.permission_type,
        )
        if int(response.error_code) != 0:
            raise _remote(response.error_code, response.error_message)
        return [
            AclBinding(
                resource_type=_enum(ResourceType, r.resource_type),
                resource_name=r.resource_name,
                pattern_type=_enum(PatternType, r.pattern_type),
                principal=a.principal,
                host=a.host,
                operation=_enum(AclOperation, a.operation),
                permission_type=_enum(AclPermissionType, a.permission_type),
            )
            for r in response.resources
            for a in r.acls
        ]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[CreateAclResult]:
        """CreateAcls: one result per binding."""
        for b in bindings:
            _fits_codes(b.resource_type, b.pattern_type, b.operation, b.permission_type)
        response = await self.write(
            30,
            creations=[
                {
                    "resource_type": b.resource_type,
                    "resource_name": b.resource_name,
                    "resource_pattern_type": b.pattern_type,
                    "principal": b.principal,
                    "host": b.host,
                    "operation": b.operation,
                    "permission_type": b.permission_type,
                }
                for b in bindings
            ],
        )
        return [
            CreateAclResult(outcome=_outcome(r.error_code, r.error_message))
            for r in response.results
        ]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteAclsResult]:
        """DeleteAcls: per filter, the ACLs it removed."""
        for f in filters:
            _fits_codes(f.resource_type, f.pattern_type, f.operation, f.permission_type)
        response = await self.write(
            31,
            filters=[
                {
                    "resource_type_filter": f.resource_type,
                    "resource_name_filter": f.resource_name,
                    "pattern_type_filter": f.pattern_type,
                    "principal_filter": f.principal,
                    "host_filter": f.host,
                    "operation": f.operation,
                    "permission_type": f.permission_type,
                }
                for f in filters
            ],
        )
        return [
            DeleteAclsResult(
                outcome=_outcome(r.error_code, r.error_message),
                matching=tuple(
                    AclBinding(
                        resource_type=_enum(ResourceType, m.resource_type),
                        resource_name=m.resource_name,
                        pattern_type=_enum(PatternType, m.pattern_type),
                        principal=m.principal,
                        host=m.host,
                        operation=_enum(AclOperation, m.operation),
                        permission_type=_enum(AclPermissionType, m.permission_type),
                    )
                    for m in r.matching_acls
                ),
            )
            for r in response.filter_results
        ]

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> list[DescribeScramResult]:
        """DescribeUserScramCredentials: mechanisms and iterations (None: every user)."""
        response = await self.request(
            50, users=None if users is None else [{"name": u} for u in users]
        )
        if int(response.error_code) != 0:
            raise _remote(response.error_code, response.error_message)
        return [
            DescribeScramResult(
                user=r.user,
                outcome=_outcome(r.error_code, r.error_message),
                credentials=tuple(
                    ScramCredentialInfo(
                        mechanism=_enum(ScramMechanism, c.mechanism), iterations=int(c.iterations)
                    )
                    for c in r.credential_infos
                ),
            )
            for r in response.results
        ]

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[AlterScramResult]:
        """AlterUserScramCredentials: one result per user (sends salted passwords only)."""
        _fits_codes(*(d.mechanism for d in deletions), *(u.mechanism for u in upsertions))
        _fits([u.iterations for u in upsertions], _INT32, "an iteration count of")
        response = await self.write(
            51,
            deletions=[{"name": d.name, "mechanism": d.mechanism} for d in deletions],
            upsertions=[
                {
                    "name": u.name,
                    "mechanism": u.mechanism,
                    "iterations": u.iterations,
                    "salt": u.salt,
                    "salted_password": u.salted_password,
                }
                for u in upsertions
            ],
        )
        return [
            AlterScramResult(user=r.user, outcome=_outcome(r.error_code, r.error_message))
            for r in response.results
        ]
