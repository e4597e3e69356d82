"""The shell's blocks: fetch answers from the blocks kept in memory are the log's own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from api.protocol.quorum.messages import Entry
from api.raft import blocks as blocks_module
from api.raft.blocks import ReplicaBlocks
from metadata_log.errors import ReplicaBlockError
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from tests.support.replica_logs import T0, block_of, opened


def _entry(block: ReplicaBlock) -> Entry:
    return Entry(
        offset=block.first_offset, epoch=block.epoch, count=block.count, payload=block.encode()
    )


def _proposed(shell: ReplicaBlocks, log: ReplicaLog, first: int, count: int, epoch: int) -> Entry:
    """A block made and kept as a leader's proposal is, and its entry."""
    block = block_of(log, first, count, epoch)
    shell.keep(block)
    return _entry(block)


def test_fetch_answers_from_memory_are_what_the_log_reads(tmp_path: Path) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        shell.write([_proposed(shell, log, 0, 3, 1), _proposed(shell, log, 3, 1, 1)])
        # A peer's block (as a follower takes it): decoded and checked on write.
        shell.write([_entry(block_of(log, 4, 2, 2))])
        for start, until in [(0, 6), (3, 6), (4, 6), (0, 4), (0, 5), (3, 4)]:
            assert shell.recent(start, until) == shell.read(start, until)
        assert shell.recent(1, 6) is None  # inside a block: not one of the kept blocks
        assert shell.recent(6, 7) is None  # the log's end


def test_a_cut_and_a_snapshot_drop_what_the_log_no_longer_holds(tmp_path: Path) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        shell.write([_proposed(shell, log, o, 2, 1) for o in (0, 2, 4)])
        log.truncate_to(2)
        shell.truncated(2)
        assert shell.recent(2, 6) is None
        assert shell.recent(0, 6) == shell.read(0, 6)
        # The cut log goes on in a new epoch: its new tail is kept.
        shell.write([_proposed(shell, log, 2, 3, 2)])
        assert shell.recent(0, 5) == shell.read(0, 5)
        shell.reset(last_timestamp=T0)
        assert shell.recent(0, 5) is None


def test_only_the_newest_blocks_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        entries = [_proposed(shell, log, o, 1, 1) for o in range(4)]
        monkeypatch.setattr(blocks_module, "RECENT_BYTES", 2 * len(entries[0].payload))
        shell.write(entries)
        assert shell.recent(0, 4) is None  # forgotten: the shell reads those from the log
        assert shell.recent(2, 4) == shell.read(2, 4)
        # An answer carries whole blocks up to FETCH_MAX_BYTES of bodies, at least one.
        monkeypatch.setattr(blocks_module, "FETCH_MAX_BYTES", 1)
        assert shell.recent(2, 4) == shell.read(2, 4) == (entries[2],)


def test_peers_records_are_kept_for_the_replay_as_the_log_reads_them(tmp_path: Path) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        shell.write([_entry(block_of(log, 0, 3, 1)), _entry(block_of(log, 3, 2, 1))])
        shell.write([_entry(block_of(log, 5, 4, 2))])
        assert shell.take_records(0, 4) == list(log.read_records(lte=4))
        # Taken once: what was replayed is forgotten, what comes after is kept.
        assert shell.take_records(0, 4) is None
        assert shell.take_records(5, 8) == list(log.read_records(gt=4, lte=8))


