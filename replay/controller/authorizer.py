"""Authorization: Kafka's `StandardAuthorizer` rules over the ACLs of the image, plus namespaces.

Turned on by the server's `authorizer.class.name`; `AuthorizerConfig` holds the settings the
server config gives it and `Authorizer` decides. The rules, as Kafka's `StandardAuthorizerData`
applies them:

- a super user (`super.users`) may do everything;
- an ACL applies to a request when its resource matches (LITERAL: the same name; LITERAL `*`:
  every name of its type; PREFIXED: a name it starts), its principal is the requester's or
  `User:*`, and its host is the client's address or `*`;
- a DENY applies to its operation (ALL: every operation); an ALLOW also implies DESCRIBE from
  READ, WRITE, DELETE and ALTER, and DESCRIBE_CONFIGS from ALTER_CONFIGS (`acl_index.IMPLIED_BY`);
- DENY beats ALLOW; with no ACL on the resource at all, `allow.everyone.if.no.acl.found`
  decides (default: deny); with ACLs on it but none allowing, deny.

Namespaces (ours, not Kafka's): a topic `org:apache:t` lies in namespace `org:apache`, whose
chain is `org:apache` then `org`; a namespace's chain is itself then its parents. NAMESPACE ACLs
on the chain apply to everything inside: a DENY anywhere on the chain refuses first (the
namespace gate, whatever the topic's own ACLs say), then a DENY on the entity refuses, then an
ALLOW on the entity or anywhere on the chain grants; the no-ACL rule counts the chain's ACLs too.
Moving a topic changes its qualified name, so its chain and the namespace ACLs that apply.

Decisions use an index of the image's ACLs (`replay.controller.acl_index`), made once per
`image.acls.by_id` object (images share it until an ACL changes), so a decision is a few dict
lookups whatever the ACL count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from immutables import Map

from records.model import AccessControlEntryRecord, AclOperation, ResourceType
from records.uuids import Uuid
from replay.controller.acl_index import AclIndex
from replay.image import MetadataImage, enclosing_namespaces, split_qualified_name
from replay.rules import CLUSTER_RESOURCE_NAME

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's class name for the authorizer; `authorizer.class.name` accepts it."""

CLUSTER_NAME = CLUSTER_RESOURCE_NAME
"""The name of the one CLUSTER resource (Kafka's `kafka-cluster`; replay's rules hold it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerConfig:
    """The authorizer's settings, under Kafka's keys."""

    super_users: frozenset[str] = field(default_factory=frozenset)
    """`super.users`: principals (`User:<name>`) allowed everything, whatever the ACLs say."""
    allow_everyone_if_no_acl_found: bool = False
    """`allow.everyone.if.no.acl.found`: with no ACL on a resource (or its namespaces),
    allow instead of deny."""


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
        """The index of the image's ACLs, made on first use of its ACL map.

        Made from the newest index held when only a few ACLs differ (`AclIndex.updated`),
        else built.
        """
        acls = image.acls.by_id
        for held, index in self._indexes:
            if held is acls:
                return index
        # An ACL change: the newest index is the one before it, mostly.
        index = self._indexes[0][1].updated(acls) if self._indexes else AclIndex(acls.values())
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
