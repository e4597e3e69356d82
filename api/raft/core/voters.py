"""The voter set as the log holds it (KIP-853): voters entries, and the set in force at an offset.

A dynamic quorum keeps its voters in the log: an entry of kind `VOTERS` holds the whole new
set (Kafka's VotersRecord), and a node uses the LATEST voters entry of its log, committed or
not (KIP-853, as in Raft's single-server changes): a change counts from the moment it is
appended. A truncation that cuts a voters entry puts the previous set back. Below the first
voters entry the set is the log's `base`: the static `controller.quorum.voters`, the set
formatted into a new quorum, or the set a snapshot holds (a log whose start moved).

The leader changes one voter at a time (`RaftCore.change_voters`), and only once the previous
change is committed, so any two consecutive sets share a majority with each other.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass, field

from api.raft.core.errors import RaftError
from records.fields import INT32_MAX

VOTERS_VERSION = 0
"""The layout of a voters entry's body (and of a snapshot header's `voters`)."""

MAX_VOTERS = 64
"""More voters than any quorum needs: a body naming more is refused as garbage."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Voter:
    """One voter: its node id, the id of its data directory and where it listens."""

    id: int
    directory_id: str = ""
    """The uuid of the voter's data directory ("" where none is known: static voters)."""
    host: str = ""
    port: int = 0

    def to_json(self) -> dict[str, object]:
        """The voter as a JSON object (Kafka's VotersRecord field names)."""
        return {
            "voterId": self.id,
            "voterDirectoryId": self.directory_id,
            "host": self.host,
            "port": self.port,
        }

    @classmethod
    def from_json(cls, data: object) -> Voter:
        """The voter `to_json` wrote; anything else is a `RaftError`."""
        if not isinstance(data, dict):
            raise RaftError("a voter is not a JSON object")
        node_id, directory, host, port = (
            data.get("voterId"),
            data.get("voterDirectoryId", ""),
            data.get("host", ""),
            data.get("port", 0),
        )
        if type(node_id) is not int or not 0 <= node_id <= INT32_MAX:
            raise RaftError(f"a voter's id {node_id!r:.20} is not a node id")
        if not isinstance(directory, str) or not isinstance(host, str) or type(port) is not int:
            raise RaftError(f"voter {node_id}'s directory id, host or port is malformed")
        if not 0 <= port <= 65535 or len(directory) > 64 or len(host) > 253:
            raise RaftError(f"voter {node_id}'s directory id, host or port is out of range")
        return cls(id=node_id, directory_id=directory, host=host, port=port)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterSet:
    """A whole voter set, sorted by id (each id once)."""

    voters: tuple[Voter, ...] = ()

    def __post_init__(self) -> None:
        ids = [voter.id for voter in self.voters]
        if ids != sorted(set(ids)):
            raise RaftError(f"a voter set must name each voter once, in order: {ids[:16]}")
        if len(ids) > MAX_VOTERS:
            raise RaftError(f"a voter set of {len(ids)} voters is over {MAX_VOTERS}")

    @classmethod
    def of(cls, voters: object) -> VoterSet:
        """The set of `voters` (ids or `Voter`s, in any order)."""
        if not isinstance(voters, list | tuple | set | frozenset):
            raise RaftError("voters must be a collection")
        items = [v if isinstance(v, Voter) else Voter(id=int(v)) for v in voters]
        return cls(voters=tuple(sorted(items, key=lambda v: v.id)))

    @property
    def ids(self) -> frozenset[int]:
        """The voters' node ids."""
        return frozenset(voter.id for voter in self.voters)

    def get(self, node_id: int) -> Voter | None:
        """The voter with `node_id`, or None."""
        for voter in self.voters:
            if voter.id == node_id:
                return voter
        return None

    def adding(self, voter: Voter) -> VoterSet:
        """The set with `voter` added (its id not yet in it)."""
        return VoterSet.of([*self.voters, voter])

    def removing(self, node_id: int) -> VoterSet:
        """The set without `node_id`."""
        return VoterSet(voters=tuple(v for v in self.voters if v.id != node_id))

    def to_json(self) -> list[dict[str, object]]:
        """The voters as a JSON list."""
        return [voter.to_json() for voter in self.voters]

    @classmethod
    def from_json(cls, data: object) -> VoterSet:
        """The set `to_json` wrote; anything else is a `RaftError`."""
        if not isinstance(data, list) or len(data) > MAX_VOTERS:
            raise RaftError("a voter set is not a JSON list of at most 64 voters")
        voters = [Voter.from_json(item) for item in data]
        return cls(voters=tuple(sorted(voters, key=lambda v: v.id)))

    def encode(self) -> bytes:
        """The body of a voters entry (`EntryKind.VOTERS`)."""
        return json.dumps(
            {"version": VOTERS_VERSION, "voters": self.to_json()}, separators=(",", ":")
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> VoterSet:
        """The set a voters entry's body holds; a malformed body is a `RaftError`."""
        try:
            data = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RaftError(f"a voters entry is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("version") != VOTERS_VERSION:
            raise RaftError(f"a voters entry is not of version {VOTERS_VERSION}")
        return cls.from_json(data.get("voters"))


def snapshot_voters(data: bytes) -> VoterSet | None:
    """The voter set a snapshot's bytes name in their JSON header line, None if they name none.

    A snapshot's bytes start with one JSON header line (api/raft/snapshot_bytes.py); a
    dynamic quorum's holds `voters`, the set in force at the snapshot's end, which becomes the
    base of the log that starts there.
    """
    line, newline, _rest = data.partition(b"\n")
    if not newline or not line.startswith(b"{"):
        return None
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(header, dict) or "voters" not in header:
        return None
    try:
        return VoterSet.from_json(header["voters"])
    except RaftError:
        return None


@dataclass(slots=True)
class VoterHistory:
    """The voter set in force at each offset of a log: `base`, then each voters entry's set."""

    base: VoterSet
    changes: list[tuple[int, VoterSet]] = field(default_factory=list)
    """(offset of the voters entry, the set it holds), offsets increasing."""
    dynamic: bool = True
    """Whether `base` is a dynamic quorum's (formatted into the log, stored below a moved
    start, a snapshot's); False: a static quorum's `controller.quorum.voters`, which the
    log's first voters entry (a kraft.version upgrade) replaces."""

    @property
    def in_log(self) -> bool:
        """Whether the voters are the log's (KIP-853): a dynamic base, or a voters entry."""
        return self.dynamic or bool(self.changes)

    def in_log_at(self, end_offset: int) -> bool:
        """`in_log` for a log that ends at `end_offset` (a snapshot's header names them)."""
        return self.dynamic or bool(self.changes and self.changes[0][0] < end_offset)

    @property
    def latest(self) -> VoterSet:
        """The set in force now: the last voters entry's, committed or not."""
        return self.changes[-1][1] if self.changes else self.base

    @property
    def latest_offset(self) -> int:
        """The offset of the last voters entry (-1: none in the log)."""
        return self.changes[-1][0] if self.changes else -1

    def at(self, end_offset: int) -> VoterSet:
        """The set in force for a log that ends at `end_offset` (entries below it)."""
        index = bisect_right([offset for offset, _ in self.changes], end_offset - 1)
        return self.changes[index - 1][1] if index else self.base

    def append(self, offset: int, voters: VoterSet) -> None:
        """A voters entry at `offset` (after every other one)."""
        if self.changes and offset <= self.changes[-1][0]:
            raise RaftError(f"a voters entry at {offset} after one at {self.changes[-1][0]}")
        self.changes.append((offset, voters))

    def truncate(self, offset: int) -> None:
        """The log was cut at `offset`: voters entries there and after are gone."""
        while self.changes and self.changes[-1][0] >= offset:
            self.changes.pop()

    def reset(self, base: VoterSet) -> None:
        """The log was replaced by a snapshot whose set is `base` (its header's: dynamic)."""
        self.base = base
        self.changes = []
        self.dynamic = True
