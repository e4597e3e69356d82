"""What the core hands the shell (`Ready`), what the shell reports back, proposal answers."""

from __future__ import annotations

from dataclasses import dataclass, field

from api.protocol.quorum.messages import Entry, ErrorCode, Message, SnapshotId
from api.raft.core.quorum_state import QuorumState
from api.raft.core.roles import Role


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """A message to send; a FetchResponse gets its records from the shell's log."""

    destination: int
    message: Message
    read_from: int = 0
    read_until: int = 0
    """For a FetchResponse: fill `records` with entries in [read_from, read_until); for a
    FetchSnapshotResponse: fill `size` and the snapshot's bytes [read_from, read_until)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotInstall:
    """A snapshot fetched whole from the leader: make it this node's state and log start.

    `data` is the leader's serialization of the snapshot, whose last 4 bytes (a CRC32 of the
    rest, big-endian) the core checked. Installing stores the snapshot durably, then resets
    the log to start, empty, at `snapshot_id.end_offset` (the entry before it of epoch
    `snapshot_id.epoch`).
    """

    snapshot_id: SnapshotId
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """Work for the shell, to be done in field order."""

    quorum_state: QuorumState | None = None
    """Write this `quorum-state` durably first."""
    install: SnapshotInstall | None = None
    """Then install this snapshot (the log is replaced by it)."""
    truncate_to: int | None = None
    """Then remove every entry at this offset and after."""
    append: tuple[Entry, ...] = ()
    flush: bool = False
    """Then fsync the log (before any message goes out)."""
    messages: tuple[Outgoing, ...] = ()
    high_watermark: int | None = None
    """The new committed offset (entries below it are committed) when it moved."""
    role: Role | None = None
    """The new role when it changed."""

    @property
    def empty(self) -> bool:
        """Whether there is nothing to do."""
        return (
            self.quorum_state is None
            and self.install is None
            and self.truncate_to is None
            and not self.append
            and not self.flush
            and not self.messages
            and self.high_watermark is None
            and self.role is None
        )


NOTHING_READY = Ready()
"""The `Ready` with nothing to do (immutable, so one serves every empty hand-over)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadyDone:
    """What the shell reports after carrying out a `Ready`."""

    flushed_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """A proposal's batch: an opaque body standing for `count` offsets (one block)."""

    payload: bytes
    count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetRange:
    """Where a proposal went: offsets first..last; it is committed once the HW passes last."""

    epoch: int
    first: int
    last: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NotLeader:
    """A proposal refused: this node does not lead; try `leader_id` (-1 if unknown)."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterChangeRefused:
    """A voter change refused by the leader: Kafka's error code and what to do."""

    error_code: ErrorCode
    message: str


@dataclass(slots=True)
class Pending:
    """Work queued by the core until the next `ready()`."""

    quorum_state: QuorumState | None = None
    install: SnapshotInstall | None = None
    truncate_to: int | None = None
    append: list[Entry] = field(default_factory=list)
    flush: bool = False
    messages: list[Outgoing] = field(default_factory=list)
    role_changed: bool = False

    @property
    def empty(self) -> bool:
        """Whether nothing is queued (cheapest checks first: most queues hold messages)."""
        return (
            not self.messages
            and not self.append
            and not self.flush
            and not self.role_changed
            and self.quorum_state is None
            and self.install is None
            and self.truncate_to is None
        )
