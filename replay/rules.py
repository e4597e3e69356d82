"""The invariants replay holds the image to: each rule's name and meaning, and the name rules.

Replay refuses a record that would break one of these rules (a `ReplayError` naming the rule),
whatever wrote it. They are the promises of the controller (`api/controller/`): a log it wrote
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

from replay.image import NAMESPACE_SEPARATOR

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
