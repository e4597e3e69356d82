"""`LogView.trim_start`: the core's view after the shell trimmed the log below its snapshot."""

from __future__ import annotations

import pytest

from api.protocol.quorum.messages import SnapshotId
from api.raft.core import LogView
from api.raft.core.errors import RaftError


def view(snapshot_end: int) -> LogView:
    """Entries 0..9: epoch 1 at 0..3, epoch 2 at 4..6, epoch 4 at 7..9, a snapshot below."""
    log = LogView.from_log(end_offset=10, epochs=[(1, 0), (2, 4), (4, 7)])
    epoch = log.epoch_at(snapshot_end - 1)
    log.take_snapshot(SnapshotId(end_offset=snapshot_end, epoch=epoch))
    return log


def test_a_trim_inside_an_epoch_keeps_it_from_the_new_start() -> None:
    log = view(8)
    log.trim_start(5)
    assert (log.start_offset, log.start_epoch) == (5, 2)
    assert log.epochs == [(2, 5), (4, 7)]
    assert log.below_start(fetch_offset=4, last_fetched_epoch=2)
    assert not log.below_start(fetch_offset=5, last_fetched_epoch=2)
    assert log.end_offset_for_epoch(2) == (2, 7)


def test_a_trim_at_an_epoch_boundary_drops_the_older_epochs() -> None:
    log = view(8)
    log.trim_start(7)
    assert (log.start_offset, log.start_epoch) == (7, 2)
    assert log.epochs == [(4, 7)]
    assert log.below_start(fetch_offset=7, last_fetched_epoch=1)
    assert log.end_offset_for_epoch(3) == (2, 7)


def test_a_trim_behind_the_start_changes_nothing() -> None:
    log = view(8)
    log.trim_start(5)
    log.trim_start(3)
    assert log.start_offset == 5 and log.epochs == [(2, 5), (4, 7)]


def test_a_trim_past_the_snapshot_is_refused() -> None:
    log = view(5)
    with pytest.raises(RaftError, match="does not reach it"):
        log.trim_start(6)
    assert log.start_offset == 0
