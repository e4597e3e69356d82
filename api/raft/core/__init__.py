"""The consensus core of the controller quorum (KIP-595 style), sans-IO.

`RaftCore` is a pure object: it is fed messages (`step`), time (`tick`) and proposals
(`propose`) and hands back a `Ready` of what to persist, append, truncate, flush and send. The
shell that owns the log, the `quorum-state` file and the transport does the I/O. See
docs/replication.md.
"""

from __future__ import annotations

from api.protocol.quorum.messages import Entry, EntryKind
from api.raft.core.config import QuorumConfig, parse_voters
from api.raft.core.core import NotLeader, OffsetRange, RaftCore, Ready, ReadyDone, Role
from api.raft.core.errors import QuorumStateError, RaftConfigError
from api.raft.core.log_view import LogView
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import Batch

__all__ = [
    "Batch",
    "Entry",
    "EntryKind",
    "LogView",
    "NotLeader",
    "OffsetRange",
    "QuorumConfig",
    "QuorumState",
    "QuorumStateError",
    "RaftConfigError",
    "RaftCore",
    "Ready",
    "ReadyDone",
    "Role",
    "parse_voters",
]
