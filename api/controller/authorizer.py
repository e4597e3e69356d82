"""Authorization: Kafka's `StandardAuthorizer` rules over the ACLs of the image, plus namespaces.

Turned on by the server's `authorizer.class.name`; `AuthorizerConfig` holds the settings the
server config gives it and `Authorizer` decides. The rules, as Kafka's `StandardAuthorizerData`
applies them:

- a super user (`super.users`) may do everything;
- an ACL applies to a request when its resource matches (LITERAL: the same name; LITERAL `*`:
  every name of its type; PREFIXED: a name it starts), its principal is the requester's or
  `User:*`, and its host is the client's address or `*`;
- a DENY applies to its operation (ALL: every operation); an ALLOW also implies DESCRIBE from
  READ, WRITE, DELETE and ALTER, and DESCRIBE_CONFIGS from ALTER_CONFIGS (`IMPLIED_BY`);
- DENY beats ALLOW; with no ACL on the resource at all, `allow.everyone.if.no.acl.found`
  decides (default: deny); with ACLs on it but none allowing, deny.

Namespaces (ours, not Kafka's): a topic `org:apache:t` lies in namespace `org:apache`, whose
chain is `org:apache` then `org`; a namespace's chain is itself then its parents. NAMESPACE ACLs
on the chain apply to everything inside: a DENY anywhere on the chain refuses first (the
namespace gate, whatever the topic's own ACLs say), then a DENY on the entity refuses, then an
ALLOW on the entity or anywhere on the chain grants; the no-ACL rule counts the chain's ACLs too.
Moving a topic changes its qualified name, so its chain and the namespace ACLs that apply.

Decisions use an index of the image's ACLs, built once per `image.acls.by_id` object (images
share it until an ACL changes): ACLs by (resource type, literal name) and by (resource type,
prefix) with the prefix lengths in use, then by principal and host, each holding the operations
denied and allowed as bit masks, so a decision is a few dict lookups whatever the ACL count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from immutables import Map

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.image import (
    NAMESPACE_SEPARATOR,
    MetadataImage,
    enclosing_namespaces,
    split_qualified_name,
)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's class name for the authorizer; `authorizer.class.name` accepts it."""

WILDCARD = "*"
"""A LITERAL resource name or an ACL host that matches every name or host."""

WILDCARD_PRINCIPAL = "User:*"
"""An ACL principal that matches every principal."""

