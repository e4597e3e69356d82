"""The boundaries of a point in time: offsets, times, the first entry and the empty image.

`replay/timetravel/points.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from replay.image import EMPTY_IMAGE
from replay.timetravel import (
    TimeTravelError,
    parse_time,
    resolve_offset,
    travel,
)
from tests.support.timetravel_logs import (
    START,
    known_log,
)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


def test_points_in_time_at_each_boundary(log: MetadataLog) -> None:
    # Batch 0 (offsets 0-2) at START, batch 1 (3-5) at START + 1000, ...
    with pytest.raises(TimeTravelError, match="before the log's first entry"):
        resolve_offset(log, at_time=START - 1)  # an empty image would be a state never shown
    assert resolve_offset(log, at_time=START) == 2
    assert resolve_offset(log, at_time=START + 999) == 2
    assert resolve_offset(log, at_time=START + 1000) == 5
    assert resolve_offset(log, at_time=START + 10**9) == 23
    assert resolve_offset(log) == 23
    assert resolve_offset(log, at_offset=-1) == -1
    with pytest.raises(TimeTravelError, match=r"^offset -2 is not an offset \(must be >= -1\)$"):
        resolve_offset(log, at_offset=-2)


def test_the_first_entry_is_an_image_and_minus_one_the_empty_one(log: MetadataLog) -> None:
    first = travel(log, None, at_offset=0)
    assert first.image.provenance.offset == 0 and first.replayed == 1
    assert first.replay_seconds >= 0  # reported; its size is a bench's to judge
    assert dict(first.image.features.levels) == {"metadata.version": 1}
    empty = travel(log, None, at_offset=-1)
    assert empty.image is EMPTY_IMAGE and empty.replayed == 0
    assert (empty.load_seconds, empty.replay_seconds) == (0, 0)


def test_a_naive_time_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    finally:
        monkeypatch.undo()
        time.tzset()
