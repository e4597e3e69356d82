"""`LogView` of a log whose start moved: its checks and answers at the edge (offset 1 too).

`tests/api/raft/test_raft_snapshot_fetch.py` uses views that start at 8 and 10; a start at 1 tells a
`> 0` from a `> 1`: the snapshot a start needs, the fetch a view at 1 sends, the epochs and
snapshots it refuses, what an install and an empty view hold.
"""

from __future__ import annotations

import pytest

from api.protocol.quorum.messages import SnapshotId
from api.raft.core import LogView
from api.raft.core.errors import RaftError


def test_a_start_at_1_needs_a_snapshot_reaching_it() -> None:
    with pytest.raises(RaftError, match="starts at offset 1 but no snapshot reaches it"):
        LogView.from_log(end_offset=3, epochs=[(1, 1)], start_offset=1, start_epoch=1)
    with pytest.raises(RaftError, match="no snapshot reaches it"):
        LogView.from_log(
            end_offset=3,
            epochs=[(1, 1)],
            start_offset=1,
            start_epoch=1,
            snapshot=SnapshotId(end_offset=0, epoch=0),
        )


def at_1() -> LogView:
    return LogView.from_log(
        end_offset=3,
        epochs=[(2, 1)],
        start_offset=1,
        start_epoch=1,
        snapshot=SnapshotId(end_offset=1, epoch=1),
    )


def test_a_view_starting_at_1_sends_a_fetch_at_0_to_its_snapshot() -> None:
    view = at_1()
    assert view.below_start(fetch_offset=0, last_fetched_epoch=0)
    assert view.below_start(fetch_offset=1, last_fetched_epoch=0)
    assert not view.below_start(fetch_offset=1, last_fetched_epoch=1)
    assert view.end_offset_for_epoch(1) == (1, 1)  # the entry before the start ends epoch 1
    assert view.end_offset_for_epoch(0) == (0, 0)
    assert view.end_offset_for_epoch(2) == (2, 3)


def test_epochs_after_the_start_must_not_be_older_than_the_start_epoch() -> None:
    with pytest.raises(RaftError, match="is not increasing"):
        LogView.from_log(
            end_offset=12,
            epochs=[(2, 8)],
            start_offset=8,
            start_epoch=3,
            snapshot=SnapshotId(end_offset=8, epoch=3),
        )
    view = LogView.from_log(
        end_offset=12,
        epochs=[(3, 8)],
        start_offset=8,
        start_epoch=3,
        snapshot=SnapshotId(end_offset=8, epoch=3),
    )
    assert view.last_epoch == 3


def test_a_snapshot_must_lie_within_the_log_and_past_offset_0() -> None:
    view = LogView.from_log(end_offset=5, epochs=[(1, 0)])
    for end in (0, 6):
        with pytest.raises(RaftError, match="is outside the log"):
            view.take_snapshot(SnapshotId(end_offset=end, epoch=1 if end else 0))
    assert view.snapshot is None
    view.take_snapshot(SnapshotId(end_offset=5, epoch=1))
    view.take_snapshot(SnapshotId(end_offset=3, epoch=1))  # older: the newest stays
    assert view.snapshot == SnapshotId(end_offset=5, epoch=1)


def test_an_install_makes_the_snapshot_the_newest_even_if_one_was_newer() -> None:
    view = at_1()
    view.take_snapshot(SnapshotId(end_offset=3, epoch=2))
    installed = SnapshotId(end_offset=2, epoch=2)
    view.install(installed)
    assert view.snapshot == installed
    assert (view.start_offset, view.end_offset, view.start_epoch, view.epochs) == (2, 2, 2, [])


def test_an_empty_view_starts_at_0_with_no_epoch_and_no_snapshot() -> None:
    view = LogView()
    assert (view.start_offset, view.start_epoch, view.snapshot, view.last_epoch) == (0, 0, None, 0)
    assert view.end_offset_for_epoch(0) == (0, 0)
