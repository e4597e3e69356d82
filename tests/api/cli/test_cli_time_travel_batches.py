"""Time travel from the CLI shows only states that existed: whole batches, nothing before 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import mlog, ok
from tests.support.server_thread import running_server


@pytest.fixture(params=["data-dir", "server"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """A log whose topic s1 is one batch (TopicRecord at 2, PartitionRecords at 3..5)."""
    data = tmp_path / "data"
    ok(data, "brokers", "register", "--id", "1")
    ok(data, "topics", "create", "--topic", "s1", "--partitions", "3")
    if request.param == "data-dir":
        yield []
        return
    with running_server(data / "log", brokers=1) as server:
        yield ["--bootstrap-server", server.address]


def test_an_offset_inside_a_batch_answers_the_batch_end_and_says_so(
    tmp_path: Path, where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code, text = mlog(
        tmp_path / "data", "--output", "json", "image", "show", "/topics/byName/s1",
        "--at-offset", "2", *where,
    )  # fmt: skip
    assert code == 0
    shown = json.loads(text)
    # Never the topic without its partitions: all three are there.
    assert {f"/topics/byName/s1/{p}" for p in range(3)} <= set(shown)
    err = capsys.readouterr().err
    assert "offset 2 is inside an atomic batch that ends at offset 5" in err


def test_a_batch_end_is_answered_without_a_note(
    tmp_path: Path, where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code, text = mlog(
        tmp_path / "data", "image", "show", "/topics/byName", "--at-offset", "1", *where
    )
    assert code == 0 and "s1" not in text
    assert capsys.readouterr().err == ""


def test_a_diff_from_inside_a_batch_starts_at_its_end(tmp_path: Path, where: list[str]) -> None:
    code, text = mlog(tmp_path / "data", "image", "diff", "--from", "1", "--to", "3", *where)
    assert code == 0
    assert "changes from offset 1 to offset 5" in text
    assert "partitions 3" in text


def test_a_diff_inside_one_batch_says_why_it_is_empty(
    tmp_path: Path, where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Both ends inside s1's batch resolve to its end: "no changes", and the note says why."""
    capsys.readouterr()
    code, text = mlog(tmp_path / "data", "image", "diff", "--from", "2", "--to", "3", *where)
    assert code == 0
    assert text == "changes from offset 5 to offset 5:\nno changes\n"
    err = capsys.readouterr().err
    assert "offset 2 is inside an atomic batch that ends at offset 5" in err
    assert "offset 3 is inside an atomic batch that ends at offset 5" in err
    # Batch ends (and times) are answered as asked: no note.
    assert mlog(tmp_path / "data", "image", "diff", "--from", "1", "--to", "5", *where)[0] == 0
    assert capsys.readouterr().err == ""


def test_a_time_before_the_first_entry_is_refused_saying_so(
    tmp_path: Path, where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code, text = mlog(
        tmp_path / "data", "image", "show", "--at-time", "2000-01-01T00:00:00Z", *where
    )
    assert code == 2 and text == ""
    err = capsys.readouterr().err
    assert "before the log's first entry" in err and "--at-offset -1" in err
