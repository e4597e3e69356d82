"""A dynamic quorum's voter sets (KIP-853) as the log's blocks: VotersRecord and KRaftVersionRecord.

The core's voters entries (`EntryKind.VOTERS`, body `VoterSet.encode()`) are stored as a
block of one `VotersRecord`; the bootstrap voter set that `mlog quorum format --standalone |
--initial-controllers` writes is the log's first block, a `KRaftVersionRecord` (level 1) and
the `VotersRecord` (with the FeatureLevelRecord of kraft.version 1 between them), at offset 0
of epoch 0 with timestamp 0, so every initial controller formatted with the same voters holds
the very same bytes. A node reads its voter sets from its log at start (`history_at_start`);
blocks fetched from the leader are recognised the same way (`block_voters`). Only blocks of at
most three entries are decoded: a voters block is never longer, so a scan of a long log reads
its bytes but decodes almost nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from api.raft.core.config import QuorumConfig
from api.raft.core.errors import RaftError
from api.raft.core.voters import Voter, VoterHistory, VoterSet
from metadata_log.container import replace_file
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from records.codec import RecordCodec
from records.errors import MetadataLogError
from records.model import (
    FeatureLevelRecord,
    KRaftVersionRecord,
    QuorumVoter,
    Record,
    VotersRecord,
)
from replay.features import KRAFT_VERSION

KRAFT_VERSION_DYNAMIC = 1
"""The `kraft.version` at which the voters are in the log (KIP-853)."""

CONTROLLER_LISTENER = "CONTROLLER"
"""The listener name a VotersRecord gives each voter's endpoint."""

_SCAN_BYTES = 1 << 20

_BOOTSTRAP_SHAPE = (KRaftVersionRecord, FeatureLevelRecord, VotersRecord)
"""The longest voters block: the bootstrap block (and a static quorum's upgrade block)."""

UPGRADE_BLOCK_COUNT = len(_BOOTSTRAP_SHAPE)
"""The records of a static quorum's kraft.version upgrade block (`bootstrap_records`)."""


def voters_record(voters: VoterSet) -> VotersRecord:
    """The VotersRecord of a voter set."""
    return VotersRecord(
        voters=tuple(
            QuorumVoter(
                voter_id=v.id,
                voter_directory_id=v.directory_id,
                listener=CONTROLLER_LISTENER,
                host=v.host,
                port=v.port,
            )
            for v in voters.voters
        )
    )


def record_voters(record: VotersRecord) -> VoterSet:
    """The voter set a VotersRecord holds."""
    return VoterSet.of(
        [
            Voter(id=v.voter_id, directory_id=v.voter_directory_id, host=v.host, port=v.port)
            for v in record.voters
        ]
    )


def bootstrap_records(voters: VoterSet) -> tuple[Record, ...]:
    """The records of a dynamic quorum's first block: kraft.version 1, then its voters.

    The KRaftVersionRecord and the VotersRecord are KRaft's control records; the
    FeatureLevelRecord finalizes kraft.version 1 in the image, where `mlog features describe`
    and the leader's gate on voter changes read it.
    """
    return (
        KRaftVersionRecord(kraft_version=KRAFT_VERSION_DYNAMIC),
        FeatureLevelRecord(name=KRAFT_VERSION, feature_level=KRAFT_VERSION_DYNAMIC),
        voters_record(voters),
    )


def voters_block(
    log: ReplicaLog,
    records: Sequence[Record],
    *,
    first: int,
    epoch: int,
    timestamp: int,
    principal: str | None,
) -> ReplicaBlock:
    """The block of a voters entry (or of the bootstrap block) at `first`."""
    return log.encode_block(
        [(tuple(records), principal)], first_offset=first, epoch=epoch, timestamp=timestamp
    )


