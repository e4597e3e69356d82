"""Every read command of `mlog` leaves the data directory as it found it.

A read command on a data directory without `snapshots.db` used to create it (0644 under umask
022): SQLite makes the file it is asked to open. The sweep runs each read command on a data
directory with a log and no snapshot database, and on one with no log directory, and compares
a full listing (paths, sizes, modes, mtimes) before and after.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import mlog, ok

Listing = dict[str, tuple[int, int, int]]

READ_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("brokers", "list"),
    ("topics", "list"),
    ("topics", "describe"),
    ("topics", "describe", "--topic", "orders"),
    ("configs", "describe", "--cluster"),
    ("configs", "describe", "--topic", "orders"),
    ("partitions", "list-reassignments"),
    ("namespaces", "list"),
    ("acls", "list"),
    ("users", "list"),
    ("features", "describe"),
    ("image", "show"),
    ("image", "show", "/topics"),
    ("image", "show", "--at-offset", "2"),
    ("image", "diff", "--from", "1"),
    ("history", "--topic", "orders"),
    ("history", "--broker", "1"),
    ("log", "dump"),
    ("log", "verify"),
    ("log", "segments"),
    ("log", "export"),
    ("db", "current"),
    ("db", "check"),
    ("snapshot", "list"),
    ("snapshot", "show", "1"),
    ("snapshot", "verify"),
    ("quorum", "describe"),
    ("status", "--metrics-server", "127.0.0.1:1"),
    ("log", "prove", "--digest", "not-a-digest"),
    ("shell",),
)


def listing(root: Path) -> Listing:
    """Every path under `root` (itself included): (size, mode, mtime in ns)."""
    found: Listing = {}
    for directory, dirs, files in os.walk(root):
        for name in (".", *dirs, *files):
            path = Path(directory, name)
            st = path.lstat()
            found[str(path.relative_to(root))] = (
                st.st_size if not path.is_dir() else 0,
                st.st_mode,
                st.st_mtime_ns,
            )
    return found


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="module")
def with_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a log (brokers, a topic, a user) and no snapshot database."""
    data_dir = tmp_path_factory.mktemp("read-only") / "data"
    ok(data_dir, "brokers", "register", "--id", "1", "--rack", "a")
    ok(data_dir, "brokers", "register", "--id", "2", "--rack", "b")
    ok(data_dir, "topics", "create", "--topic", "orders", "--partitions", "2")
    ok(
        data_dir,
        "users",
        "scram-set",
        "--name",
        "alice",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-stdin",
        stdin="secret-password\n",
    )
    assert not (data_dir / "snapshots.db").exists()
    return data_dir


@pytest.mark.usefixtures("umask_022")
@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_a_read_command_creates_no_file_beside_a_log(
    with_log: Path, command: tuple[str, ...]
) -> None:
    before = listing(with_log.parent)
    code, _ = mlog(with_log, *command, stdin="exit\n")
    assert listing(with_log.parent) == before, f"exit {code}"


@pytest.mark.usefixtures("umask_022")
def test_log_digest_writes_only_its_private_merkle_index(with_log: Path) -> None:
    # The one read command with a cache of its own on disk (metadata_log/merkle.py): the
    # index a digest or proof extends, so the next one does not rehash the log.
    before = listing(with_log.parent)
    ok(with_log, "log", "digest")
    after = listing(with_log.parent)
    changed = {path for path in after if after[path] != before.get(path)}
    assert changed - {"data/log"} == {p for p in after if p.startswith("data/log/merkle")}
    assert all(after[p][1] & 0o077 == 0 for p in changed)
    assert {p for p in before if p not in after} == set()


@pytest.mark.usefixtures("umask_022")
@pytest.mark.parametrize("command", (*READ_COMMANDS, ("log", "digest")), ids=" ".join)
def test_a_read_command_creates_no_file_without_a_log(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    before = listing(tmp_path)
    code, _ = mlog(data_dir, *command, stdin="exit\n")
    assert listing(tmp_path) == before, f"exit {code}"


def test_without_a_snapshot_database_reads_answer_from_the_log(with_log: Path) -> None:
    assert json.loads(ok(with_log, "--output", "json", "snapshot", "list")) == []
    assert "no snapshots" in ok(with_log, "snapshot", "verify")
    current = json.loads(ok(with_log, "--output", "json", "db", "current"))
    assert current["state"] == "empty" and current["revision"] is None
    topics = json.loads(ok(with_log, "--output", "json", "topics", "list"))
    assert "orders" in json.dumps(topics)
    assert not (with_log / "snapshots.db").exists()


@pytest.mark.usefixtures("umask_022")
@pytest.mark.parametrize("command", (*READ_COMMANDS, ("log", "digest")), ids=" ".join)
def test_a_read_command_creates_no_missing_data_directory(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    mlog(tmp_path / "missing", *command, stdin="exit\n")
    assert list(tmp_path.iterdir()) == []
