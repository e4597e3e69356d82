"""api/cli/archive.py and `--archive-url`: the history below the local log start, from the archive.

The comparison the issue asks for: a data directory of 50+ segments archived, then trimmed
locally, answers every history command about the entries below its start as its untrimmed
twin (copied before the trim) does, text and JSON alike; tampered archives are named, never
served; bad flags are one line, exit 2.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from tests.support.archives import SMALL_SEGMENT_ENV, build_data_dir, tamper, trimmed_twins
from tests.support.cli import as_json, mlog, ok


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str, str]]:
    """(trimmed data dir, untrimmed twin, archive URL, digest before the trim)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in SMALL_SEGMENT_ENV.items():
            patch.setenv(key, value)
        yield trimmed_twins(tmp_path_factory.mktemp("twins"))


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SMALL_SEGMENT_ENV.items():
        monkeypatch.setenv(key, value)


def _start(data_dir: Path) -> int:
    with LogReader.open(data_dir / "log") as log:
        return log.log_start_offset


def _segments(data_dir: Path) -> int:
    return len(list((data_dir / "log").glob("*.avro")))


def test_the_twins_differ_by_50_segments_trimmed(twins: tuple[Path, Path, str, str]) -> None:
    trimmed, twin, url, _ = twins
    start = _start(trimmed)
    assert start > 100 and _start(twin) == 0
    assert _segments(twin) - _segments(trimmed) >= 50
    listed = as_json(trimmed, "archive", "list", "--archive-url", url)
    assert listed["start_offset"] == 0 and listed["end_offset"] >= start
    # Without the archive, the trimmed directory cannot answer below its start.
    code, text = mlog(trimmed, "history", "--topic", "t3")
    assert code == 0 and text != ok(twin, "history", "--topic", "t3")