def write_bootstrap_block(log: ReplicaLog, voters: VoterSet) -> None:
    """Write a new log's first block: kraft.version 1 and the bootstrap voter set.

    At offset 0 of epoch 0 with timestamp 0 and no principal, so every initial controller
    formatted with the same voters holds the very same bytes from offset 0. The log must be
    empty (`ReplicaBlockError` otherwise).
    """
    block = voters_block(
        log, bootstrap_records(voters), first=0, epoch=0, timestamp=0, principal=None
    )
    log.write_blocks([block], check=False)
    log.flush()


VOTERS_BASE_NAME = "quorum-voters"
"""The voter set in force at the log's start, kept beside quorum-state once the start moved."""


def write_voters_base(directory: Path, *, offset: int, voters: VoterSet) -> None:
    """Store the voter set in force at `offset` durably, before the log's start moves there.

    A trim or an installed snapshot removes the VotersRecords below the new start; a node
    restarting reads this file as the set below its log's first VotersRecord. Written before
    the start moves, so a crash between leaves a set at least as new as the log's start needs:
    the set in force is still the log's last VotersRecord, or this one when there is none.
    """
    body = json.dumps({"offset": offset, "voters": voters.to_json()}, separators=(",", ":"))
    replace_file(directory / VOTERS_BASE_NAME, body.encode())


def read_voters_base(directory: Path) -> VoterSet | None:
    """The voter set `write_voters_base` stored (None: none stored); damage is a `RaftError`."""
    path = directory / VOTERS_BASE_NAME
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RaftError(f"{path} is damaged ({exc}); restore it from a backup") from None
    if not isinstance(data, dict):
        raise RaftError(f"{path} is damaged (not a JSON object); restore it from a backup")
    return VoterSet.from_json(data.get("voters"))


def block_records(codec: RecordCodec, block: ReplicaBlock) -> list[Record] | None:
    """The records of a block of at most three entries (None: longer, or not decodable)."""
    if block.count > len(_BOOTSTRAP_SHAPE):
        return None
    try:
        schema = codec.reader_array_schema(codec.entry_schema_json)
        return [entry.record for entry in codec.decode_entries(block.count, block.body, schema)]
    except MetadataLogError:
        return None


def block_voters(codec: RecordCodec, block: ReplicaBlock) -> VoterSet | None:
    """The voter set a block sets (its last record a VotersRecord), None for any other block."""
    records = block_records(codec, block)
    if not records or not isinstance(records[-1], VotersRecord):
        return None
    return record_voters(records[-1])


def voter_history(log: ReplicaLog, base: VoterSet) -> VoterHistory:
    """The voter sets of `log` by offset, below its first voters block `base` (on a worker)."""
    history = VoterHistory(base=base)
    start = log.log_start_offset
    end = log.end_offset
    codec = log.codec
    while start < end:
        blocks = log.replica_blocks(start=start, max_bytes=_SCAN_BYTES)
        if not blocks:
            break
        for block in blocks:
            voters = block_voters(codec, block)
            if voters is not None:
                history.append(block.first_offset, voters)
        start = blocks[-1].end_offset
    return history


def history_at_start(
    log: ReplicaLog, directory: Path, config: QuorumConfig, *, dynamic: bool
) -> VoterHistory:
    """The voter sets a node starts with: `log`'s, over the set in force below its first.

    That set is the one stored in `directory` (`write_voters_base`) once the log's start
    moved (a trim, an installed snapshot), else the config's voters. The history is a
    dynamic quorum's (`VoterHistory.in_log`) when `dynamic` (the node's config names
    bootstrap servers), when a set was stored, or when the log holds a voters block: a
    static quorum upgraded to kraft.version 1, whose log's voters win over the config.
    """
    configured = VoterSet.of(
        [Voter(id=i, host=a.host, port=a.port) for i, a in config.addresses.items()]
        or list(config.voters)
    )
    stored = read_voters_base(directory) if log.log_start_offset > 0 else None
    history = voter_history(log, stored if stored is not None else configured)
    if stored is None and history.changes:
        # Below the first voters block the set is the one it holds: a formatted quorum's
        # is at offset 0, an upgraded one's holds the static voters it replaced.
        history.base = history.changes[0][1]
    history.dynamic = dynamic or stored is not None
    return history
