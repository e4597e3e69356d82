"""`mlog log export|import`: a copy that keeps offsets, epochs, times, principals, blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from records.json_form import record_to_json
from records.model import ClientWriteRecord
from records.uuids import Uuid
from tests.support.cli import mlog, ok


def _blocks(data_dir: Path) -> list[tuple[int, int, list[int], list[int], list[str | None]]]:
    with LogReader.open(data_dir / "log") as log:
        return [
            (b.first_offset, b.last_offset, b.epochs, b.timestamps, b.principals)
            for b in log.read_records()
        ]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    data = tmp_path / "source"
    ok(data, "brokers", "register", "--id", "1", "--principal", "User:ops")
    ok(data, "topics", "create", "--topic", "s1", "--partitions", "3", "--principal", "User:a")
    ok(
        data,
        "configs",
        "alter",
        "--topic",
        "s1",
        "--set",
        "retention.ms=5",
        "--principal",
        "User:b",
    )
    return data


def test_export_then_import_keeps_every_entry_and_block(source: Path, tmp_path: Path) -> None:
    exported = tmp_path / "source.export"
    ok(source, "log", "export", "--file", str(exported))
    copy = tmp_path / "copy"
    assert "imported 4 block(s)" in ok(copy, "log", "import", "--file", str(exported))
    assert _blocks(copy) == _blocks(source)
    assert ok(copy, "log", "dump") == ok(source, "log", "dump")
    # A block boundary of the source is one of the copy: truncate takes it.
    ok(copy, "log", "truncate", "--after-offset", "1", "--force")
    # And the copy is a data directory like any other: snapshots, new writes.
    ok(copy, "snapshot", "create")
    ok(copy, "topics", "create", "--topic", "s2")


def test_import_refuses_a_directory_with_a_log_and_other_files(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = ok(source, "log", "export")
    code, _ = mlog(source, "log", "import", stdin=exported)
    assert code == 2 and "already holds a log" in capsys.readouterr().err
    dump = ok(source, "--output", "json", "log", "dump")
    code, _ = mlog(tmp_path / "new", "log", "import", stdin=dump)
    assert code == 2 and "is not an export" in capsys.readouterr().err
    assert not (tmp_path / "new" / "log").exists()
    broken = exported.replace('"epoch": 1', '"epoch": "x"', 1)
    code, _ = mlog(tmp_path / "new", "log", "import", stdin=broken)
    assert code == 2 and "is not a block of an export" in capsys.readouterr().err
    assert not (tmp_path / "new" / "log").exists()


def test_dump_shows_a_client_write_note_compactly(tmp_path: Path) -> None:
    note = ClientWriteRecord(
        client_id=Uuid.random(), sequence=0, principal="User:a", api_key=19, response=b"x" * 300
    )
    ok(tmp_path, "log", "append", stdin=json.dumps(record_to_json(note)))
    text = ok(tmp_path, "log", "dump")
    assert '"response":"<300 bytes>"' in text and "eHh4" not in text  # no base64
    assert "CLIENT_WRITE_RECORD" in text
    # JSON keeps the bytes, for copies.
    assert "eHh4" in ok(tmp_path, "--output", "json", "log", "dump")


def _with_a_credential(data: Path) -> None:
    ok(
        data,
        "users",
        "scram-set",
        "--name",
        "alice",
        "--mechanism",
        "SCRAM-SHA-256",
        "--iterations",
        "4096",
        "--password-stdin",
        stdin="s3cret-password\n",
    )


def test_an_export_without_secrets_warns_that_the_copy_will_not_match(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing to replace: a copy is faithful without --with-secrets, and nothing is said.
    capsys.readouterr()
    ok(source, "log", "export")
    assert "warning" not in capsys.readouterr().err
    _with_a_credential(source)
    token = ok(source, "log", "digest").strip()
    capsys.readouterr()
    exported = ok(source, "log", "export")
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "mlog: warning: the export replaced the salts and keys of 1 credential record(s)" in err
    assert "will not match the original's digests" in err and "--with-secrets" in err
    # And it is true: the copy fails the original's digest.
    copy = tmp_path / "redacted"
    ok(copy, "log", "import", stdin=exported)
    code, text = mlog(copy, "log", "verify", "--digest", token)
    assert code == 1 and "DOES NOT MATCH" in text, text
    capsys.readouterr()
    ok(source, "log", "export", "--with-secrets")
    assert "warning" not in capsys.readouterr().err


def test_an_import_is_digested_at_once_and_a_faithful_copy_has_the_originals_digest(
    source: Path, tmp_path: Path
) -> None:
    _with_a_credential(source)
    ok(source, "topics", "create", "--topic", "s2", "--principal", "User:c")
    token = ok(source, "log", "digest").strip()
    second_block_end = str(_blocks(source)[1][1])
    earlier = ok(source, "log", "digest", "--at-offset", second_block_end).strip()
    exported = ok(source, "log", "export", "--with-secrets")
    copy = tmp_path / "copy"
    ok(copy, "log", "import", stdin=exported)
    log_dir = copy / "log"
    assert sorted(p.stem for p in log_dir.glob("*.chain")) == sorted(
        p.stem for p in log_dir.glob("*.avro")
    )
    assert (log_dir / "merkle" / "leaves").exists()
    # Nothing has written to the copy since: its digests are the original's.
    assert ok(copy, "log", "digest").strip() == token
    assert ok(copy, "log", "digest", "--at-offset", second_block_end).strip() == earlier
    for digest in (token, earlier):
        code, text = mlog(copy, "log", "verify", "--digest", digest)
        assert code == 0 and "MATCHES" in text and "clean" in text, text
    proof = json.loads(ok(copy, "log", "prove", "--offset", "0", "--digest", token))
    assert proof["tree_size"] == int(token.split(":")[2]) + 1
