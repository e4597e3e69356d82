"""`mlog db|snapshot|history|shell`, `image diff` and `image show --at-offset` end to end."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from metadata_log.reader import LogReader
from records.model import PartitionChangeRecord
from replay.delta import replay_records
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from tests.support.cli import mlog, ok


def as_json(data_dir: Path, *args: str) -> Any:
    return json.loads(ok(data_dir, "--output", "json", *args))


def fails(data_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _ = mlog(data_dir, *args)
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    ok(tmp_path, "brokers", "register", "--id", "1", "--rack", "a")
    ok(tmp_path, "brokers", "register", "--id", "2", "--rack", "b")
    ok(
        tmp_path,
        "topics",
        "create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
    )  # offsets 2-5
    return tmp_path


def test_snapshot_create_list_show_verify_delete(cluster: Path) -> None:
    created = as_json(cluster, "snapshot", "create")
    assert created["created"]
    assert created["offset"] == 6
    again = as_json(cluster, "snapshot", "create")
    assert not again["created"] and again["id"] == created["id"]
    ok(cluster, "topics", "delete", "--topic", "orders")
    second = as_json(cluster, "snapshot", "create")
    assert second["offset"] == 7
    listed = as_json(cluster, "snapshot", "list")
    assert [s["offset"] for s in listed] == [6, 7]
    assert [
        s["offset"] for s in as_json(cluster, "snapshot", "list", "--desc", "--limit", "1")
    ] == [7]
    table = ok(cluster, "snapshot", "list")
    assert table.splitlines()[0].split() == [
        "id",
        "offset",
        "epoch",
        "log",
        "time",
        "created",
        "records",
        "checksum",
        "kind",
        "bytes",
    ]
    sizes = [s["content_bytes"] for s in listed]
    assert all(isinstance(size, int) and size > 0 for size in sizes)
    assert table.splitlines()[1].split()[-1] == str(sizes[0])
    shown = as_json(cluster, "snapshot", "show", str(created["id"]))
    assert shown["rows"]["snapshot_partitions"] == 3
    assert "snapshot_partitions" in ok(cluster, "snapshot", "show", str(created["id"]))
    assert "ok" in ok(cluster, "snapshot", "verify")
    ok(cluster, "snapshot", "delete", str(created["id"]))
    assert [s["offset"] for s in as_json(cluster, "snapshot", "list")] == [7]


def test_a_damaged_snapshot_fails_verify_with_exit_1(cluster: Path) -> None:
    created = as_json(cluster, "snapshot", "create")
    with sqlite3.connect(cluster / "snapshots.db") as conn:
        conn.execute("UPDATE snapshot_partitions SET leader_epoch = 99 WHERE partition_id = 0")
    code, text = mlog(cluster, "snapshot", "verify", str(created["id"]))
    assert code == 1
    assert "DAMAGED" in text
    # Reads fall back to the log: the answer is still right.
    image = as_json(cluster, "image", "show", "/topics/byName/orders/0")
    assert image["/topics/byName/orders/0"]["leader_epoch"] == 0


def test_verify_checks_increments_against_the_log(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "payments", "--partitions", "2")
    with LogReader.open(cluster / "log") as log:
        base = load_image(log, lte=6)  # the fixture's cluster
        image = load_image(log, base=base)
    topic = image.topics.get_by_name("payments")
    assert topic is not None
    # Rows that match their checksum but are not the log's: only a replay tells.
    forged = replay_records(
        image,
        [PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=-1)],
        provenance=image.provenance,
    )
    with SnapshotStore(f"sqlite:///{cluster / 'snapshots.db'}") as store:
        full = store.write(base)
        good = store.write(image, base=(full, base))
        bad = store.write(forged, base=(full, base))
    assert good.base_id == bad.base_id == full.id
    code, text = mlog(cluster, "snapshot", "verify", str(good.id))
    assert code == 0, text
    assert f"increment on {full.id}): ok, equal to the log replayed to it" in text
    code, text = mlog(cluster, "snapshot", "verify")
    assert code == 1
    assert f"snapshot {bad.id} (offset {bad.offset}, increment on {full.id}): DIFFERS" in text
    checked = json.loads(mlog(cluster, "--output", "json", "snapshot", "verify")[1])
    assert [(c["id"], c["matches_replay"]) for c in checked] == [
        (full.id, True),
        (good.id, True),
        (bad.id, False),
    ]
    code, text = mlog(cluster, "snapshot", "verify", "--checksums-only")
    assert code == 0 and "DIFFERS" not in text
    listed = as_json(cluster, "snapshot", "list")
    assert [s["base_id"] for s in listed] == [None, full.id, full.id]
    shown = as_json(cluster, "snapshot", "show", str(good.id))
    assert shown["chain_length"] == 1
    rows = shown["rows"]
    assert rows["snapshot_changed_topics"] == rows["snapshot_topics"] == 1  # payments
    assert rows["snapshot_partitions"] == 2


def test_readme_query_finds_read_only_partitions(cluster: Path) -> None:
    ok(cluster, "snapshot", "create")
    with sqlite3.connect(cluster / "snapshots.db") as conn:
        conn.execute("UPDATE snapshot_partitions SET mode = 'READ_ONLY' WHERE partition_id = 1")
        rows = conn.execute(
            """
            SELECT t.name, p.partition_id, p.leader, p.replicas
            FROM snapshot_partitions p
            JOIN snapshot_topics t
              ON t.snapshot_id = p.snapshot_id AND t.topic_id = p.topic_id
            WHERE p.snapshot_id = 1 AND p.mode = 'READ_ONLY'
            ORDER BY t.name, p.partition_id
            """
        ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("orders", 1)]
    assert json.loads(rows[0][3]) == [2, 1] or json.loads(rows[0][3]) == [1, 2]


def test_image_show_at_offset_and_time_and_diff(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(cluster, "snapshot", "create")
    ok(cluster, "topics", "delete", "--topic", "orders")
    now = as_json(cluster, "image", "show", "/topics/byName")
    assert now == {"/topics/byName/": None}
    past = as_json(cluster, "image", "show", "--at-offset", "6", "/topics/byName/orders/id")
    topic_id = past["/topics/byName/orders/id"]
    log_time = as_json(cluster, "snapshot", "list")[0]["log_timestamp"]
    at_time = as_json(
        cluster, "image", "show", "--at-time", str(log_time), "/topics/byName/orders/id"
    )
    assert at_time == past
    changes = as_json(cluster, "image", "diff", "--from", "6", "--to", "7")
    assert changes["changes"] == [
        {"op": "-", "kind": "topic", "name": "orders", "id": topic_id, "changes": {}}
    ]
    text = ok(cluster, "image", "diff", "--from", "1", "--to", "6")
    assert f"+ topic orders (id {topic_id}): partitions 3" in text
    assert "+ broker 2" in text
    assert "- topic orders" not in ok(cluster, "image", "diff", "--from", "1")  # came and went
    assert "past the end of the log" in fails(cluster, capsys, "image", "show", "--at-offset", "99")
    assert "ISO-8601" in fails(cluster, capsys, "image", "diff", "--from", "last tuesday")
    code, _ = mlog(cluster, "image", "show", "--at-offset", "1", "--at-time", "5")
    assert code == 2  # argparse: not both


def test_history_lists_each_incarnation(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok(cluster, "topics", "delete", "--topic", "orders")
    ok(
        cluster,
        "topics",
        "create",
        "--topic",
        "orders",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        "--principal",
        "User:bob",
    )
    items = as_json(cluster, "history", "--topic", "orders")
    ids = [i["topic_id"] for i in items]
    assert len(set(ids)) == 2
    assert items[0]["description"].startswith("created topic orders with id")
    assert items[-1]["principal"] == "User:bob"
    by_id = as_json(cluster, "history", "--topic-id", ids[0])
    assert {i["topic_id"] for i in by_id} == {ids[0]}
    assert "registered broker 2" in ok(cluster, "history", "--broker", "2")
    assert ok(cluster, "history", "--namespace", "nothing").startswith(
        "no namespace had that name (nothing)"
    )
    assert len(as_json(cluster, "history", "--topic", "orders", "--limit", "2")) == 2
    assert "one entity" in fails(cluster, capsys, "history", "--topic", "a", "--broker", "1")
    assert "topic id" in fails(cluster, capsys, "history", "--topic-id", "nope")


def test_shell_commands(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ok(cluster, "shell", "-c", "ls /; cd /topics/byName/orders; pwd; cat 0; history")
    assert "topics/" in text
    assert "/topics/byName/orders\n" in text
    assert '"leader": ' in text
    assert "created topic orders" in text
    ok(cluster, "topics", "delete", "--topic", "orders")
    text = ok(
        cluster, "shell", "--at-offset", "6", "-c", "find orders; at 7; ls /topics/byName; diff 6"
    )
    assert "/topics/byName/orders/id" in text
    assert "now at offset 7" in text
    assert "- topic orders" in text
    help_text = ok(cluster, "shell", "-c", "help")
    assert "history" in help_text
    code, _ = mlog(cluster, "shell", "-c", "cat /nope")
    assert code == 2
    assert "no such path" in capsys.readouterr().err
    code, _ = mlog(cluster, "shell", "-c", "frobnicate")
    assert code == 2
    assert "help" in capsys.readouterr().err


def test_db_commands(tmp_path: Path) -> None:
    assert "no schema yet" in ok(tmp_path, "db", "current")
    code, _ = mlog(tmp_path, "db", "check")
    assert code == 1
    assert "upgraded from empty to" in ok(tmp_path, "db", "upgrade")
    assert "already at head" in ok(tmp_path, "db", "upgrade")
    assert as_json(tmp_path, "db", "current")["state"] == "current"
    assert as_json(tmp_path, "db", "check")["ok"] is True


def test_db_flag_and_environment_pick_the_database(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(tmp_path, "brokers", "register", "--id", "1")
    created = as_json(tmp_path, "--db", postgres_url, "snapshot", "create")
    assert created["created"]
    assert as_json(tmp_path, "snapshot", "list") == []  # the default SQLite file is another db
    monkeypatch.setenv("MLOG_DATABASE_URL", postgres_url)
    assert [s["id"] for s in as_json(tmp_path, "snapshot", "list")] == [created["id"]]


def test_bad_database_urls_and_ids_are_one_line_errors(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "not a database URL" in fails(cluster, capsys, "--db", "nonsense", "snapshot", "list")
    assert "cannot reach" in fails(
        cluster, capsys, "--db", "postgresql+psycopg://nobody@127.0.0.1:1/x", "snapshot", "list"
    )
    assert "no snapshot 42" in fails(cluster, capsys, "snapshot", "show", "42")
    code, _ = mlog(cluster, "snapshot", "show", "zero")
    assert code == 2


def test_writer_commands_survive_a_database_that_is_down(
    cluster: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = "postgresql+psycopg://nobody@127.0.0.1:1/x"
    ok(cluster, "--db", down, "brokers", "register", "--id", "3")
    assert "replaying the whole log" in caplog.text
    assert len(as_json(cluster, "brokers", "list")) == 3


def test_shell_through_a_server_without_a_data_directory_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLOG_BOOTSTRAP_SERVER", "127.0.0.1:1")
    code, _ = mlog(tmp_path / "nothing", "shell", "-c", "ls /")
    assert code == 2
    err = capsys.readouterr().err
    assert "`mlog shell` works on the data directory only, not through the server in " in err
    assert "there is no log in " in err and "give the data directory with --data-dir" in err


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
@pytest.mark.parametrize("command", [("snapshot", "create"), ("db", "upgrade")], ids=" ".join)
def test_the_snapshot_database_is_created_0600_whatever_the_umask(
    cluster: Path, umask: int, command: tuple[str, ...]
) -> None:
    old = os.umask(umask)
    try:
        ok(cluster, *command)
    finally:
        os.umask(old)
    made = [p for p in cluster.iterdir() if p.name.startswith("snapshots.db")]
    assert made
    assert {stat.S_IMODE(p.stat().st_mode) for p in made} == {0o600}