CLUSTER_NAME = "kafka-cluster"
"""The name of the one CLUSTER resource (Kafka's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerConfig:
    """The authorizer's settings, under Kafka's keys."""

    super_users: frozenset[str] = field(default_factory=frozenset)
    """`super.users`: principals (`User:<name>`) allowed everything, whatever the ACLs say."""
    allow_everyone_if_no_acl_found: bool = False
    """`allow.everyone.if.no.acl.found`: with no ACL on a resource (or its namespaces),
    allow instead of deny."""


IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
"""The ALLOWed operations that grant an operation besides itself and ALL (Kafka's table);
implication never applies to DENY."""

CONCRETE_OPERATIONS: tuple[AclOperation, ...] = tuple(
    op for op in AclOperation if op > AclOperation.ALL
)
"""The operations a request asks for (not UNKNOWN, ANY or ALL)."""

_EVERY_OPERATION = sum(1 << op for op in CONCRETE_OPERATIONS)


def _granted_mask(operation: AclOperation) -> int:
    """The requested operations an ALLOW of `operation` grants, as a bit mask."""
    if operation == AclOperation.ALL:
        return _EVERY_OPERATION
    mask = 1 << operation
    for implied, by in IMPLIED_BY.items():
        if operation in by:
            mask |= 1 << implied
    return mask


def _denied_mask(operation: AclOperation) -> int:
    """The requested operations a DENY of `operation` refuses (no implication), as a bit mask."""
    return _EVERY_OPERATION if operation == AclOperation.ALL else 1 << operation


def namespace_chain(resource_type: ResourceType, name: str) -> list[str]:
    """The namespaces whose ACLs apply to a resource, nearest first.

    A topic's are its namespace and that one's parents (`org:apache:t` -> `org:apache`,
    `org`; a topic of the default namespace has none); a namespace's are itself and its
    parents; other resources have none.
    """
    if resource_type == ResourceType.TOPIC:
        return enclosing_namespaces(split_qualified_name(name)[0])
    if resource_type == ResourceType.NAMESPACE:
        return enclosing_namespaces(name)
    return []


_TOPIC = int(ResourceType.TOPIC)
_NAMESPACE = int(ResourceType.NAMESPACE)


class _Masks:
    """One principal's ACLs on one resource pattern: operations denied and granted (bit masks).

    `deny`/`allow` hold the ACLs from any host (`*`); `hosts` those of named hosts, if any.
    """

    __slots__ = ("allow", "deny", "hosts")

    def __init__(self) -> None:
        self.deny = 0
        self.allow = 0
        self.hosts: dict[str, list[int]] | None = None

    def add(self, host: str, deny: int, allow: int) -> None:
        if host == WILDCARD:
            self.deny |= deny
            self.allow |= allow
            return
        if self.hosts is None:
            self.hosts = {}
        both = self.hosts.setdefault(host, [0, 0])
        both[0] |= deny
        both[1] |= allow


_Grants = dict[str, _Masks]
"""The ACLs of one resource pattern, by principal (`User:*` included)."""


class AclIndex:
    """The ACLs of one image, indexed for decisions (see the module docstring)."""

    __slots__ = ("_literal", "_literal_namespace_lengths", "_namespaced", "_prefixed", "size")

    def __init__(self, acls: Iterable[AccessControlEntryRecord]) -> None:
        literal: dict[int, dict[str, _Grants]] = {}
        prefixed: dict[int, dict[str, _Grants]] = {}
        size = 0
        for acl in acls:
            size += 1
            if acl.pattern_type == PatternType.PREFIXED:
                table = prefixed
            elif acl.pattern_type == PatternType.LITERAL:
                table = literal
            else:  # replay admits only LITERAL and PREFIXED; anything else matches nothing
                continue
            by_name = table.setdefault(int(acl.resource_type), {})
            grants = by_name.setdefault(acl.resource_name, {})
            masks = grants.get(acl.principal)
            if masks is None:
                masks = grants[acl.principal] = _Masks()
            # Another permission type matches nothing, but the ACL is on the resource all the
            # same (it counts against allow.everyone.if.no.acl.found, as in Kafka).
            if acl.permission_type == AclPermissionType.DENY:
                masks.add(acl.host, _denied_mask(acl.operation), 0)
            elif acl.permission_type == AclPermissionType.ALLOW:
                masks.add(acl.host, 0, _granted_mask(acl.operation))
            else:
                masks.add(acl.host, 0, 0)
        self._literal = literal
        # Per resource type: the prefix lengths in use, shortest first, and the prefixes.
        self._prefixed = {
            kind: (tuple(sorted({len(p) for p in by_prefix})), by_prefix)
            for kind, by_prefix in prefixed.items()
        }
        self._namespaced = _NAMESPACE in literal or _NAMESPACE in prefixed
        self._literal_namespace_lengths = frozenset(len(n) for n in literal.get(_NAMESPACE, ()))
        self.size = size
        """How many ACLs the index holds."""

    def resource_grants(self, resource_type: int, name: str, found: list[_Grants]) -> None:
        """Append the ACLs whose pattern matches a resource: LITERAL name and `*`, PREFIXED."""
        by_name = self._literal.get(resource_type)
        if by_name is not None:
            grants = by_name.get(name)
            if grants is not None:
                found.append(grants)
            if name != WILDCARD:
                grants = by_name.get(WILDCARD)
                if grants is not None:
                    found.append(grants)
        self._prefixed_grants(resource_type, name, found)

    def _prefixed_grants(self, resource_type: int, name: str, found: list[_Grants]) -> None:
        prefixed = self._prefixed.get(resource_type)
        if prefixed is not None:
            lengths, by_prefix = prefixed
            size = len(name)
            for length in lengths:
                if length > size:
                    break
                grants = by_prefix.get(name[:length])
                if grants is not None:
                    found.append(grants)

    def chain_grants(self, namespace: str, found: list[_Grants]) -> None:
        """Append the NAMESPACE ACLs matching any link of a namespace's chain.

        The links are `namespace` and each enclosing one (each prefix ending before a
        separator, as `enclosing_namespaces`), so each is a prefix of `namespace`: a PREFIXED
        ACL matches a link exactly when it matches `namespace` itself (one lookup per prefix
        length), `*` matches them all, and a link is cut out of the name for a LITERAL lookup
        only when a LITERAL namespace ACL of its length exists. A name with many separators
        costs no quadratic copying.
        """
        if not namespace:
            return  # the default namespace: no chain
        by_name = self._literal.get(_NAMESPACE)
        if by_name is not None:
            lengths = self._literal_namespace_lengths
            end = len(namespace)
            while end >= 0:
                if end in lengths:
                    grants = by_name.get(namespace[:end])
                    if grants is not None:
                        found.append(grants)
                end = namespace.rfind(NAMESPACE_SEPARATOR, 0, end)
            grants = by_name.get(WILDCARD)
            if grants is not None:
                found.append(grants)
        self._prefixed_grants(_NAMESPACE, namespace, found)

    def decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool | None:
        """The ACLs' decision on a request, or None when no ACL is on the resource or its chain.

        True: an ALLOW applies and no DENY; False: a DENY applies, or ACLs are on the resource
        and its chain but none allows this request.
        """
        kind = int(resource_type)
        # The namespace gate first: the chain's ACLs, then the entity's. Both kinds of DENY
        # refuse, so the order only says which one a reader should think of first.
        found: list[_Grants] = []
        if kind == _TOPIC:
            if self._namespaced:
                self.chain_grants(name.rpartition(NAMESPACE_SEPARATOR)[0], found)
            self.resource_grants(kind, name, found)
        elif kind == _NAMESPACE and name:
            # A namespace is the first link of its own chain: its ACLs are looked up there.
            self.chain_grants(name, found)
        else:
            self.resource_grants(kind, name, found)
        if not found:
            return None
        bit = 1 << operation
        allowed = False
        for grants in found:
            for who in (principal, WILDCARD_PRINCIPAL):
                masks = grants.get(who)
                if masks is None:
                    continue
                if masks.deny & bit:
                    return False
                if masks.allow & bit:
                    allowed = True
                hosts = masks.hosts
                if hosts is not None:
                    both = hosts.get(host)
                    if both is not None:
                        if both[0] & bit:
                            return False
                        if both[1] & bit:
                            allowed = True
        return allowed


class Authorizer:
    """Decides whether a principal may do an operation on a resource, from the image's ACLs."""

    __slots__ = ("_indexes", "config")

    CACHED = 2
    """Indexes kept (by ACL map identity): the committed image's and the working image's, so
    reads and writes while an ACL change is in flight do not rebuild in turn."""

    def __init__(self, config: AuthorizerConfig) -> None:
        self.config = config
        self._indexes: list[tuple[Map[Uuid, AccessControlEntryRecord], AclIndex]] = []

    def index(self, image: MetadataImage) -> AclIndex:
        """The index of the image's ACLs, built on first use of its ACL map."""
        acls = image.acls.by_id
        for held, index in self._indexes:
            if held is acls:
                return index
        index = AclIndex(acls.values())
        # The map itself is kept (not its id()), so a freed map's id cannot be mistaken for it.
        self._indexes = [(acls, index), *self._indexes[: self.CACHED - 1]]
        return index

    def authorize(  # noqa: PLR0917 - who, from where, what, on which resource: Kafka's Action
        self,
        image: MetadataImage,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether `principal`, connected from `host`, may do `operation` on the resource."""
        if principal in self.config.super_users:
            return True
        decided = self.index(image).decide(principal, host, operation, resource_type, name)
        if decided is None:
            return self.config.allow_everyone_if_no_acl_found
        return decided

    def authorized_operations(
        self,
        image: MetadataImage,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        *,
        operations: Sequence[AclOperation],
    ) -> int:
        """Kafka's `authorized_operations` bit field: bit `op` set for each operation allowed."""
        return sum(
            1 << op
            for op in operations
            if self.authorize(image, principal, host, op, resource_type, name)
        )


TOPIC_OPERATIONS: tuple[AclOperation, ...] = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
"""The operations Kafka reports in a topic's `topic_authorized_operations`."""

CLUSTER_OPERATIONS: tuple[AclOperation, ...] = (
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
)
"""The operations Kafka reports in `cluster_authorized_operations`."""
