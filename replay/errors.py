"""Errors of replay: a record that breaks an invariant of the image it is replayed onto."""

from __future__ import annotations

from records.errors import MetadataLogError
from records.model import Record
from replay.rules import RULES


class TrimmedLogError(MetadataLogError):
    """The entries an image needs lie before the log's start: they were trimmed away.

    `mlog log trim --before-snapshot` removes whole segments below the newest snapshot, so the
    image before the log start exists only in the snapshots.
    """

    def __init__(self, log_start: int, needed: int) -> None:
        super().__init__(
            f"the log starts at offset {log_start} (the entries before it were trimmed with "
            f"`mlog log trim`), but this needs offset {needed} on: the state before offset "
            f"{log_start} is kept only in the snapshots. `mlog snapshot list` shows them; "
            "`mlog image show --at-offset N` works from a snapshot's offset N on. If the "
            "snapshot database was lost or damaged, restore it from a backup"
        )
        self.log_start = log_start
        self.needed = needed


class ReplayError(MetadataLogError):
    """A record cannot be replayed onto the image: the log (or a command) is inconsistent.

    `rule` names the invariant broken (a key of `replay.rules.RULES`) and `detail` says how.
    Replay itself does not know offsets: whoever reads the records (the loader, a checked
    append) calls `locate` with the offset, and the message then names offset, record and rule.
    The controller validates every command before it appends records, so in a healthy log this
    never happens; it means the log was edited by hand (`mlog log append`) or is damaged.
    """

    def __init__(self, rule: str, detail: str, *, record: Record | None = None) -> None:
        if rule not in RULES:
            # A programming error in replay, not bad input: every rule is listed and documented.
            raise ValueError(f"replay rule {rule!r} is not in replay.rules.RULES")
        super().__init__(detail)
        self.rule = rule
        self.detail = detail
        self.record = record
        """The record that breaks the rule (set by replay for batch rules, else by `locate`)."""
        self.offset: int | None = None
        self.hint: str | None = None

    def locate(self, offset: int, record: Record, hint: str | None = None) -> None:
        """Say where the record that broke the rule is, and what to do about it."""
        self.offset = offset
        self.record = record
        self.hint = hint

    def __str__(self) -> str:
        if self.offset is None:
            return f"{self.detail} (rule {self.rule})"
        kind = type(self.record).__name__
        text = f"the {kind} at offset {self.offset} breaks rule {self.rule}: {self.detail}"
        return text if self.hint is None else f"{text}; {self.hint}"


class FeatureReplayError(ReplayError):
    """A FeatureLevelRecord sets an impossible level."""


class InvalidBrokerError(ReplayError):
    """A broker registration, or a change of one, is impossible (bad id, epoch, rack, port)."""


class UnknownBrokerError(ReplayError):
    """A record refers to a broker that is not registered, or to another incarnation of it."""


class DuplicateTopicError(ReplayError):
    """A TopicRecord names a topic (or id) that is already live."""


class InvalidTopicError(ReplayError):
    """A topic has an illegal name, or no partitions at the end of a batch."""


class UnknownTopicError(ReplayError):
    """A record refers to a topic id that is not live."""


class UnknownPartitionError(ReplayError):
    """A record refers to a partition the topic does not have, or leaves a gap in the ids."""


class InvalidPartitionError(ReplayError):
    """A partition state or change breaks an invariant (leader outside the ISR, epochs...)."""


class NamespaceReplayError(ReplayError):
    """A namespace record breaks the tree (bad name, unknown parent, delete while in use)."""


class PendingDeletionError(ReplayError):
    """A partition deletion record does not fit the topic's partitions or pending deletion."""


class ConfigReplayError(ReplayError):
    """A ConfigRecord names a resource that does not exist or cannot have configs."""


class AclReplayError(ReplayError):
    """An ACL record that breaks the rules of ACLs (unknown id, id in use, bad field)."""


class ScramReplayError(ReplayError):
    """A SCRAM credential record that breaks the rules of credentials."""
