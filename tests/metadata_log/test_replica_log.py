"""The quorum mode of the log (`ReplicaLog`) at its edges: bounds, refusals, words, failures.

`tests/metadata_log/test_log_replica.py` sweeps the quorum mode's behaviour (every truncation
point, every crash point, a model); these pin its edges one at a time: int32 epochs at their
bound, epoch 0, a batch of blocks checked as a whole, a closed log, I/O errors while writing,
flushing or fsyncing on open, the flush's checkpoint pacing, and what the refusals and
warnings say.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import metadata_log.active as active_module
import metadata_log.epoch_cache as epoch_cache_module
import metadata_log.replica_log as replica_log_module
import metadata_log.storage as storage_module
from metadata_log import LogError, replica_checks
from metadata_log.checkpoint import read_checkpoint
from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
from metadata_log.errors import LogClosedError, LogFailedError, ReplicaBlockError
from metadata_log.reader import LogReader
from metadata_log.replica_log import ReplicaLog
from tests.support.replica_logs import (
    CONFIG,
    T0,
    block_of,
    build,
    metadata_log_warnings,
    opened,
    record,
)

INT32_MAX = 2**31 - 1


def test_epochs_and_timestamps_at_their_bounds_are_written_and_one_past_refused(
    tmp_path: Path,
) -> None:
    with opened(tmp_path / "log") as log:
        zero = log.encode_block([([record("a", 0)], None)], first_offset=0, epoch=0, timestamp=0)
        assert (zero.epoch, zero.timestamp) == (0, 0)
        assert log.write_blocks([zero], check=True) == 1  # epoch 0 on an empty log
        top = log.encode_block(
            [([record("a", 1)], None)], first_offset=1, epoch=INT32_MAX, timestamp=T0
        )
        for epoch in (INT32_MAX + 1, -1):
            with pytest.raises(LogError, match="int32 epoch"):
                log.encode_block(
                    [([record("a", 1)], None)], first_offset=1, epoch=epoch, timestamp=T0
                )
        with pytest.raises(LogError, match="timestamp >= 0"):
            log.encode_block([([record("a", 1)], None)], first_offset=1, epoch=1, timestamp=-1)
        beyond = dataclasses.replace(top, epoch=INT32_MAX + 1)
        with pytest.raises(ReplicaBlockError, match="fit an int32"):
            log.write_blocks([beyond], check=False)
        assert log.write_blocks([top], check=True) == 2
        assert log.epoch_cache() == [(0, 0), (INT32_MAX, 1)] and log.epoch == INT32_MAX


def test_blocks_written_together_are_checked_against_each_other(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 2, 3)], check=True)
        later_epoch = block_of(log, 2, 1, 5)
        lower_epoch = block_of(log, 3, 1, 4)  # above the log's 3, below the block before it
        with pytest.raises(ReplicaBlockError, match="epochs never go down"):
            log.write_blocks([later_epoch, lower_epoch], check=False)
        first = block_of(log, 2, 1, 3)
        earlier = dataclasses.replace(block_of(log, 3, 1, 3), timestamp=first.timestamp - 1)
        assert earlier.timestamp > T0  # after the log's last entry, before `first`
        with pytest.raises(ReplicaBlockError, match="timestamps never go down"):
            log.write_blocks([first, earlier], check=False)
        assert log.end_offset == 2


def test_a_block_of_no_entries_or_no_body_is_refused_even_when_trusted(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        good = block_of(log, 0, 2, 1)
        for bad in (dataclasses.replace(good, count=0), dataclasses.replace(good, body=b"")):
            with pytest.raises(ReplicaBlockError, match="claims"):
                log.write_blocks([bad], check=False)
        with pytest.raises(ReplicaBlockError, match="str is not a ReplicaBlock"):
            log.write_blocks(["a block"], check=False)  # type: ignore[list-item] # garbage in
        assert log.end_offset == 0


def test_the_refusals_say_where_the_log_ends_and_what_the_block_holds(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 4, 3)], check=True)
        with pytest.raises(ReplicaBlockError, match="leaves a gap after the log"):
            log.write_blocks([block_of(log, 5, 1, 3)], check=False)
        with pytest.raises(ReplicaBlockError, match="overlaps the log"):
            log.write_blocks([block_of(log, 3, 1, 3)], check=False)
        moved = dataclasses.replace(block_of(log, 6, 2, 3), first_offset=4)
        with pytest.raises(ReplicaBlockError, match=r"its 2 entries hold offsets 6\.\.7"):
            log.write_blocks([moved], check=True)
        with pytest.raises(LogError, match=r"the log holds offsets 0\.\.3"):
            log.replica_blocks(start=5, max_bytes=1)
        with pytest.raises(LogError, match=r"holding offsets 0\.\.3: read from 0 or 4"):
            log.replica_blocks(start=2, max_bytes=1)
        with pytest.raises(LogError, match="max_bytes must be 0 or more, got -1"):
            log.replica_blocks(start=0, max_bytes=-1)


def test_a_closed_log_refuses_every_quorum_operation_and_changes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, [(2, 1), (2, 2)])
    log = ReplicaLog.open(directory, config=CONFIG)
    block = block_of(log, 4, 1, 9)
    log.close()
    cache = (directory / EPOCH_CHECKPOINT_NAME).read_bytes()
    for call in (
        lambda: log.write_blocks([block], check=True),
        lambda: log.truncate_to(1),
        log.flush,
        log.epoch_cache,
        lambda: log.replica_blocks(start=0, max_bytes=1),
    ):
        with pytest.raises(LogClosedError):
            call()
    assert (directory / EPOCH_CHECKPOINT_NAME).read_bytes() == cache
    with opened(directory) as again:
        assert again.end_offset == 4 and again.epoch_cache() == [(1, 0), (2, 2)]


def test_a_quorum_log_has_no_asynchronous_appends(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        assert not hasattr(log, "append_async")  # blocks come through write_blocks only


def test_written_bytes_are_counted(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        blocks = [block_of(log, 0, 2, 1), block_of(log, 2, 3, 1)]
        log.write_blocks(blocks, check=True)
        assert log.record_bytes_appended == sum(len(b.body) for b in blocks)


# --- failures -------------------------------------------------------------------------------


def _failing(*_args: object) -> None:
    raise OSError(5, "Input/output error")


def test_an_epoch_cache_that_cannot_be_written_stops_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 1, 1)], check=True)
        monkeypatch.setattr(epoch_cache_module, "write_epoch_checkpoint", _failing)
        with pytest.raises(LogFailedError, match=EPOCH_CHECKPOINT_NAME):
            log.write_blocks([block_of(log, 1, 1, 2)], check=True)
        monkeypatch.undo()
        with pytest.raises(LogFailedError):
            log.write_blocks([block_of(log, 1, 1, 1)], check=True)


def test_a_write_that_fails_stops_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with opened(tmp_path / "log") as log:
        monkeypatch.setattr(active_module, "write_all", _failing)
        with pytest.raises(LogFailedError, match="writing replicated blocks"):
            log.write_blocks([block_of(log, 0, 1, 1)], check=True)
        monkeypatch.undo()
        with pytest.raises(LogFailedError):
            log.flush()


def test_a_flush_that_fails_stops_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 1, 1)], check=True)
        monkeypatch.setattr(os, "fdatasync", _failing)
        with pytest.raises(LogFailedError, match="flush"):
            log.flush()
        monkeypatch.undo()
        assert log.flushed_offset == 0


def test_a_close_that_cannot_flush_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = ReplicaLog.open(tmp_path / "log", config=CONFIG)
    log.write_blocks([block_of(log, 0, 1, 1)], check=True)
    monkeypatch.setattr(os, "fdatasync", _failing)
    with caplog.at_level(logging.WARNING, logger="metadata_log"):
        log.close()
    assert any("could not flush the log on close" in m for m in metadata_log_warnings(caplog))


def test_an_open_that_cannot_fsync_the_page_cache_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path / "log", [(1, 1)])
    monkeypatch.setattr(os, "fsync", _failing)
    with pytest.raises(LogError, match=r"cannot fsync the log in .*: Input/output error; fix"):
        ReplicaLog.open(tmp_path / "log", config=CONFIG)


def test_a_decoder_out_of_memory_is_not_called_a_bad_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path / "log") as log:
        block = block_of(log, 0, 1, 1)

        def out_of_memory(*_args: object) -> None:
            raise MemoryError

        monkeypatch.setattr(log.codec, "decode_block", out_of_memory)
        with pytest.raises(MemoryError):
            log.write_blocks([block], check=True)


# --- the flush's fdatasync, without the write lock ---------------------------------------------


def _during_fdatasync(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object]) -> None:
    """Run `action` inside the next fdatasync, as another thread would while it runs."""
    real = os.fdatasync
    pending = [action]

    def fdatasync(fd: int) -> None:
        if pending:
            pending.pop()()
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)


def test_blocks_written_while_a_flush_runs_wait_for_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A quorum leader's loop writes while its flush runs on the worker thread: the write
    # does not wait for the fsync, and counts as flushed only once a flush covered it.
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 2, 1)], check=True)
        _during_fdatasync(
            monkeypatch, lambda: log.write_blocks([block_of(log, 2, 3, 1)], check=True)
        )
        assert log.flush() == 2
        assert (log.end_offset, log.flushed_offset) == (5, 2)
        assert log.flush() == 5


def test_a_roll_while_a_flush_runs_leaves_it_nothing_to_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 1, 1)], check=True)
        segments = len(log.segments())

        def fill_a_segment() -> None:
            while len(log.segments()) == segments:
                log.write_blocks([block_of(log, log.end_offset, 1, 1)], check=True)

        _during_fdatasync(monkeypatch, fill_a_segment)
        # The roll synced the sealed segment (what the flush covered and more); the blocks
        # after it wait for the next flush.
        flushed = log.flush()
        assert 1 <= flushed < log.end_offset
        assert log.flush() == log.end_offset


def test_a_cut_while_a_flush_runs_is_not_undone_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 1, 1), block_of(log, 1, 4, 1)], check=True)
        _during_fdatasync(monkeypatch, lambda: log.truncate_to(1))
        assert log.flush() <= 1
        log.write_blocks([block_of(log, 1, 6, 2)], check=True)
        assert log.flushed_offset <= 1  # offsets 1..6 of epoch 2 were never flushed
        assert log.flush() == 7


# --- the flush's checkpoint -----------------------------------------------------------------


def test_a_flush_writes_the_checkpoint_once_its_interval_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    config = dataclasses.replace(CONFIG, checkpoint_interval_ms=1000)
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    with ReplicaLog.open(directory, config=config) as log:
        log.storage.checkpointed_at = 1000.0
        log.write_blocks([block_of(log, 0, 2, 1)], check=True)
        now[0] = 1000.9995  # the interval is 1 s (1000 ms), not a hair under
        assert log.flush() == 2
        checkpoint = read_checkpoint(directory)
        assert checkpoint is None or checkpoint.recovery_point < 2  # not yet
        log.write_blocks([block_of(log, 2, 1, 1)], check=True)
        now[0] = 1001.0
        log.flush()
        checkpoint = read_checkpoint(directory)
        assert checkpoint is not None and checkpoint.recovery_point == 3
        log.write_blocks([block_of(log, 3, 1, 1)], check=True)
        now[0] = 1003.0
        monkeypatch.setattr(storage_module, "write_checkpoint", _failing)
        with caplog.at_level(logging.WARNING, logger="metadata_log"):
            assert log.flush() == 4  # the blocks are durable all the same
        assert any("could not write the log checkpoints" in m for m in caplog.messages)
        assert log.storage.checkpointed_at == 1003.0  # retried after the interval, not every flush


# --- truncation -----------------------------------------------------------------------------


def test_a_truncation_says_what_it_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path / "log", [(4, 1), (4, 2)])
    with opened(tmp_path / "log") as log, caplog.at_level(logging.INFO, logger="metadata_log"):
        assert log.truncate_to(5) == 3
    assert any("removed 3 entries (offsets 5..7)" in m for m in caplog.messages)


def test_a_truncation_of_a_trimmed_log_keeps_its_start(tmp_path: Path) -> None:
    """The checkpoint a cut writes first keeps the log start a trim moved past 0."""
    directory = tmp_path / "log"
    build(directory)
    with opened(directory) as log:
        start = log.segments()[1].base_offset
        assert start > 0
        log.trim_before(start)
        end = log.end_offset
        kept = list(log.read())[: end - start - 3]
        assert log.truncate_to(end - 3) == 3
        checkpoint = read_checkpoint(directory)
        assert checkpoint is not None and checkpoint.log_start_offset == start
        assert log.log_start_offset == start
    with opened(directory) as log:
        assert (log.log_start_offset, log.end_offset) == (start, end - 3)
        assert list(log.read()) == kept


def test_a_cut_inside_a_block_leaves_no_stale_index_and_no_descriptor(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, [(6, 1)] * 40)
    with opened(directory) as log:
        first = log.segments()[0]
        assert len(log.segments()) > 2
        assert first.path.with_suffix(".index").exists()
        fds = len(os.listdir("/proc/self/fd"))
        log.truncate_to(first.base_offset + 9)  # inside the second block of the first segment
        assert len(os.listdir("/proc/self/fd")) == fds
        assert not first.path.with_suffix(".index").exists()
        assert not first.path.with_suffix(".timeindex").exists()
        assert log.end_offset == 9 and [e.offset for e in log.read()] == list(range(9))
    with opened(directory) as log:
        assert log.end_offset == 9 and log.epoch_cache() == [(1, 0)]


# --- the epoch cache's checks on open -------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"0\n1\n1 0\n", None),  # right: no warning
        (b"\x00garbage", "is damaged"),
        (b"0\n0\n", "is empty but the log holds offsets 0..5"),
        (b"0\n2\n1 0\n2 6\n", "names epoch 2 from offset 6, at or past the log's end (6)"),
        (b"0\n2\n1 0\n2 5\n", "ends with epoch 2, but the log's last block has epoch 1"),
        (b"0\n2\n0 0\n1 2\n", "says epoch 1 starts at offset 2, which the log contradicts"),
        (b"0\n2\n0 0\n1 3\n", "says epoch 1 starts at offset 3, but it starts earlier"),
    ],
)
def test_each_problem_of_the_epoch_cache_is_named_in_its_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, says: str | None
) -> None:
    directory = tmp_path / "log"
    build(directory, [(3, 1), (3, 1)])
    (directory / EPOCH_CHECKPOINT_NAME).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
        assert log.epoch_cache() == [(1, 0)]
    warnings = metadata_log_warnings(caplog)
    if says is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and says in warnings[0], warnings


def test_an_epoch_cache_of_an_empty_log_naming_epochs_is_named_in_its_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    with opened(directory):
        pass
    (directory / EPOCH_CHECKPOINT_NAME).write_bytes(b"0\n4\n1 0\n2 1\n3 2\n4 3\n")
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
        assert log.epoch_cache() == []
    [warning] = metadata_log_warnings(caplog)
    assert "names epochs [(2, 1), (3, 2), (4, 3)] but the log is empty" in warning


def test_an_epoch_cache_that_cannot_be_read_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory, [(3, 1)])
    path = directory / EPOCH_CHECKPOINT_NAME
    path.unlink()
    path.mkdir()  # reading it is an OSError
    with caplog.at_level(logging.WARNING, logger="metadata_log"):
        log = LogReader.open(directory, config=CONFIG)
        try:
            assert log.epoch_cache() == [(1, 0)]
        finally:
            log.close()
    [warning] = metadata_log_warnings(caplog)
    assert "cannot be read" in warning


def test_the_body_bound_of_a_block_is_inclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(tmp_path / "log") as log:
        block = block_of(log, 0, 1, 1)
        monkeypatch.setattr(replica_checks, "MAX_BLOCK_BODY", len(block.body) - 1)
        with pytest.raises(ReplicaBlockError, match="claims 1 entries"):
            log.write_blocks([block], check=True)
        monkeypatch.setattr(replica_checks, "MAX_BLOCK_BODY", len(block.body))
        assert log.write_blocks([block], check=True) == 1


def test_a_rewrite_that_fails_leaves_no_temporary_file_and_no_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "log"
    build(directory, [(6, 1)] * 4)
    with opened(directory) as log:
        fds = len(os.listdir("/proc/self/fd"))
        monkeypatch.setattr(replica_log_module, "write_all", _failing)
        with pytest.raises(LogFailedError, match=r"truncation failed: .*Input/output error"):
            log.truncate_to(9)  # inside the second block: its segment is rewritten
        monkeypatch.undo()
        assert len(os.listdir("/proc/self/fd")) == fds - 1  # the log's own, closed for the cut
        assert not list(directory.glob("*.tmp"))
