"""The invariants replay holds the image to: each rule's name and meaning, and the name rules.

Replay refuses a record that would break one of these rules (a `ReplayError` naming the rule),
whatever wrote it. They are the promises of the controller (`replay/controller/`): a log it wrote
always replays, and a record it could not have written (typed by hand into `mlog log append`, or
from a faulty program) does not, as in Kafka's KRaft, where a controller that cannot replay a
committed record stops rather than serve a state no controller made.

Three kinds of rules:
- state: every partition, topic, namespace and broker of the image, after every record;
- transition: what a change may do (epochs only rise, a new leader is live, modes only move on);
- batch: what holds between batches but not inside one (a topic created in a batch has its
  partitions by the end of it), checked by `MetadataDelta.finish_batch`.

What replay does not check, and why, is in docs/testing.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    UserScramCredentialRecord,
)
from replay.image import NAMESPACE_SEPARATOR
from replay.security.scram_rules import KEY_SIZES, MAX_ITERATIONS, MIN_ITERATIONS

CLUSTER_RESOURCE_NAME: Final = "kafka-cluster"
"""The one resource name of a CLUSTER ACL (Kafka's `CLUSTER_NAME`)."""

WILDCARD_RESOURCE: Final = "*"
"""The resource name a LITERAL ACL uses for every resource of its type."""

RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # features
        "feature.level-nonnegative": "a feature level is 0 (feature removed) or more",
        # brokers
        "broker.id-nonnegative": "broker ids are 0 or more",
        "broker.registration-valid": (
            "a registration's rack, if any, is not blank, and each endpoint has a host and a "
            "port in 1..65535"
        ),
        "broker.epoch-increases": "a broker registered again gets a larger broker epoch",
        "broker.registered": (
            "unregistering or changing a broker names its current registration (id and epoch)"
        ),
        "broker.unfence-after-shutdown": (
            "a broker in controlled shutdown is not unfenced (it registers again instead)"
        ),
        # namespaces
        "namespace.name-legal": (
            "a namespace name is tiers of ASCII letters, digits, '.' and '-' (not '.' or '..') "
            "joined by ':', at most 249 characters"
        ),
        "namespace.name-unique": "a namespace name belongs to one live namespace",
        "namespace.id-unique": "a namespace id is not reserved and not used by a live namespace",
        "namespace.parent": "a namespace's parent exists first and is the one its parent id names",
        "namespace.exists": "a namespace removal names a live namespace",
        "namespace.empty-before-removal": (
            "a namespace is removed only when it has no child namespaces and no topics"
        ),
        # topics
        "topic.name-legal": (
            "a topic name is 1 to 249 ASCII letters, digits, '.', '_' and '-' (not '.' or '..')"
        ),
        "topic.name-unique": "a qualified topic name belongs to one live topic",
        "topic.id-unique": "a topic id is not reserved and not used by a live topic",
        "topic.namespace-exists": "a topic is created in, or moved to, a namespace that exists",
        "topic.exists": "a record about a topic names a live topic id",
        "topic.move-changes-namespace": "a move takes a topic to another namespace",
        "topic.has-partitions": "a topic has at least one partition at the end of every batch",
        # partitions: state
        "partition.next-id": (
            "a PartitionRecord creates its topic's next partition: ids are dense from 0, and a "
            "partition is created once (later states come as PartitionChangeRecords)"
        ),
        "partition.exists": "a partition change names a partition the topic has",
        "partition.replicas-valid": "the replicas are one or more distinct broker ids >= 0",
        "partition.isr-valid": "the ISR is one or more distinct replicas",
        "partition.leader-in-isr": "the leader is -1 (no leader) or a member of the ISR",
        "partition.reassignment-valid": (
            "adding and removing replicas are distinct replicas, no replica is both, and at "
            "least one replica is not being removed"
        ),
        # partitions: transitions
        "partition.epochs-valid": (
            "epochs are >= 0; every change raises the partition epoch, and the leader epoch "
            "never falls and rises with every new leader"
        ),
        "partition.added-replicas-registered": "replicas a change adds are registered brokers",
        "partition.elected-leader-live": (
            "a leader a change elects is live: registered, unfenced and not shutting down"
        ),
        "partition.stable-while-deleting": (
            "no partition is added to, or reassigned in, a topic with a pending partition deletion"
        ),
        "partition.mode-by-deletion": (
            "a partition leaves READ_WRITE only when a pending deletion removes it, and its mode "
            "only moves on: READ_WRITE, READ_ONLY, NONE (back from READ_ONLY to READ_WRITE only "
            "in the batch that cancels the deletion)"
        ),
        # partition deletion
        "deletion.one-pending": "a topic has at most one pending partition deletion",
        "deletion.count-valid": (
            "a deletion keeps at least 1 partition and fewer than the topic has"
        ),
        "deletion.times-valid": "a deletion's purge time is not before its creation time",
        "deletion.no-reassignment": "no partition of the topic is being reassigned",
        "deletion.purge-matches": (
            "a purge completes the topic's pending deletion (the same partition count)"
        ),
        "deletion.purged-mode-none": "every partition a purge removes is in mode NONE",
        "deletion.cancel-matches": (
            "a cancel names the topic's pending deletion (the same partition count)"
        ),
        "deletion.cancel-read-write": (
            "a cancel follows the changes that make every partition it keeps READ_WRITE again"
        ),
        # configs
        "config.resource-valid": "a config belongs to a TOPIC, NAMESPACE or BROKER resource",
        "config.resource-exists": (
            "a topic or namespace config names a live one; a broker config names the cluster "
            'default "" or a broker id'
        ),
        # ACLs
        "acl.id-unique": "an ACL id is created once (an ACL is changed by removing it)",
        "acl.exists": "an ACL removal names a live ACL",
        "acl.resource-type": "an ACL's resource type is a concrete one (not UNKNOWN or ANY)",
        "acl.resource-name": "an ACL's resource name is not empty",
        "acl.pattern": "an ACL's pattern is LITERAL or PREFIXED",
        "acl.cluster-resource": "a CLUSTER ACL's resource name is 'kafka-cluster'",
        "acl.operation": "an ACL's operation is a concrete one (not UNKNOWN or ANY)",
        "acl.permission": "an ACL's permission is ALLOW or DENY",
        "acl.principal": "an ACL's principal is 'Type:name' (e.g. 'User:alice', 'User:*')",
        "acl.host": "an ACL's host is not empty ('*' for any host)",
        "acl.no-control-characters": (
            "an ACL's resource name, principal and host hold no control characters"
        ),
        # SCRAM credentials
        "scram.name": "a credential's user name is not empty and holds no control characters",
        "scram.mechanism": "a credential's mechanism is SCRAM-SHA-256 or SCRAM-SHA-512",
        "scram.iterations": (
            f"a credential's iteration count is {MIN_ITERATIONS}..{MAX_ITERATIONS}"
        ),
        "scram.salt": "a credential's salt is not empty",
        "scram.key-size": (
            "a credential's stored key and server key are the size of the mechanism's hash "
            "(32 bytes for SHA-256, 64 for SHA-512)"
        ),
        "scram.exists": "a credential removal names a credential the user has",
    }
)
"""Every rule replay enforces, by name (`ReplayError.rule`), with what it requires."""