def test_the_replay_reads_the_log_where_a_kept_block_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        # This node's own block between two of a peer's: not kept (it was never decoded).
        shell.write([_entry(block_of(log, 0, 2, 1))])
        shell.write([_proposed(shell, log, 2, 2, 1)])
        shell.write([_entry(block_of(log, 4, 2, 1))])
        assert shell.take_records(0, 5) is None
        assert shell.take_records(4, 5) is None  # forgotten up to 5 by the call before
        # Not up to a block's end (a commit never stops inside one): the log decides.
        shell.write([_entry(block_of(log, 6, 3, 1))])
        assert shell.take_records(6, 7) is None
        # A cut drops the kept blocks it removes; the new epoch's are kept.
        shell.write([_entry(block_of(log, 9, 2, 1)), _entry(block_of(log, 11, 2, 1))])
        log.truncate_to(11)
        shell.truncated(11)
        shell.write([_entry(block_of(log, 11, 1, 2, tag="new"))])
        assert shell.take_records(9, 11) == list(log.read_records(gt=8, lte=11))
        # Beyond the bound the oldest are dropped: those the replay reads from the log.
        monkeypatch.setattr(blocks_module, "RECORDS_KEPT_BLOCKS", 2)
        shell.write([_entry(block_of(log, o, 1, 2)) for o in (12, 13, 14)])
        assert shell.take_records(12, 14) is None
        shell.write([_entry(block_of(log, 15, 1, 2))])
        shell.reset(last_timestamp=T0)
        assert shell.take_records(15, 15) is None


def test_a_peers_damaged_block_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        good = block_of(log, 0, 2, 1)
        bad = block_of(log, 2, 2, 1)
        damaged = ReplicaBlock(
            first_offset=bad.first_offset,
            count=bad.count,
            epoch=bad.epoch,
            timestamp=bad.timestamp,
            body=bad.body,
            crc32=bad.crc32 ^ 1,
        )
        with pytest.raises(ReplicaBlockError, match="CRC32"):
            shell.write([_entry(good), _entry(damaged)])
        assert log.end_offset == 0
        assert shell.take_records(0, 1) is None


def test_an_answer_over_thousands_of_tiny_blocks_is_bounded_by_count(tmp_path: Path) -> None:
    """A log of one-entry blocks (one topic per request): an answer carries a bounded count.

    1 MiB of such blocks is ~12,000 of them, more work than a follower does within the request
    timeout; the count bound keeps each answer's work small whatever the log's shape.
    """
    total = blocks_module.FETCH_MAX_BLOCKS * 3
    with opened(tmp_path) as log:
        shell = ReplicaBlocks(log, last_timestamp=T0)
        shell.write([_proposed(shell, log, offset, 1, 1) for offset in range(total)])
        from_log = shell.read(0, total)
        assert len(from_log) == blocks_module.FETCH_MAX_BLOCKS
        assert sum(len(e.payload) for e in from_log) < blocks_module.FETCH_MAX_BYTES
        assert shell.recent(0, total) == from_log
        # The next answer goes on from where this one ended.
        after = from_log[-1].offset + 1
        assert shell.read(after, total)[0].offset == after


def test_a_static_node_recognises_the_upgrade_and_the_voters_blocks_after_it(
    tmp_path: Path,
) -> None:
    """One fetch answer may carry the kraft.version upgrade's block and a change after it."""
    from api.protocol.quorum.messages import (
        EntryKind,
        ErrorCode,
        FetchResponse,
        LeaderIdAndEpoch,
    )
    from api.raft.core.voters import Voter, VoterSet
    from api.raft.voter_blocks import bootstrap_records, voters_record

    static = VoterSet.of([Voter(id=i, host="h", port=9000 + i) for i in (1, 2, 3)])
    grown = static.adding(Voter(id=4, host="h", port=9004))
    with opened(tmp_path) as log:
        upgrade = log.encode_block(
            [(bootstrap_records(static), "p")], first_offset=1, epoch=1, timestamp=T0
        )
        added = log.encode_block(
            [((voters_record(grown),), "p")], first_offset=4, epoch=1, timestamp=T0
        )
        answer = FetchResponse(
            correlation_id=1,
            error_code=ErrorCode.NONE,
            high_watermark=5,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=1),
            records=tuple(_entry(b) for b in (block_of(log, 0, 1, 1), upgrade, added)),
        )
        shell = ReplicaBlocks(log, last_timestamp=T0)  # a static quorum's node
        kinds = [(e.kind, e.count) for e in shell.fetched(2, answer).records]
        assert kinds == [(EntryKind.DATA, 1), (EntryKind.VOTERS, 3), (EntryKind.VOTERS, 1)]
        alone = replace(answer, records=answer.records[2:])
        assert shell.fetched(2, alone).records[0].kind is EntryKind.DATA  # still static
