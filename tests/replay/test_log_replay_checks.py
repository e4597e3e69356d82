"""A log that does not replay is refused where it is opened, and `log append` checks first.

The records below are written with `MetadataLog.append`, which takes any records (the log
stores, it does not judge): the way a hand-edited or damaged log comes about.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from api.cli.main import main
from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.json_form import record_to_json
from records.model import (
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.append import append_replayed_batches, check_batch
from replay.errors import (
    InvalidPartitionError,
    InvalidTopicError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import EMPTY_IMAGE
from replay.loader import load_image
from tests.support.record_gen import partition_record

T = Uuid(bytes(range(1, 17)))
U = Uuid(bytes(range(2, 18)))


def _broker(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=Uuid(bytes([broker_id] * 16)),
        broker_epoch=broker_id,
        fenced=False,
    )


GOOD: list[list[Record]] = [
    [_broker(1), _broker(2)],  # offsets 0-1
    [TopicRecord(name="t", topic_id=T), partition_record(T, 0, (1,))],  # offsets 2-3
]
BAD_PARTITION = partition_record(T, 1, (1, 1))


def _log(path: Path, *batches: list[Record]) -> Path:
    with MetadataLog.open(path) as log:
        for batch in batches:
            log.append(batch, principal="test")
    return path


def test_opening_a_log_that_does_not_replay_names_offset_record_rule_and_repair(
    tmp_path: Path,
) -> None:
    # The bad record is the second of its batch (offsets 4-5): partition 1 created again.
    log_dir = _log(tmp_path / "log", *GOOD, [partition_record(T, 1, (2,)), BAD_PARTITION])
    with LogReader.open(log_dir) as log:
        with pytest.raises(UnknownPartitionError) as caught:
            load_image(log)
        # Up to the last good batch, the log replays.
        assert load_image(log, lte=3).topics.get(T) is not None
    error = caught.value
    assert (error.offset, error.record, error.rule) == (5, BAD_PARTITION, "partition.next-id")
    assert str(error) == (
        "the PartitionRecord at offset 5 breaks rule partition.next-id: "
        f"topic 't' ({T}) partition 1 already exists; a partition is created once and changed "
        "with PartitionChangeRecords; the log holds a record no controller writes (edited by "
        "hand, or damaged); drop the batch holding it and everything after it with "
        "`mlog log truncate --after-offset 3 --force` (its bytes are sound, so the cut needs "
        "--force)"
    )


def test_the_first_record_of_a_batch_is_located_too(tmp_path: Path) -> None:
    log_dir = _log(
        tmp_path / "log", *GOOD, [partition_record(U, 0, (1,)), partition_record(T, 1, (2,))]
    )
    with (
        LogReader.open(log_dir) as log,
        pytest.raises(UnknownTopicError) as caught,
    ):
        load_image(log)
    assert (caught.value.offset, caught.value.rule) == (4, "topic.exists")
    assert caught.value.record == partition_record(U, 0, (1,))


def test_a_duplicate_replica_is_located_at_its_own_offset(tmp_path: Path) -> None:
    log_dir = _log(
        tmp_path / "log", *GOOD, [partition_record(T, 1, (2,))], [partition_record(T, 2, (1, 1))]
    )
    with (
        LogReader.open(log_dir) as log,
        pytest.raises(InvalidPartitionError) as caught,
    ):
        load_image(log)
    assert (caught.value.offset, caught.value.rule) == (5, "partition.replicas-valid")
    assert "`mlog log truncate --after-offset 4 --force`" in str(caught.value)


def test_a_batch_rule_is_checked_per_batch_and_located_at_the_record_that_broke_it(
    tmp_path: Path,
) -> None:
    log_dir = _log(
        tmp_path / "log",
        *GOOD,
        [TopicRecord(name="u", topic_id=U)],  # offset 4: a topic with no partitions
        [partition_record(U, 0, (1,))],  # offset 5: too late, the batch before ended without it
    )
    with LogReader.open(log_dir) as log:
        with pytest.raises(InvalidTopicError) as caught:
            load_image(log)
        # An image inside a batch (time travel to an offset) is not held to batch rules.
        inside = load_image(log, lte=4)
    assert (caught.value.offset, caught.value.rule) == (4, "topic.has-partitions")
    assert caught.value.record == TopicRecord(name="u", topic_id=U)
    topic = inside.topics.get(U)
    assert topic is not None and topic.partitions == ()


def test_a_batch_rule_is_located_at_its_record_inside_a_longer_batch(tmp_path: Path) -> None:
    log_dir = _log(
        tmp_path / "log",
        *GOOD,
        [TopicRecord(name="u", topic_id=U), partition_record(T, 1, (2,))],  # offsets 4-5
    )
    with (
        LogReader.open(log_dir) as log,
        pytest.raises(InvalidTopicError) as caught,
    ):
        load_image(log)
    assert caught.value.offset == 4
    assert "`mlog log truncate --after-offset 3 --force`" in str(caught.value)


def test_a_log_resumed_from_a_base_image_is_checked_too(tmp_path: Path) -> None:
    log_dir = _log(tmp_path / "log", *GOOD, [BAD_PARTITION])
    with LogReader.open(log_dir) as log:
        base = load_image(log, lte=3)
        with pytest.raises(InvalidPartitionError) as caught:
            load_image(log, base=base)
    assert caught.value.offset == 4


def test_check_batch_names_the_offset_the_record_would_get() -> None:
    with pytest.raises(InvalidPartitionError) as caught:
        check_batch(
            EMPTY_IMAGE,
            [_broker(1), TopicRecord(name="t", topic_id=T), partition_record(T, 0, (1, 1))],
            first_offset=10,
        )
    assert (caught.value.offset, caught.value.rule) == (12, "partition.replicas-valid")
    assert str(caught.value).endswith("; nothing was appended")
    with pytest.raises(InvalidTopicError) as batch_error:
        check_batch(EMPTY_IMAGE, [_broker(1), TopicRecord(name="t", topic_id=T)], first_offset=7)
    assert batch_error.value.offset == 8
    check_batch(EMPTY_IMAGE, GOOD[0] + GOOD[1], first_offset=0)


def test_append_replayed_appends_only_a_batch_that_replays(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        assert append_replayed_batches(log, [(GOOD[0], "p")]) == (0, 1)
        seen: list[int] = []
        assert append_replayed_batches(log, [(GOOD[1], None)], progress=seen.append) == (2, 3)
        assert sum(seen) == 2
        with pytest.raises(UnknownPartitionError) as caught:
            append_replayed_batches(log, [([partition_record(T, 1, (2,)), BAD_PARTITION], None)])
        assert caught.value.offset == 5
        assert log.end_offset == 4


def _run(data_dir: Path, args: list[str], stdin: str = "") -> int:
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        return main(["--data-dir", str(data_dir), *args], out=io.StringIO())
    finally:
        sys.stdin = old


def test_the_issue_example_is_refused_by_log_append_and_nothing_is_appended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for broker_id in ("1", "2"):
        assert _run(tmp_path, ["brokers", "register", "--id", broker_id]) == 0
    create = ["topics", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"]
    assert _run(tmp_path, create) == 0
    with LogReader.open(tmp_path / "log") as log:
        end = log.end_offset
        topic_id = next(e.record.topic_id for e in log.read() if isinstance(e.record, TopicRecord))
    capsys.readouterr()
    bad = PartitionRecord(partition_id=1, topic_id=topic_id, replicas=(1, 1), isr=(2,), leader=1)
    code = _run(tmp_path, ["log", "append"], json.dumps(record_to_json(bad)))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith(f"mlog: error: the PartitionRecord at offset {end} breaks rule ")
    assert "partition.replicas-valid" in err and "nothing was appended" in err
    with LogReader.open(tmp_path / "log") as log:
        assert log.end_offset == end
    # The same partition, well formed, is appended.
    good = PartitionRecord(partition_id=1, topic_id=topic_id, replicas=(1, 2), isr=(2,), leader=2)
    assert _run(tmp_path, ["log", "append"], json.dumps(record_to_json(good))) == 0
    with LogReader.open(tmp_path / "log") as log:
        assert log.end_offset == end + 1


def test_a_command_on_a_log_that_does_not_replay_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _log(tmp_path / "log", *GOOD, [partition_record(T, 1, (2,)), BAD_PARTITION])
    for args in (["topics", "list"], ["brokers", "register", "--id", "3"]):
        assert _run(tmp_path, args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert err.startswith("mlog: error: the PartitionRecord at offset 5 breaks rule ")
        assert "`mlog log truncate --after-offset 3 --force`" in err
    with LogReader.open(tmp_path / "log") as log:
        assert log.end_offset == 6
    # The command the error names repairs the log: it ends before the batch, which is kept in
    # quarantine, and commands work again.
    command = err.split("`")[1].split()
    assert command[:3] == ["mlog", "log", "truncate"]
    assert _run(tmp_path, command[1:]) == 0, capsys.readouterr().err
    with LogReader.open(tmp_path / "log") as log:
        assert log.end_offset == 4
    assert [p.name for p in (tmp_path / "log" / "quarantine").iterdir()]
    assert _run(tmp_path, ["topics", "list"]) == 0


def test_load_image_reports_progress_and_restores_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from replay import loader

    log_dir = _log(
        tmp_path / "log", *GOOD, [partition_record(T, 1, (2,))], [partition_record(T, 2, (2,))]
    )
    monkeypatch.setattr(loader, "PROGRESS_EVERY", 3)
    calls: list[tuple[int, bool]] = []
    with LogReader.open(log_dir) as log:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            calls.clear()
            load_image(log, progress=lambda n: calls.append((n, gc.isenabled())))
            assert gc.isenabled() is enabled
            # Blocks of 2, 2, 1, 1 entries: a call once 3 or more are pending, then the rest.
            assert calls == [(4, False), (2, enabled)]  # the last after the load
        gc.enable()
        # Exactly at the threshold: no empty call after it.
        monkeypatch.setattr(loader, "PROGRESS_EVERY", 2)
        calls.clear()
        load_image(log, progress=lambda n: calls.append((n, gc.isenabled())))
        assert [n for n, _ in calls] == [2, 2, 2]


def test_load_image_from_a_base_replays_only_what_follows_it(tmp_path: Path) -> None:
    log_dir = _log(tmp_path / "log", *GOOD, [partition_record(T, 1, (2,))])
    with LogReader.open(log_dir) as log:
        whole = load_image(log)
        first = load_image(log, lte=0)  # a base at offset 0: its one entry is not replayed again
        assert first.provenance.offset == 0
        assert load_image(log, base=first) == whole
        at_3 = load_image(log, lte=3)
        assert load_image(log, lte=3, base=at_3) is at_3
        assert load_image(log, lte=2, base=at_3) is at_3
        assert load_image(log, lte=4, base=at_3) == whole
