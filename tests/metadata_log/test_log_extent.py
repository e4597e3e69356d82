"""Does the log have all of itself: segment links and checkpoints, each problem named exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from metadata_log.checkpoint import Checkpoint
from metadata_log.extent import Link, extent_problems, link_problem
from metadata_log.segment import segment_name

D = Path("log")
SYNC_A, SYNC_B = b"a" * 16, b"b" * 16


def link(base: int, end: int, **changes: object) -> Link:
    made = Link(
        path=D / segment_name(base),
        base_offset=base,
        next_offset=end,
        sync=SYNC_B,
        previous_last_offset=None,
        previous_sync=None,
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


PREVIOUS = link(0, 10, sync=SYNC_A)


def test_a_segment_that_follows_has_no_problem() -> None:
    assert link_problem(PREVIOUS, link(10, 20)) is None
    chained = link(10, 20, previous_last_offset=9, previous_sync=SYNC_A)
    assert link_problem(PREVIOUS, chained) is None


def test_a_missing_segment_is_named_with_the_offsets_it_held() -> None:
    one = link_problem(PREVIOUS, link(11, 20))
    assert one is not None
    assert one.segment == D / segment_name(10) and one.position == -1 and one.first_offset == 10
    assert "the segment holding offset 10 is missing" in one.reason
    assert "starts at 11" in one.reason
    several = link_problem(PREVIOUS, link(13, 20))
    assert several is not None and "the segment holding offsets 10..12 is missing" in several.reason


def test_an_overlapping_segment_is_named() -> None:
    problem = link_problem(PREVIOUS, link(8, 20))
    assert problem is not None
    assert (problem.segment, problem.position, problem.first_offset) == (D / segment_name(8), 0, 8)
    assert problem.reason == (
        f"the segment starts at offset 8 but the previous one, {segment_name(0)}, holds entries "
        "up to offset 9"
    )


def test_a_header_naming_another_end_or_sync_is_named() -> None:
    problem = link_problem(PREVIOUS, link(10, 20, previous_last_offset=5))
    assert problem is not None and problem.position == 0 and problem.first_offset == 10
    assert problem.reason == (
        f"its header says the previous segment ends at offset 5, but {segment_name(0)} ends "
        "at offset 9"
    )
    other = link_problem(PREVIOUS, link(10, 20, previous_last_offset=9, previous_sync=SYNC_B))
    assert other is not None and "names another previous segment" in other.reason
    assert (other.position, other.first_offset) == (0, 10)


def test_without_checkpoints_a_log_starts_at_zero() -> None:
    assert extent_problems(D, None, link(0, 5), link(0, 5), chained=False) == []
    (missing,) = extent_problems(D, None, link(0, 5), link(0, 5), chained=True)
    assert missing.segment == D / "checkpoints" and missing.first_offset == 5
    assert "the checkpoint file is missing" in missing.reason
    (late,) = extent_problems(D, None, link(3, 5), link(3, 5), chained=False)
    assert late.segment == D / segment_name(0) and late.position == -1
    assert (late.first_offset, late.repairable) == (0, False)
    assert "the segments before it are missing" in late.reason
    (empty,) = extent_problems(D, None, None, None, chained=True)
    assert empty.first_offset is None


def test_the_checkpoints_bound_the_start_and_the_end() -> None:
    point = Checkpoint(log_start_offset=3, recovery_point=9, newest_segment=5)
    first, newest = link(3, 5), link(5, 9)
    assert extent_problems(D, point, first, newest, chained=True) == []
    (early,) = extent_problems(D, point, link(2, 5), newest, chained=True)
    assert (early.segment, early.position, early.first_offset) == (D / segment_name(2), 0, 2)
    assert "before the log start offset 3 of the checkpoints" in early.reason
    (short,) = extent_problems(D, point, first, link(5, 8), chained=True)
    assert (short.position, short.first_offset) == (-1, 8)
    assert "the log ends before offset 8, but the checkpoints say offsets up to 8" in short.reason
    assert extent_problems(D, point, first, link(5, 8), chained=True, check_end=False) == []
    (lost,) = extent_problems(D, point, first, link(3, 9), chained=True)
    assert lost.segment == D / segment_name(5) and lost.first_offset == 5
    assert "the newest segment is missing" in lost.reason
    (gone,) = extent_problems(D, point, None, None, chained=True)
    assert gone.segment == D / segment_name(3) and gone.first_offset == 3
    assert "every segment is missing, though the checkpoints say offsets up to 8" in gone.reason
    nothing = Checkpoint(log_start_offset=3, recovery_point=3, newest_segment=3)
    assert extent_problems(D, nothing, None, None, chained=True) == []
