"""The `quorum-state` file: the core's `QuorumState`, written atomically, read back checked.

The core decides what to persist and when; this module only stores and loads it, on the
shell's side of the core (the core does no I/O). The JSON layout is Kafka's QuorumStateData
(version 0). A missing file means the node has no durable election state: it was never
formatted, or its data directory was wiped (`read_quorum_state` gives None, and the core
catches up before it votes).
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

from api.protocol.quorum.bounds import LAST_EPOCH
from api.protocol.quorum.messages import NO_LEADER
from api.raft.core import QuorumState, QuorumStateError
from metadata_log.container import replace_file

QUORUM_STATE_NAME = "quorum-state"
DATA_VERSION = 0
MAX_FILE_BYTES = 1 << 20


def _encode(state: QuorumState) -> bytes:
    return (
        json.dumps(
            {
                "clusterId": "",
                "leaderId": state.leader_id,
                "leaderEpoch": state.leader_epoch,
                "votedId": state.voted_id,
                "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in sorted(state.voters)],
                "data_version": DATA_VERSION,
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )


def write_quorum_state(directory: Path, state: QuorumState) -> None:
    """Store `state` atomically: write a temporary file, fsync it, rename, fsync the directory."""
    path = directory / QUORUM_STATE_NAME
    try:
        replace_file(path, _encode(state))
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        raise QuorumStateError(
            f"cannot write {path}: {exc.strerror or exc} [{name}]; free space or fix the disk "
            "before this controller votes or leads again"
        ) from exc


_ADVICE = (
    "move it aside (the node then catches up from the leader before it votes again) or "
    "restore it from a backup"
)
"""What to do with a damaged `quorum-state`: the node without it is safe, as after a wipe."""


def _int_field(data: dict[str, object], key: str, path: Path) -> int:
    value = data.get(key)
    if type(value) is not int:
        raise QuorumStateError(
            f"{path} is damaged: {key!r} should be an integer, found {value!r:.40}; {_ADVICE}"
        )
    return value


def read_quorum_state(directory: Path, *, voters: frozenset[int] | None) -> QuorumState | None:
    """Load the stored state, or None if there is none; refuse a damaged or foreign file.

    `voters` is the configured voter set: a file written for another set is refused, since its
    vote may have been cast in another quorum. None: a dynamic quorum (KIP-853), whose voters
    are in the log and change, so the file's set is taken as it is.
    """
    path = directory / QUORUM_STATE_NAME
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    advice = _ADVICE
    if len(raw) > MAX_FILE_BYTES:
        raise QuorumStateError(f"{path} is over {MAX_FILE_BYTES} bytes, not a quorum-state file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QuorumStateError(f"{path} is not a quorum-state file ({exc}); {advice}") from None
    if not isinstance(data, dict):
        raise QuorumStateError(f"{path} is not a quorum-state file (not a JSON object); {advice}")
    version = data.get("data_version")
    if version != DATA_VERSION:
        raise QuorumStateError(
            f"{path} has data_version {version!r:.20}, this metadata-log reads {DATA_VERSION}; "
            "upgrade metadata-log or restore the file"
        )
    epoch = _int_field(data, "leaderEpoch", path)
    leader = _int_field(data, "leaderId", path)
    voted = _int_field(data, "votedId", path)
    listed = data.get("currentVoters")
    if not isinstance(listed, list) or not all(
        isinstance(v, dict) and type(v.get("voterId")) is int for v in listed
    ):
        raise QuorumStateError(f"{path} is damaged: 'currentVoters' is malformed; {advice}")
    stored = frozenset(int(v["voterId"]) for v in listed)
    if voters is None:
        voters = stored
    elif stored != voters:
        raise QuorumStateError(
            f"{path} was written for voters {sorted(stored)} but controller.quorum.voters names "
            f"{sorted(voters)}; fix the setting, or remove the data directory of this node"
        )
    if epoch < 0:
        raise QuorumStateError(f"{path} is damaged: leader epoch {epoch} is out of range; {advice}")
    if epoch > LAST_EPOCH:
        raise QuorumStateError(
            f"{path} holds leader epoch {epoch}, past the last one an election can reach "
            f"({LAST_EPOCH}), likely stored from a forged Vote or BeginQuorumEpoch before such "
            "requests were refused; move it aside: the node then catches up from the leader "
            "before it votes again (a sole voter: restore the file from a backup)"
        )
    for key, value in (("leaderId", leader), ("votedId", voted)):
        # In a dynamic quorum a leader or a vote may be of a voter the file's set lacks.
        if value != NO_LEADER and value not in voters and not (value >= 0 and voters is stored):
            raise QuorumStateError(
                f"{path} is damaged: {key} {value} is not a voter ({sorted(voters)}); {advice}"
            )
    return QuorumState(leader_epoch=epoch, leader_id=leader, voted_id=voted, voters=stored)
