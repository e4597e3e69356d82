"""Out-of-range numbers on the command line: one line on stderr, exit 2, nothing written.

Each value here once ended in a traceback (`struct.error` through a server, `OverflowError`
from SQLite or the log's offset arithmetic). The command line now checks what a value can hold
(Avro/Kafka int for ids and counts, long for offsets, the snapshot id column's range) before it
opens anything, so the same message comes on a data directory and with `--bootstrap-server`.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from api.cli.main import main
from metadata_log.reader import LogReader

BIG32 = str(2**31)
BIG64 = str(2**63)

CASES = [
    ["topics", "create", "--topic", "t", "--partitions", BIG32],
    ["topics", "create", "--topic", "t", "--replication-factor", BIG32],
    ["topics", "create", "--topic", "t", "--replica-assignment", f"1:{BIG32}"],
    ["topics", "add-partitions", "--topic", "t", "--partitions", BIG32],
    ["leaders", "elect", "--topic", "t", "--partition", BIG32],
    ["partitions", "reassign", "--topic", "t", "--partition", BIG32, "--replicas", "1"],
    ["partitions", "reassign", "--topic", "t", "--partition", "0", "--replicas", f"1,{BIG32}"],
    ["brokers", "register", "--id", BIG32],
    ["image", "show", "--at-offset", BIG64],
    ["history", "--topic", "t", "--gt", BIG64],
]
"""Commands that also run through a server: the same check either way."""

LOCAL_CASES = [
    ["log", "dump", "--gt", BIG64],
    ["log", "dump", "--limit", BIG64],
    ["snapshot", "show", BIG64],
    ["snapshot", "delete", BIG32],
    ["snapshot", "verify", BIG64],
    ["snapshot", "list", "--gt", BIG64],
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args, out=io.StringIO())
    except SystemExit as exc:  # argparse's usage error
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    assert main(["--data-dir", str(tmp_path), "brokers", "register", "--id", "1"]) == 0
    return tmp_path


def _end(data_dir: Path) -> int:
    with LogReader.open(data_dir / "log") as log:
        return log.end_offset


@pytest.mark.parametrize("args", CASES + LOCAL_CASES, ids=" ".join)
def test_out_of_range_values_are_one_line_and_write_nothing(
    args: list[str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    before = _end(data_dir)
    code, err = _run(["--data-dir", str(data_dir), *args], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "error" in err
    assert ("2147483648" in err) or ("9223372036854775808" in err) or ("32-bit" in err)
    assert _end(data_dir) == before


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_the_same_check_runs_before_connecting_to_a_server(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens on port 1: the value is refused before any connection is tried.
    code, err = _run(["--bootstrap-server", "127.0.0.1:1", *args], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "connect" not in err.lower()


def test_usage_errors_are_one_line_that_points_at_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _run(["topics", "create"], capsys)
    assert code == 2
    assert err.strip() == (
        "mlog topics create: error: the following arguments are required: --topic "
        "(see `mlog topics create --help`)"
    )


def test_log_append_of_binary_data_is_one_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(128, 256)) * 4)
    capsys.readouterr()
    before = _end(data_dir)
    code, err = _run(["--data-dir", str(data_dir), "log", "append", "--file", str(binary)], capsys)
    assert code == 2
    assert err.strip() == (
        f"mlog: error: {binary} is not UTF-8 text (byte 0); give the JSON lines "
        "`mlog log dump --output json` prints"
    )
    assert _end(data_dir) == before
