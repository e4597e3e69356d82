"""The `mlog` commands on a damaged log: one-line errors (exit 1), verify's report, the repair."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog
from metadata_log.container import RawBlock
from metadata_log.segment import Segment
from records import ConfigRecord, ConfigResourceType, Uuid
from tests.support.chain_attacks import forget_chain
from tests.support.cli import mlog, ok
from tests.support.paths import REPO

SERVE = (sys.executable, "-m", "api.cli", "serve")


def newest(data_dir: Path) -> Path:
    """The newest segment file."""
    return max((data_dir / "log").glob("*.avro"))


def blocks(path: Path) -> list[RawBlock]:
    """The blocks of a segment file."""
    segment = Segment.open_header(path, int(path.stem))
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def flip(path: Path, position: int, mask: int = 0x01) -> None:
    """Flip bits of one byte."""
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """A data directory with brokers and a few topics, one block per command."""
    for broker_id in (1, 2, 3):
        ok(tmp_path, "brokers", "register", "--id", str(broker_id))
    for name in ("a", "b", "c", "d"):
        ok(tmp_path, "topics", "create", "--topic", name, "--partitions", "2")
    return tmp_path


def one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The command's stderr: one `mlog: error:` line containing every needle."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("mlog: error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_damage_with_valid_blocks_after_it_fails_every_read_command(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: verify said 1, but `topics list` and friends showed the old state."""
    segment = newest(cluster)
    middle = blocks(segment)[3]
    flip(segment, (middle.position + middle.end) // 2)
    capsys.readouterr()
    for command in (
        ["topics", "list"],
        ["image", "show"],
        ["log", "segments"],
        ["log", "dump"],
        ["topics", "create", "--topic", "e"],
    ):
        code, text = mlog(cluster, *command)
        assert code == 1, (command, text)
        one_line_error(capsys, str(segment), f"byte {middle.position}", "mlog log truncate")
    code, text = mlog(cluster, "log", "verify")
    assert code == 1
    assert f"DAMAGED at byte {middle.position}" in text
    assert "repair: " in text and "mlog log truncate --after-offset" in text


@pytest.mark.parametrize(
    "where", ["map-count", "schema-length", "sync-marker", "last-block"], ids=str
)
def test_verify_reports_what_used_to_pass_for_clean(
    cluster: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Header and last-block flips once made verify say "clean" and a writer drop entries."""
    segment = newest(cluster)
    header = Segment.open_header(segment, int(segment.stem)).header
    positions = {
        "map-count": 4,
        "schema-length": 4 + 1 + 1 + len("avro.schema"),
        "sync-marker": header.size - 7,
        "last-block": blocks(segment)[-1].end - 30,
    }
    before = segment.read_bytes()
    flip(segment, positions[where], 0x02)
    code, text = mlog(cluster, "--output", "json", "log", "verify")
    report = json.loads(text)
    assert code == 1 and report["ok"] is False, report
    assert [s["error"] is not None for s in report["segments"]] == [True]
    code, _ = mlog(cluster, "brokers", "register", "--id", "9")  # a writer
    assert code == 1
    one_line_error(capsys, str(segment))
    flip(segment, positions[where], 0x02)
    assert segment.read_bytes() == before, "a refused writer changed the segment"


def test_verify_reports_a_missing_segment_and_every_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path
    records = "\n".join(
        json.dumps(
            {
                "type": "NAMESPACE_RECORD",
                "data": {"name": f"n{i}", "namespace_id": str(Uuid(bytes(range(i + 1, i + 17))))},
            }
        )
        for i in range(3)
    ).splitlines()
    for line in records:  # one block each
        ok(data_dir, "log", "append", stdin=line)
    log_dir = data_dir / "log"
    # Roll by hand: two more segments, written by a writer with a tiny segment.ms.
    now = [int(time.time() * 1000) + 10**8]  # after the appends above
    for n in range(2):
        now[0] += 10_000
        with MetadataLog.open(
            log_dir, config=LogConfig(segment_ms=1), clock_ms=lambda: now[0]
        ) as log:
            log.append(
                [
                    ConfigRecord(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name="x",
                        name=str(n),
                        value="v",
                    )
                ]
            )
    segments = sorted(log_dir.glob("*.avro"))
    assert len(segments) == 3
    flip(segments[0], Segment.open_header(segments[0], 0).header.size + 8)  # a block
    flip(segments[2], 20)  # the header
    code, text = mlog(data_dir, "log", "verify")
    assert code == 1
    assert text.count("DAMAGED at byte") == 2, text
    assert "bad segment header" in text
    flip(segments[2], 20)  # the header is whole again; the middle segment goes
    segments[1].unlink()
    code, text = mlog(data_dir, "log", "verify")
    assert code == 1
    # Segment 0's end is not known (damaged), but segment 4's header names another previous.
    assert "a segment between them is missing" in text, text


def test_dump_up_to_damage_prints_the_entries_before_it_and_a_warning(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = ok(cluster, "log", "dump").splitlines()
    segment = newest(cluster)
    damaged = blocks(segment)[-2]
    flip(segment, (damaged.position + damaged.end) // 2)
    capsys.readouterr()
    code, text = mlog(cluster, "log", "dump", "--up-to-damage")
    assert code == 1
    printed = text.splitlines()
    assert printed == full[: len(printed)] and 0 < len(printed) < len(full)
    err = capsys.readouterr().err
    assert "mlog: warning: stopped before the damage" in err and str(segment) in err


def test_truncate_repairs_a_damaged_log_and_refuses_a_healthy_one(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = ok(cluster, "log", "dump").splitlines()
    code, _ = mlog(cluster, "log", "truncate", "--after-offset", "3")
    assert code == 2
    one_line_error(capsys, "the log is healthy", "--force")
    segment = newest(cluster)
    damaged = blocks(segment)[-2]
    flip(segment, (damaged.position + damaged.end) // 2)
    code, text = mlog(cluster, "log", "verify")
    hint = text.split("`mlog log truncate --after-offset ")[1].split("`")[0]
    keep = int(hint)
    text = ok(cluster, "log", "truncate", "--after-offset", str(keep), "--reason", "test")
    assert f"the log now ends at offset {keep}" in text
    quarantine = next((cluster / "log" / "quarantine").iterdir())
    assert "reason: test" in (quarantine / "NOTE.txt").read_text()
    ok(cluster, "log", "verify")
    assert ok(cluster, "log", "dump").splitlines() == full[: keep + 1]
    ok(cluster, "topics", "create", "--topic", "after-repair", "--partitions", "1")
    assert "after-repair" in ok(cluster, "topics", "list")


def test_dump_json_into_append_copies_each_entrys_principal(tmp_path: Path) -> None:
    source, copy = tmp_path / "source", tmp_path / "copy"
    for n, principal in enumerate(["User:alice", "User:alice", "User:bob", None, "User:carol"]):
        line = json.dumps(
            {
                "type": "NAMESPACE_RECORD",
                "data": {"name": f"n{n}", "namespace_id": str(Uuid(bytes(range(n + 1, n + 17))))},
            }
        )
        args = ["log", "append"] + (["--principal", principal] if principal else [])
        ok(source, *args, stdin=line)
    dumped = ok(source, "--output", "json", "log", "dump")
    ok(copy, "log", "append", stdin=dumped)
    original = [json.loads(line) for line in dumped.splitlines()]
    copied = [json.loads(line) for line in ok(copy, "--output", "json", "log", "dump").splitlines()]
    assert [e["principal"] for e in copied] == [e["principal"] for e in original]
    assert [e["principal"] for e in copied] == [
        "User:alice",
        "User:alice",
        "User:bob",
        None,
        "User:carol",
    ]
    assert [e["record"] for e in copied] == [e["record"] for e in original]
    # One atomic append: a single block, whatever the principals.
    assert len(blocks(newest(copy))) == 1
    # --principal still names whoever appends, for every record.
    ok(tmp_path / "third", "log", "append", "--principal", "User:ops", stdin=dumped)
    third = ok(tmp_path / "third", "--output", "json", "log", "dump").splitlines()
    assert {json.loads(line)["principal"] for line in third} == {"User:ops"}


def test_verify_of_a_missing_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = mlog(tmp_path / "nowhere", "log", "verify")
    assert code == 2
    one_line_error(capsys, "there is no log at")
    assert not os.path.exists(tmp_path / "nowhere")


def test_a_chained_log_whose_chain_files_are_deleted_fails_verify_and_every_writer(
    cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once `clean`: every writer then rebuilt the chain over whatever the blocks held."""
    log_dir = cluster / "log"
    names = sorted(p.name for p in log_dir.glob("*.chain"))
    assert names
    for path in log_dir.glob("*.chain"):
        path.unlink()
    shutil.rmtree(log_dir / "merkle", ignore_errors=True)
    code, text = mlog(cluster, "log", "verify")
    assert code == 1, text
    assert "hash chain: MISSING" in text and all(name in text for name in names), text
    assert "DAMAGED at byte" not in text and "clean" not in text
    assert "repair: restore the missing chain files" in text
    code, text = mlog(cluster, "--output", "json", "log", "verify")
    report = json.loads(text)
    assert code == 1 and report["ok"] is False and report["chain"]["missing"] == names
    capsys.readouterr()
    for command in (["topics", "create", "--topic", "e"], ["brokers", "register", "--id", "9"]):
        code, _ = mlog(cluster, *command)
        assert code == 1, command
        one_line_error(capsys, "chain files are missing", "mlog log verify --digest")
    assert not list(log_dir.glob("*.chain")), "a refused writer rebuilt the chain"
    served = subprocess.run(
        [*SERVE, "--data-dir", str(cluster), "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert served.returncode == 1, served.stderr
    assert "chain files are missing" in served.stderr and "Traceback" not in served.stderr
    assert not list(log_dir.glob("*.chain"))
    # Readers still read it (the blocks are not damaged; whether they are true is the question).
    assert "e" not in ok(cluster, "topics", "list").split()


def test_a_log_from_before_the_chain_still_verifies_clean_and_gets_one(cluster: Path) -> None:
    """A log whose headers never had the chain (metadata.version 1's code) is as it was."""
    forget_chain(cluster / "log")
    code, text = mlog(cluster, "log", "verify")
    assert code == 0 and "hash chain: none" in text and "clean" in text, text
    ok(cluster, "topics", "create", "--topic", "e")
    code, text = mlog(cluster, "log", "verify")
    assert code == 0 and "hash chain from offset 0: intact" in text, text