MAX_NAME_LENGTH = 249
"""Longest topic name and longest namespace name (Kafka's topic name limit)."""

NO_TIER_NAMES = (".", "..")
"""Names a topic or a namespace tier cannot have: they would be path components."""

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_NAMESPACE_TIER = re.compile(r"[a-zA-Z0-9.-]+")

topic_name_chars = _TOPIC_NAME.fullmatch
"""Whether a name has only the characters of a topic name (replay checks the length and the
names "." and ".." beside it, and asks `topic_name_problem` why only when one fails)."""

namespace_tier_chars = _NAMESPACE_TIER.fullmatch
"""Whether a namespace tier has only the characters a tier may have."""


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a legal topic name (Kafka's `Topic.validate`), or None if it is."""
    if not name:
        return "a topic name cannot be empty"
    if name in NO_TIER_NAMES:
        return f'a topic cannot be named "{name}"'
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name {name[:40]!r}... is longer than {MAX_NAME_LENGTH} characters"
    if not _TOPIC_NAME.fullmatch(name):
        return (
            f"topic name {name!r} has a character other than ASCII letters, digits, '.', '_' "
            "and '-'"
        )
    return None


def namespace_name_problem(name: str) -> str | None:
    """Why `name` is not a legal (non-default) namespace name, or None if it is."""
    if len(name) > MAX_NAME_LENGTH:
        return f"namespace name {name[:40]!r}... is longer than {MAX_NAME_LENGTH} characters"
    for tier in name.split(NAMESPACE_SEPARATOR):
        if not tier:
            return f"namespace {name!r} has an empty tier"
        if tier in NO_TIER_NAMES:
            return f'namespace {name!r} has a tier "{tier}"'
        if not _NAMESPACE_TIER.fullmatch(tier):
            return (
                f"namespace {name!r} has a tier with a character other than ASCII letters, "
                "digits, '.' and '-'"
            )
    return None


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

has_control_character = _CONTROL.search
"""Whether a string holds a control character (Unicode Cc) or a line or paragraph separator:
characters that would forge lines or hide text in the CLI's tables and the server's log."""

_STORED_ACL_PATTERNS = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_UNSTORED_RESOURCE_TYPES = frozenset({ResourceType.UNKNOWN, ResourceType.ANY})
_UNSTORED_OPERATIONS = frozenset({AclOperation.UNKNOWN, AclOperation.ANY})
_STORED_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})


