"""The consensus core of the controller quorum (KIP-595 style), sans-IO.

`RaftCore` is a pure object: it is fed messages (`step`), time (`tick`) and proposals
(`propose`) and hands back a `Ready` of what to persist, append, truncate, flush and send. The
shell that owns the log, the `quorum-state` file and the transport does the I/O. See
docs/replication.md.

The names below are the core's whole surface: the facade (`RaftCore`) and the values that
cross it. The machine behind the facade and the rules that drive it (machine.py,
handlers.py, ...) are internal: nothing outside this package imports them
(`tests/api/raft/test_raft_boundaries.py`).
"""

from __future__ import annotations

from api.protocol.quorum.messages import Entry, EntryKind
from api.raft.core.config import QuorumConfig, VoterAddress, parse_voters
from api.raft.core.core import RaftCore
from api.raft.core.errors import QuorumStateError, RaftConfigError, RaftError
from api.raft.core.log_view import LogView
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import (
    Batch,
    NotLeader,
    OffsetRange,
    Outgoing,
    Ready,
    ReadyDone,
    SnapshotInstall,
    VoterChangeRefused,
)
from api.raft.core.roles import Role
from api.raft.core.states import NEVER
from api.raft.core.transfer import snapshot_checksum_ok, with_checksum
from api.raft.core.voters import Voter, VoterHistory, VoterSet

__all__ = [
    "NEVER",
    "Batch",
    "Entry",
    "EntryKind",
    "LogView",
    "NotLeader",
    "OffsetRange",
    "Outgoing",
    "QuorumConfig",
    "QuorumState",
    "QuorumStateError",
    "RaftConfigError",
    "RaftCore",
    "RaftError",
    "Ready",
    "ReadyDone",
    "Role",
    "SnapshotInstall",
    "Voter",
    "VoterAddress",
    "VoterChangeRefused",
    "VoterHistory",
    "VoterSet",
    "parse_voters",
    "snapshot_checksum_ok",
    "with_checksum",
]
