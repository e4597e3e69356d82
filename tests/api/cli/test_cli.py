"""The `mlog log` commands, run in-process and as the installed console script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from api.cli.main import main
from api.cli.output import display_width, print_table
from api.service.settings import SettingsError, load_settings
from metadata_log import LogConfigError, MetadataLog
from metadata_log.reader import LogReader
from metadata_log.segment import Segment
from records import ConfigRecord, ConfigResourceType, PartitionRecord, TopicRecord, Uuid

TOPIC_ID = "Kx3mWzDqQXa0Vn1b9cLr7A"
RECORDS = [
    {"type": "TOPIC_RECORD", "data": {"name": "orders", "topic_id": TOPIC_ID}},
    {
        "type": "PARTITION_RECORD",
        "data": {
            "partition_id": 0,
            "topic_id": TOPIC_ID,
            "replicas": [1],
            "isr": [1],
            "leader": 1,
            "leader_epoch": 3,
        },
    },
]
"""A topic with its partition: one batch that replays."""


def run(args: list[str], stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(args, out=out)
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue()


def append_lines(data_dir: Path, lines: Sequence[object], principal: str = "admin") -> None:
    code, _ = run(
        ["--data-dir", str(data_dir), "log", "append", "--principal", principal],
        "\n".join(json.dumps(line) for line in lines),
    )
    assert code == 0


def test_append_then_dump_table_and_json(tmp_path: Path) -> None:
    append_lines(tmp_path, RECORDS)
    code, text = run(["--data-dir", str(tmp_path), "log", "dump"])
    assert code == 0
    lines = text.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("offset: 0 epoch: 1 timestamp: ")
    assert "principal: admin" in lines[0]
    assert '"type":"TOPIC_RECORD"' in lines[0] and TOPIC_ID in lines[0]
    assert '"type":"PARTITION_RECORD"' in lines[1] and '"leader_epoch":3' in lines[1]

    code, text = run(["log", "dump", "--data-dir", str(tmp_path), "--output", "json", "--gt", "0"])
    assert code == 0
    (entry,) = [json.loads(line) for line in text.splitlines()]
    assert entry["offset"] == 1 and entry["principal"] == "admin"
    assert entry["record"]["type"] == "PARTITION_RECORD"

    with LogReader.open(tmp_path / "log") as log:
        records = [e.record for e in log.read()]
    assert records == [
        TopicRecord(name="orders", topic_id=Uuid.parse(TOPIC_ID)),
        PartitionRecord(
            partition_id=0,
            topic_id=Uuid.parse(TOPIC_ID),
            replicas=(1,),
            isr=(1,),
            leader=1,
            leader_epoch=3,
        ),
    ]


def test_dump_json_output_can_be_appended_to_another_log(tmp_path: Path) -> None:
    append_lines(tmp_path / "a", RECORDS)
    _, text = run(["--data-dir", str(tmp_path / "a"), "--output", "json", "log", "dump"])
    code, _ = run(["--data-dir", str(tmp_path / "b"), "log", "append"], text)
    assert code == 0
    with (
        LogReader.open(tmp_path / "a" / "log") as a,
        LogReader.open(tmp_path / "b" / "log") as b,
    ):
        assert [e.record for e in a.read()] == [e.record for e in b.read()]


def test_dump_ranges_and_limit(tmp_path: Path) -> None:
    lines = [
        {
            "type": "CONFIG_RECORD",
            "data": {"resource_type": "BROKER", "resource_name": "", "name": "k", "value": str(i)},
        }
        for i in range(10)
    ]
    append_lines(tmp_path, lines)
    _, text = run(
        ["--data-dir", str(tmp_path), "--output", "json", "log", "dump", "--gt", "2", "--lte", "7"]
    )
    assert [json.loads(t)["offset"] for t in text.splitlines()] == [3, 4, 5, 6, 7]
    _, text = run(
        [
            "--data-dir",
            str(tmp_path),
            "--output",
            "json",
            "log",
            "dump",
            "--gt",
            "2",
            "--limit",
            "2",
        ]
    )
    assert [json.loads(t)["offset"] for t in text.splitlines()] == [3, 4]


def test_bad_append_input_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    append_lines(tmp_path, RECORDS)
    bad_inputs = [
        ("not json\n", "line 1 is not JSON"),
        ('{"type": "NOPE_RECORD", "data": {}}\n', "unknown record type 'NOPE_RECORD'"),
        ('{"type": "TOPIC_RECORD", "data": {"name": "x"}}\n', "missing field(s) ['topic_id']"),
        ("\n\n", "holds no records"),
        # A valid first line does not get written when a later line is bad: one atomic batch.
        (json.dumps(RECORDS[0]) + '\n{"type": "TOPIC_RECORD", "data": {"name": 1}}\n', "line 2"),
        # Records that parse but do not replay onto the log: refused whole, as the others.
        (
            json.dumps(RECORDS[1]),
            "the PartitionRecord at offset 2 breaks rule partition.next-id",
        ),
    ]
    for text, message in bad_inputs:
        code, _ = run(["--data-dir", str(tmp_path), "log", "append"], text)
        assert code == 2
        err = capsys.readouterr().err
        assert err.startswith("mlog: error: ") and message in err, err
        assert len(err.strip().splitlines()) == 1
    with LogReader.open(tmp_path / "log") as log:
        assert log.end_offset == 2


def test_missing_data_dir_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(["--data-dir", str(tmp_path / "nowhere"), "log", "dump"])
    assert code == 2
    assert "there is no log at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_verify_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    append_lines(tmp_path, RECORDS)
    cluster_config = {
        "type": "CONFIG_RECORD",
        "data": {"resource_type": "BROKER", "resource_name": "", "name": "k", "value": "v"},
    }
    append_lines(tmp_path, [cluster_config])
    code, text = run(["--data-dir", str(tmp_path), "log", "verify"])
    assert code == 0 and "clean: 3 entries in 1 segments" in text
    segment = tmp_path / "log" / f"{0:020d}.avro"
    header_size = Segment.open_header(segment, 0).header.size
    data = bytearray(segment.read_bytes())
    # Damage the first block's data; a valid block follows, so this is not a torn tail.
    data[header_size + 6] ^= 0x10
    segment.write_bytes(bytes(data))
    code, text = run(["--data-dir", str(tmp_path), "--output", "json", "log", "verify"])
    report = json.loads(text)
    assert code == 1 and report["ok"] is False
    assert f"damaged at byte {header_size}" in report["segments"][0]["error"]
    # Reading reaches the damage and fails with one line (exit 1); a writer refuses to open.
    code, _ = run(["--data-dir", str(tmp_path), "log", "dump"])
    assert code == 1 and "is damaged at byte" in capsys.readouterr().err
    code, _ = run(["--data-dir", str(tmp_path), "log", "append"], json.dumps(RECORDS[0]))
    assert code == 1 and "is damaged at byte" in capsys.readouterr().err
    assert segment.read_bytes() == bytes(data)


def test_segments_lists_offsets(tmp_path: Path) -> None:
    append_lines(tmp_path, RECORDS)
    code, text = run(["--data-dir", str(tmp_path), "--output", "json", "log", "segments"])
    assert code == 0
    (segment,) = json.loads(text)
    assert segment["segment"] == f"{0:020d}.avro"
    assert segment["base_offset"] == 0 and segment["next_offset"] == 2


def test_settings_precedence_and_validation(tmp_path: Path) -> None:
    env = {"MLOG_DATA_DIR": "/from/env", "MLOG_OUTPUT": "json", "MLOG_SEGMENT_BYTES": "1048576"}
    settings = load_settings(env=env)
    assert settings.data_dir == Path("/from/env") and settings.output == "json"
    assert settings.log.segment_bytes == 1048576
    assert settings.log_dir == Path("/from/env/log")
    flagged = load_settings(data_dir=str(tmp_path), output="table", env=env)
    assert flagged.data_dir == tmp_path and flagged.output == "table"
    assert load_settings(env={}).data_dir == Path("./mlog-data")
    with pytest.raises(SettingsError, match="MLOG_SEGMENT_BYTES"):
        load_settings(env={"MLOG_SEGMENT_BYTES": "big"})
    with pytest.raises(LogConfigError, match=r"segment\.bytes must be at least"):
        load_settings(env={"MLOG_SEGMENT_BYTES": "10"})
    with pytest.raises(SettingsError, match="output format"):
        load_settings(env={"MLOG_OUTPUT": "yaml"})
    assert load_settings(env={}).snapshot_max_chain == 8
    assert load_settings(env={"MLOG_SNAPSHOT_MAX_CHAIN": "0"}).snapshot_max_chain == 0
    for bad in ("-1", "9", "many"):
        with pytest.raises(SettingsError, match="MLOG_SNAPSHOT_MAX_CHAIN"):
            load_settings(env={"MLOG_SNAPSHOT_MAX_CHAIN": bad})
    assert load_settings(env={}).snapshot_retention_bytes is None
    for value, bound in (("-1", None), ("0", 0), ("20000000", 20_000_000)):
        env = {"MLOG_SNAPSHOT_RETENTION_BYTES": value}
        assert load_settings(env=env).snapshot_retention_bytes == bound
    for bad in ("-2", "1e9", "lots", str(-(2**63))):
        with pytest.raises(SettingsError, match="MLOG_SNAPSHOT_RETENTION_BYTES"):
            load_settings(env={"MLOG_SNAPSHOT_RETENTION_BYTES": bad})


@pytest.mark.process
def test_bad_flag_values_exit_nonzero_with_one_line(tmp_path: Path) -> None:
    for args in (["log", "dump", "--gt", "x"], ["log", "dump", "--limit", "-3"], ["log", "nope"]):
        proc = subprocess.run(
            [sys.executable, "-m", "api.cli", "--data-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr


@pytest.mark.process
def test_console_script_runs_and_writer_lock_is_reported(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "mlog"
    if not script.exists():
        pytest.skip("the mlog console script is installed by `make test`")
    env = {**os.environ, "MLOG_DATA_DIR": str(tmp_path)}
    record = ConfigRecord(
        resource_type=ConfigResourceType.BROKER, resource_name="", name="k", value="v"
    )
    with MetadataLog.open(tmp_path / "log") as log:
        log.append([record])
        proc = subprocess.run(
            [str(script), "log", "append"],
            input=json.dumps(RECORDS[0]),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 2
        assert f"pid {os.getpid()}" in proc.stderr and "Traceback" not in proc.stderr
        dump = subprocess.run(
            [str(script), "log", "dump"], capture_output=True, text=True, env=env, check=False
        )
        assert dump.returncode == 0 and "CONFIG_RECORD" in dump.stdout


@pytest.mark.process
def test_dump_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    lines = [
        {
            "type": "CONFIG_RECORD",
            "data": {"resource_type": "BROKER", "resource_name": "", "name": "k", "value": str(i)},
        }
        for i in range(5000)
    ]
    append_lines(tmp_path, lines)
    dump = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "--data-dir", str(tmp_path), "log", "dump"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert dump.stdout is not None and dump.stderr is not None
    dump.stdout.readline()
    dump.stdout.close()  # like `| head -1`
    assert dump.wait(timeout=60) == 0
    assert dump.stderr.read() == b""


def test_tables_align_wide_characters_by_display_width() -> None:
    out = io.StringIO()
    print_table([["org:数据", "1"], ["abc", "22"], ["e\u0301", "3"]], ["namespace", "topics"], out)
    lines = out.getvalue().splitlines()
    # The second column starts at the same terminal column on every line.
    starts = [display_width(line[: line.rindex(" ") + 1]) for line in lines]
    assert starts == [11, 11, 11, 11]
    assert display_width("数据") == 4 and display_width("e\u0301") == 1