def _below_start_commands(trimmed: Path, twin: Path, digest: str) -> list[tuple[str, ...]]:
    """Commands about the entries below the trimmed directory's start."""
    start = _start(trimmed)
    dumped = [json.loads(line) for line in ok(twin, "--output", "json", "log", "dump").splitlines()]
    at = dumped[start // 3]["timestamp"]
    deleted = next(
        row["topic_id"]
        for row in as_json(twin, "history", "--topic", "t3")
        if row["record_type"] == "RemoveTopicRecord"
    )
    return [
        ("history", "--topic", "t3"),
        ("history", "--topic", "t9", "--lte", str(start - 1)),
        ("history", "--topic-id", deleted),
        ("history", "--broker", "2", "--limit", "5"),
        ("image", "show", "--at-offset", str(start // 2)),
        ("image", "show", "--at-offset", str(start - 2), "/topics/byName"),
        ("image", "show", "--at-time", str(at)),
        ("image", "diff", "--from", "20", "--to", str(start - 5)),
        ("log", "dump", "--gt", "10", "--lte", str(start - 1)),
        ("log", "prove", "--digest", digest, "--offset", str(start // 3)),
        ("log", "prove", "--digest", digest, "--offset", str(start + 1)),
        ("log", "verify", "--digest", digest),
        ("log", "digest", "--at-offset", str(dumped[start // 2]["offset"])),
    ]


@pytest.mark.parametrize("output", ["table", "json"])
def test_reads_below_the_local_start_answer_as_the_untrimmed_twin(
    twins: tuple[Path, Path, str, str], output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trimmed, twin, url, digest = twins
    for command in _below_start_commands(trimmed, twin, digest):
        capsys.readouterr()
        seen = mlog(trimmed, "--output", output, *command, "--archive-url", url)
        seen_err = capsys.readouterr().err
        whole = mlog(twin, "--output", output, *command)
        whole_err = capsys.readouterr().err
        assert seen == whole, command
        assert seen_err == whole_err, command
        if command[:2] != ("log", "digest"):
            assert seen[0] == 0 and seen[1], command


def test_a_digest_below_the_local_start_is_recomputed_from_the_archive(
    twins: tuple[Path, Path, str, str],
) -> None:
    trimmed, twin, url, _ = twins
    start = _start(trimmed)
    segment = [s for s in as_json(twin, "log", "segments") if s["next_offset"] < start][-5]
    old = ok(twin, "log", "digest", "--at-offset", str(segment["next_offset"] - 1)).strip()
    text = ok(trimmed, "log", "verify", "--digest", old, "--archive-url", url)
    assert f"digest {old}: MATCHES: the log up to offset" in text, text
    # The local log alone has only the Merkle index's leaves of those entries, not the chain.
    alone = ok(trimmed, "log", "verify", "--digest", old)
    assert "the hash chain part cannot be recomputed without the entries" in alone


def test_flags_are_taken_between_noun_and_verb_and_from_the_environment(
    twins: tuple[Path, Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trimmed, twin, url, _ = twins
    expected = ok(twin, "log", "dump", "--lte", "5")
    assert ok(trimmed, "log", "--archive-url", url, "dump", "--lte", "5") == expected
    monkeypatch.setenv("MLOG_ARCHIVE_URL", url)
    assert ok(trimmed, "log", "dump", "--lte", "5") == expected
    assert ok(trimmed, "archive", "list") == ok(trimmed, "archive", "list", "--archive-url", url)


def test_archive_list_shows_the_run(twins: tuple[Path, Path, str, str]) -> None:
    trimmed, _, url, _ = twins
    listed = as_json(trimmed, "archive", "list", "--archive-url", url)
    run = listed["run"]
    assert len(run) >= 50 and run[0]["base_offset"] == 0
    assert all(a["last_offset"] + 1 == b["base_offset"] for a, b in itertools.pairwise(run))
    assert sum(e["entries"] for e in run) == listed["end_offset"]
    assert listed["gaps"] == [] and listed["redundant"] == [] and listed["damaged"] == []
    assert listed["cluster_id"] is None  # a data directory that never served has none
    text = ok(trimmed, "archive", "list", "--archive-url", url)
    first = text.splitlines()[0]
    assert f"offsets 0..{listed['end_offset'] - 1} in {len(run)} segment(s)" in first
    assert text.splitlines()[1].split() == ["first", "last", "entries", "bytes", "newest"]


def test_archive_verify_checks_it_end_to_end(twins: tuple[Path, Path, str, str]) -> None:
    trimmed, twin, url, digest = twins
    end = as_json(trimmed, "archive", "list", "--archive-url", url)["end_offset"]
    within = ok(twin, "log", "digest", "--at-offset", str(end - 1)).strip()
    text = ok(trimmed, "archive", "verify", "--archive-url", url, "--digest", within)
    assert "checked against the manifest" in text
    assert f"hash chain from offset 0: intact up to offset {end - 1}" in text
    assert f"digest {within}: MATCHES" in text and "clean:" in text
    report = as_json(trimmed, "archive", "verify", "--archive-url", url)
    assert report["ok"] and report["problems"] == [] and report["log"]["ok"]
    # A digest past the archive's end (the whole log's) is not the archive's history.
    code, text = mlog(trimmed, "archive", "verify", "--archive-url", url, "--digest", digest)
    assert code == 1 and f"digest {digest}: DOES NOT MATCH" in text


def test_upload_again_uploads_nothing(twins: tuple[Path, Path, str, str]) -> None:
    trimmed, _, url, _ = twins
    report = as_json(trimmed, "archive", "upload", "--archive-url", url)
    assert report["uploaded"] == [] and report["waiting"] is None
    assert "nothing to upload" in ok(trimmed, "archive", "upload", "--archive-url", url)


# ---------------------------------------------------------------------- tampering


@pytest.fixture
def copied(twins: tuple[Path, Path, str, str], tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the trimmed data dir, a copy of its archive to tamper with, a fresh cache)."""
    trimmed, _, url, _ = twins
    archive = tmp_path / "archive"
    shutil.copytree(url.removeprefix("file://"), archive)
    return trimmed, archive, tmp_path / "cache"


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("mlog: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(("kind", "delete"), [("avro", False), ("avro", True), ("chain", True)])
def test_a_tampered_object_is_named_by_verify_and_by_reads(
    copied: tuple[Path, Path, Path],
    kind: str,
    delete: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trimmed, archive, cache = copied
    name = tamper(archive, kind, 7, delete=delete)
    flags = ("--archive-url", str(archive), "--archive-cache", str(cache))
    capsys.readouterr()
    code, text = mlog(trimmed, "archive", "verify", *flags)
    assert code == 1
    damaged = [line for line in text.splitlines() if line.startswith("DAMAGED:")]
    assert len(damaged) == 1 and name in damaged[0], text
    assert ("is missing" if delete else "differs from what the manifest") in damaged[0]
    for command, exit_code in (
        (("history", "--topic", "t3"), 2),
        (("image", "show", "--at-offset", "20"), 2),
        (("log", "dump", "--lte", "3"), 2),
        (("log", "verify"), 1),
    ):
        capsys.readouterr()
        code, out = mlog(trimmed, *command, *flags)
        assert code == exit_code, command
        assert name in _one_error(capsys), command
        assert "offset: " not in out  # nothing was served
    assert not [p for p in cache.iterdir() if p.name.startswith("view-")]


def test_a_changed_manifest_entry_is_named(
    copied: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trimmed, archive, _ = copied
    entry = sorted((archive / "manifest").glob("*.json"))[3]
    entry.write_text("{not json")
    code, text = mlog(trimmed, "archive", "verify", "--archive-url", str(archive))
    assert code == 1 and f"manifest entry manifest/{entry.name} is not JSON" in text
    listed = as_json(trimmed, "archive", "list", "--archive-url", str(archive))
    assert listed["damaged"] and listed["gaps"]


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("history", "--topic", "t", "--archive-url", "ftp://h/x"), "scheme 'ftp'"),
        (("history", "--topic", "t", "--archive-url", "relative/dir"), "has no scheme"),
        (("image", "show", "--at-offset", "1", "--archive-url", ""), "is empty"),
        (("log", "verify", "--archive-url", "file://relative"), "absolute path"),
        (("log", "dump", "--archive-url", "s3://"), "names no bucket"),
        (("history", "--topic", "t", "--archive-cache", "/tmp/c"), "give --archive-url too"),
        (("log", "--archive-url", "/tmp/a", "append"), "does not read the log's history"),
        (("topics", "list", "--archive-url", "/tmp/a"), "unknown option --archive-url"),
        (("archive", "list"), "needs the archive: give --archive-url"),
        (("archive", "verify", "--archive-url", "/tmp/a", "--digest", "x"), "digest"),
        (
            ("--bootstrap-server", "127.0.0.1:9", "history", "--topic", "t", "--archive-url", "/a"),
            "drop --archive-url or --bootstrap-server",
        ),
    ],
)
def test_bad_flags_are_one_line_exit_2(
    twins: tuple[Path, Path, str, str],
    args: tuple[str, ...],
    needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trimmed = twins[0]
    before = sorted(p.name for p in trimmed.iterdir())
    capsys.readouterr()
    code, out = mlog(trimmed, *args)
    assert code == 2 and out == ""
    assert needle in _one_error(capsys)
    assert sorted(p.name for p in trimmed.iterdir()) == before  # no cache made, nothing read


def test_a_cache_that_is_a_file_is_refused(
    twins: tuple[Path, Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trimmed, _, url, _ = twins
    (tmp_path / "file").write_text("")
    args = ("--archive-url", url, "--archive-cache", str(tmp_path / "file"))
    code, _ = mlog(trimmed, "history", "--topic", "t1", *args)
    assert code == 2 and "is not a directory" in _one_error(capsys)


def test_upload_refuses_a_quorum_nodes_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_data_dir(tmp_path, 2)
    (tmp_path / "quorum-state").write_text("{}")
    code, _ = mlog(tmp_path, "archive", "upload", "--archive-url", str(tmp_path / "a"))
    assert code == 2 and "its active controller uploads" in _one_error(capsys)


# ---------------------------------------------------------------------- trim and joins


def test_trim_never_removes_what_the_archive_does_not_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, url = tmp_path / "d", f"file://{tmp_path / 'archive'}"
    build_data_dir(data, 12)
    archived_end = as_json(data, "archive", "upload", "--archive-url", url)["archived_end"]
    build_data_dir(data, 0)  # brokers registered again: more segments, not archived
    for i in range(12):
        ok(data, "topics", "create", "--topic", f"u{i}")
    ok(data, "snapshot", "create")
    capsys.readouterr()
    result = as_json(data, "log", "trim", "--before-snapshot", "--archive-url", url)
    note = capsys.readouterr().err
    assert result["log_start_offset"] <= archived_end == result["archive_end"]
    assert result["capped"]
    assert result["log_start_offset"] > 0
    assert f"the trim stops at offset {archived_end}" in note
    assert "`mlog archive upload` uploads them" in note
    ok(data, "archive", "upload", "--archive-url", url)
    text = ok(data, "log", "trim", "--before-snapshot", "--archive-url", url)
    assert "removed" in text and "kept in the archive" in text


def test_an_archive_that_does_not_meet_the_log_is_noted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, url = tmp_path / "d", f"file://{tmp_path / 'archive'}"
    build_data_dir(data, 6)
    ok(data, "archive", "upload", "--archive-url", url)
    for i in range(20):
        ok(data, "topics", "create", "--topic", f"u{i}")
    ok(data, "snapshot", "create")
    ok(data, "log", "trim", "--before-snapshot")  # without the archive: past its end
    capsys.readouterr()
    text = ok(data, "history", "--topic", "u19", "--archive-url", url)
    err = capsys.readouterr().err.splitlines()
    notes = [line for line in err if line.startswith("mlog: note:")]
    assert len(notes) == 1 and "were trimmed before they were archived" in notes[0]
    assert "created topic u19" in text


def test_list_shows_redundant_entries(
    copied: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry over two others' offsets (another replica's cut) makes them redundant."""
    trimmed, archive, _ = copied
    first, second = sorted((archive / "manifest").glob("*.json"))[:2]
    entry = json.loads(first.read_text())
    end = json.loads(second.read_text())["next_offset"]
    stem = f"{entry['base_offset']:020d}-{end:020d}"
    entry["next_offset"] = end
    for kind, suffix in (("segment", "avro"), ("chain", "chain"), ("leaves", "leaves")):
        entry["objects"][kind]["name"] = f"segments/{stem}.{suffix}"
    (archive / "manifest" / f"{stem}.json").write_text(json.dumps(entry))
    listed = as_json(trimmed, "archive", "list", "--archive-url", str(archive))
    assert [e["base_offset"] for e in listed["redundant"]] == [
        json.loads(p.read_text())["base_offset"] for p in (first, second)
    ]
    assert listed["run"][0]["last_offset"] == end - 1 and listed["gaps"] == []
    text = ok(trimmed, "archive", "list", "--archive-url", str(archive))
    assert text.count("redundant: offsets") == 2
    # Its objects were never uploaded: verify names them.
    code, report = mlog(trimmed, "archive", "verify", "--archive-url", str(archive))
    assert code == 1 and f"segments/{stem}.avro is missing" in report


def test_damage_in_a_local_segment_is_named_where_it_is(
    twins: tuple[Path, Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read through a view, a damaged local segment is named in the data directory."""
    trimmed, _, url, _ = twins
    data = tmp_path / "data"
    shutil.copytree(trimmed, data, ignore=shutil.ignore_patterns("archive-cache"))
    newest = max((data / "log").glob("*.avro"))
    raw = bytearray(newest.read_bytes())
    raw[len(raw) - 100] ^= 0x01
    newest.write_bytes(bytes(raw))
    capsys.readouterr()
    code, _ = mlog(
        data, "log", "dump", "--archive-url", url, "--archive-cache", str(tmp_path / "c")
    )
    assert code == 1
    line = _one_error(capsys)
    assert f"log segment {newest} is damaged" in line, line


def test_upload_runs_beside_a_running_server(tmp_path: Path) -> None:
    """The server holds the writer lock; the upload reads the log with a LogReader."""
    from api import Metadata
    from tests.support.server_thread import running_server

    data, url = tmp_path / "d", f"file://{tmp_path / 'archive'}"
    build_data_dir(data, 10)
    sealed = _segments(data) - 1
    with running_server(data / "log", brokers=0) as server:
        with Metadata.connect(server.address) as md:
            md.create_topic("served", partitions=1)
        report = as_json(data, "archive", "upload", "--archive-url", url)
        assert len(report["uploaded"]) == sealed and report["waiting"] is None
        with Metadata.connect(server.address) as md:
            md.create_topic("after", partitions=1)  # the server still writes
    assert as_json(data, "archive", "verify", "--archive-url", url)["ok"]


def test_the_shells_timeline_reads_the_archive(twins: tuple[Path, Path, str, str]) -> None:
    trimmed, twin, url, _ = twins
    script = "cd /topics/byName/t1; at 30; history; diff 12"
    assert ok(trimmed, "shell", "-c", script, "--archive-url", url) == ok(
        twin, "shell", "-c", script
    )