def principal_problem(principal: str) -> str | None:
    """Why `principal` is not a principal of the form `Type:name`, or None if it is."""
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return f"principal {principal!r} is not of the form Type:name (e.g. User:alice, User:*)"
    return None


def acl_problem(acl: AccessControlEntryRecord) -> tuple[str, str] | None:
    """The first rule a new ACL breaks and why, as (rule, detail), or None if it is valid.

    The rules of a stored ACL, independent of the image: the controller can refuse a CreateAcls
    entry with the same words replay would use for the record.
    """
    name = acl.resource_name
    for field_name, text in (
        ("resource name", name),
        ("principal", acl.principal),
        ("host", acl.host),
    ):
        if has_control_character(text):
            return (
                "acl.no-control-characters",
                f"the ACL's {field_name} {text!r} holds a control character",
            )
    if acl.resource_type in _UNSTORED_RESOURCE_TYPES:
        return (
            "acl.resource-type",
            f"an ACL cannot be stored with resource type {acl.resource_type.name}; "
            "UNKNOWN and ANY are only for filters",
        )
    if not name:
        return ("acl.resource-name", "an ACL's resource name cannot be empty")
    if acl.pattern_type not in _STORED_ACL_PATTERNS:
        return (
            "acl.pattern",
            f"an ACL cannot be stored with pattern type {acl.pattern_type.name}; "
            "use LITERAL or PREFIXED",
        )
    # As Kafka: a PREFIXED '*' matches names that start with '*' (no topic has one), and a
    # CLUSTER ACL is checked by name only; the controller (replay/controller/acls.py) stores both.
    if acl.resource_type == ResourceType.CLUSTER and name != CLUSTER_RESOURCE_NAME:
        return (
            "acl.cluster-resource",
            f"the only name of the CLUSTER resource is {CLUSTER_RESOURCE_NAME!r}, not {name!r}",
        )
    if acl.operation in _UNSTORED_OPERATIONS:
        return (
            "acl.operation",
            f"an ACL cannot be stored with operation {acl.operation.name}; "
            "UNKNOWN and ANY are only for filters",
        )
    if acl.permission_type not in _STORED_PERMISSIONS:
        return (
            "acl.permission",
            f"an ACL cannot be stored with permission {acl.permission_type.name}; "
            "use ALLOW or DENY",
        )
    problem = principal_problem(acl.principal)
    if problem is not None:
        return ("acl.principal", problem)
    if not acl.host:
        return ("acl.host", "an ACL's host cannot be empty; use '*' for any host")
    return None


def scram_problem(credential: UserScramCredentialRecord) -> tuple[str, str] | None:
    """The first rule a credential breaks and why, as (rule, detail), or None if it is valid.

    The detail never holds the salt or a key, only their sizes.
    """
    name = credential.name
    if not name:
        return ("scram.name", "a SCRAM credential's user name cannot be empty")
    if has_control_character(name):
        return ("scram.name", f"user name {name!r} holds a control character")
    size = KEY_SIZES.get(credential.mechanism)
    if size is None:
        return (
            "scram.mechanism",
            f"user {name!r}: {credential.mechanism.name} is not a SCRAM mechanism; use "
            "SCRAM-SHA-256 or SCRAM-SHA-512",
        )
    mechanism = credential.mechanism.mechanism_name
    if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
        return (
            "scram.iterations",
            f"user {name!r} {mechanism}: {credential.iterations} iterations is outside "
            f"{MIN_ITERATIONS}..{MAX_ITERATIONS}",
        )
    if not credential.salt:
        return ("scram.salt", f"user {name!r} {mechanism}: the salt cannot be empty")
    for key_name, key in (
        ("stored key", credential.stored_key),
        ("server key", credential.server_key),
    ):
        if len(key) != size:
            return (
                "scram.key-size",
                f"user {name!r} {mechanism}: the {key_name} has {len(key)} bytes, not {size}",
            )
    return None
