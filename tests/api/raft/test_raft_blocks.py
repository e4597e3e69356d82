"""The shell's blocks: fetch answers from the blocks kept in memory are the log's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.raft import blocks as blocks_module
from api.raft.blocks import ReplicaBlocks
from api.raft.core.messages import Entry
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
