"""ACLs: create, delete and describe them as Kafka's KRaft controller does (`AclControlManager`).

A creation is checked field by field against what a stored ACL may hold (Kafka's
`validateNewAcl` and the broker's checks before it), and each refused one gets its own
INVALID_REQUEST with a message; the others go on. An ACL equal to one that exists (or to one
earlier in the request) succeeds without a record, as in Kafka. Deletes and describes take
Kafka's filters (`AclBindingFilter.matches`); a filter with an UNKNOWN part is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    Record,
    RemoveAccessControlEntryRecord,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.commands import (
    AclBinding,
    AclFilter,
    ControllerResult,
    CreateAclResult,
    DeleteAclsResult,
    Outcome,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import check_label, clip
from replay.image import MetadataImage
from replay.rules import CLUSTER_RESOURCE_NAME, WILDCARD_RESOURCE

CLUSTER_NAME = CLUSTER_RESOURCE_NAME
"""The name of the cluster resource (Kafka's `kafka-cluster`); the only one a CLUSTER ACL has."""

WILDCARD = WILDCARD_RESOURCE
"""A literal resource name, principal name or host that stands for every one."""

USER_PREFIX = "User:"
"""The principal type every principal of this server has."""

MAX_NAME_LENGTH = 1000
"""Characters of a resource name or principal: above any qualified topic name (a namespace of
249 characters, ':' and a topic of 249) and any certificate's distinguished name in practice."""

MAX_RECORDS_PER_REQUEST = 10_000
"""ACLs one request may create or delete (Kafka's `MAX_RECORDS_PER_USER_OP`)."""

_FILTER_ONLY = ("UNKNOWN", "ANY", "MATCH")
"""The members of the ACL enums that only a filter holds: without them, a pattern type is
LITERAL or PREFIXED and a permission type ALLOW or DENY."""


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def _concrete(
    enum: type[ResourceType] | type[PatternType] | type[AclOperation] | type[AclPermissionType],
    code: int,
    what: str,
) -> int:
    """`code` as a member of `enum` that a stored ACL may hold, else INVALID_REQUEST."""
    try:
        member = enum(code)
    except ValueError:
        raise _invalid(f"Invalid {what} {code}: not a known code") from None
    if member.name in _FILTER_ONLY:
        raise _invalid(f"Invalid {what} {member.name}: a stored ACL needs a concrete value")
    return member


def check_principal(principal: str) -> None:
    """Refuse a principal that is not `User:<name>` (or `User:*`) with INVALID_REQUEST."""
    check_label(principal, what="principal", max_length=MAX_NAME_LENGTH)
    if not principal.startswith(USER_PREFIX) or not principal[len(USER_PREFIX) :].strip():
        raise _invalid(
            f"principal {clip(principal)} is not of the form User:<name>; write User:alice, "
            "or User:* for every user"
        )


def check_host(host: str) -> None:
    """Refuse a host that is not `*` or an IP address in its usual written form."""
    check_label(host, what="host", max_length=64)
    if host == WILDCARD:
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise _invalid(
            f"host {clip(host)} is not an IP address; an ACL's host is the client's IP address "
            "(for example 192.0.2.7 or 2001:db8::7), or * for any"
        ) from None
    if str(address) != host:
        raise _invalid(
            f"host {clip(host)} is not written as clients' addresses are compared; "
            f"write {str(address)!r}"
        )


def validate_binding(binding: AclBinding) -> AclBinding:
    """The binding with its codes as enums, if a stored ACL may hold it; else INVALID_REQUEST."""
    resource_type = _concrete(ResourceType, binding.resource_type, "resourceType")
    pattern_type = _concrete(PatternType, binding.pattern_type, "patternType")
    operation = _concrete(AclOperation, binding.operation, "operation")
    permission = _concrete(AclPermissionType, binding.permission_type, "permissionType")
    name = binding.resource_name
    if isinstance(name, str) and not name:
        raise _invalid("Resource name should not be empty")
    check_label(name, what="resource name", max_length=MAX_NAME_LENGTH)
    if resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise _invalid(
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}, not {clip(name)}"
        )
    check_principal(binding.principal)
    check_host(binding.host)
    return AclBinding(
        resource_type=ResourceType(resource_type),
        resource_name=name,
        pattern_type=PatternType(pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=AclOperation(operation),
        permission_type=AclPermissionType(permission),
    )


def binding_of(acl: AccessControlEntryRecord) -> AclBinding:
    """The binding a stored ACL is (its record without the id)."""
    return AclBinding(
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def create_acls(
    image: MetadataImage, bindings: Sequence[AclBinding], new_id: Callable[[], Uuid]
) -> ControllerResult[list[CreateAclResult]]:
    """One result per binding; each valid new one becomes an ACL with a fresh random id."""
    existing = {binding_of(acl) for acl in image.acls.by_id.values()}
    taken: set[Uuid] = set()
    records: list[Record] = []
    results: list[CreateAclResult] = []
    for binding in bindings:
        try:
            checked = validate_binding(binding)
            if checked not in existing and len(records) >= MAX_RECORDS_PER_REQUEST:
                raise _invalid(
                    f"a request may create at most {MAX_RECORDS_PER_REQUEST} ACLs; "
                    "send the rest in another request"
                )
        except ApiError as exc:
            results.append(CreateAclResult(outcome=Outcome.from_error(exc)))
            continue
        if checked not in existing:
            existing.add(checked)
            acl_id = _fresh_id(image, new_id, taken)
            taken.add(acl_id)
            records.append(_record(checked, acl_id))
        results.append(CreateAclResult())
    return ControllerResult(records=tuple(records), response=results)


def _fresh_id(image: MetadataImage, new_id: Callable[[], Uuid], taken: set[Uuid]) -> Uuid:
    """An id no ACL has (in the image or `taken`: the batch's), not the zero id."""
    while True:
        acl_id = new_id()
        if acl_id not in Uuid.RESERVED and acl_id not in taken and image.acls.get(acl_id) is None:
            return acl_id


def _record(binding: AclBinding, acl_id: Uuid) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=ResourceType(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=PatternType(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=AclOperation(binding.operation),
        permission_type=AclPermissionType(binding.permission_type),
    )


# ---------------------------------------------------------------------- filters


def validate_filter(acl_filter: AclFilter) -> AclFilter:
    """The filter with its codes as enums; INVALID_REQUEST for an unknown or UNKNOWN part."""
    parts = (
        (ResourceType, acl_filter.resource_type, "resource type"),
        (PatternType, acl_filter.pattern_type, "pattern type"),
        (AclOperation, acl_filter.operation, "operation"),
        (AclPermissionType, acl_filter.permission_type, "permission type"),
    )
    members = []
    for enum, code, what in parts:
        try:
            member = enum(code)
        except ValueError:
            raise _invalid(f"Unknown {what} {code} in the filter") from None
        if member.name == "UNKNOWN":
            raise _invalid(f"The filter's {what} is UNKNOWN; name one, or ANY")
        members.append(member)
    for text, what in (
        (acl_filter.resource_name, "resource name"),
        (acl_filter.principal, "principal"),
        (acl_filter.host, "host"),
    ):
        if text is not None and len(text) > MAX_NAME_LENGTH:
            raise _invalid(f"The filter's {what} is longer than {MAX_NAME_LENGTH} characters")
    return AclFilter(
        resource_type=ResourceType(members[0]),
        resource_name=acl_filter.resource_name,
        pattern_type=PatternType(members[1]),
        principal=acl_filter.principal,
        host=acl_filter.host,
        operation=AclOperation(members[2]),
        permission_type=AclPermissionType(members[3]),
    )


def _name_matches(acl_filter: AclFilter, acl: AccessControlEntryRecord) -> bool:
    """Kafka's `ResourcePatternFilter.matches`, given the types already match."""
    name = acl_filter.resource_name
    if name is None:
        return True
    if acl_filter.pattern_type in (PatternType.ANY, acl.pattern_type):
        return name == acl.resource_name
    # MATCH: the ACLs that apply to a resource of this name.
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return name.startswith(acl.resource_name)


def matches(acl_filter: AclFilter, acl: AccessControlEntryRecord) -> bool:
    """Whether a (validated) filter matches an ACL: Kafka's `AclBindingFilter.matches`."""
    if acl_filter.resource_type not in (ResourceType.ANY, acl.resource_type):
        return False
    if acl_filter.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
        return False
    if not _name_matches(acl_filter, acl):
        return False
    if acl_filter.principal is not None and acl_filter.principal != acl.principal:
        return False
    if acl_filter.host is not None and acl_filter.host != acl.host:
        return False
    if acl_filter.operation not in (AclOperation.ANY, acl.operation):
        return False
    return acl_filter.permission_type in (AclPermissionType.ANY, acl.permission_type)


def matching(image: MetadataImage, acl_filter: AclFilter) -> list[AccessControlEntryRecord]:
    """The ACLs a validated filter matches, in the image's order."""
    return [acl for acl in image.acls.sorted() if matches(acl_filter, acl)]


def describe_acls(image: MetadataImage, acl_filter: AclFilter) -> list[AclBinding]:
    """The ACLs a filter matches (INVALID_REQUEST for a filter with an UNKNOWN part)."""
    checked = validate_filter(acl_filter)
    return [binding_of(acl) for acl in matching(image, checked)]


def delete_acls(
    image: MetadataImage, filters: Sequence[AclFilter]
) -> ControllerResult[list[DeleteAclsResult]]:
    """Remove every ACL a filter matches; one result per filter with the ACLs it matched.

    An ACL two filters match is in both results and removed once, as in Kafka.
    """
    removed: dict[Uuid, None] = {}
    results: list[DeleteAclsResult] = []
    for acl_filter in filters:
        try:
            found = matching(image, validate_filter(acl_filter))
            new = [acl.id for acl in found if acl.id not in removed]
            if len(removed) + len(new) > MAX_RECORDS_PER_REQUEST:
                raise _invalid(
                    f"a request may delete at most {MAX_RECORDS_PER_REQUEST} ACLs and this "
                    f"filter matches {len(found)}; delete with narrower filters"
                )
        except ApiError as exc:
            results.append(DeleteAclsResult(outcome=Outcome.from_error(exc)))
            continue
        removed.update(dict.fromkeys(new))
        results.append(DeleteAclsResult(matching=tuple(binding_of(acl) for acl in found)))
    records = tuple(RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed)
    return ControllerResult(records=records, response=results)


def resources(
    bindings: Iterable[AclBinding],
) -> list[tuple[tuple[int, str, int], list[AclBinding]]]:
    """Bindings grouped by resource pattern (type, name, pattern type), in first-seen order."""
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in bindings:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return list(grouped.items())
