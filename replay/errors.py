"""Errors of replay: a record that breaks an invariant of the image it is replayed onto."""

from __future__ import annotations

from records.errors import MetadataLogError


class ReplayError(MetadataLogError):
    """A record cannot be replayed onto the image: the log (or a command) is inconsistent.

    The controller validates every command before it appends records, so in a healthy log this
    never happens; it means the log was edited by hand (`mlog log append`) or is damaged.
    """


class DuplicateTopicError(ReplayError):
    """A TopicRecord names a topic (or id) that is already live."""


class UnknownTopicError(ReplayError):
    """A record refers to a topic id that is not live."""


class UnknownPartitionError(ReplayError):
    """A record refers to a partition the topic does not have, or leaves a gap in the ids."""


class InvalidPartitionError(ReplayError):
    """A partition state breaks an invariant (leader outside replicas, ISR not in replicas...)."""


class UnknownBrokerError(ReplayError):
    """A record refers to a broker that is not registered, or to another incarnation of it."""


class NamespaceReplayError(ReplayError):
    """A namespace record breaks the tree (unknown parent, duplicate, delete while in use)."""


class PendingDeletionError(ReplayError):
    """A partition deletion record does not fit the topic's partitions or pending deletion."""
