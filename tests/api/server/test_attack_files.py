"""Attacks of issue #31 on the data directory: finding 7's file modes.

Before the fix, under the usual umask 022, the segments, their indexes and checkpoints,
`snapshots.db` and `meta.properties` were 0644 in 0755 directories: any local user could read
the SCRAM records and every ACL. Now what the server creates there is 0600 in 0700
directories whatever the umask, and `mlog serve` warns once about older loose files.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.cli.serve import cluster_identity, warn_loose_files
from metadata_log.private_files import loose_paths
from tests.support.cli import mlog


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode)
        for p in (root, *root.rglob("*"))
    }


@pytest.mark.usefixtures("loose_umask")
def test_what_the_server_writes_only_its_user_may_read(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cluster_identity(data_dir, None)  # meta.properties, as `mlog serve` writes it
    code, text = mlog(
        data_dir,
        "users",
        "scram-set",
        "--name",
        "admin",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password-stdin",
        stdin="admin-secret\n",
    )
    assert code == 0, text
    code, text = mlog(data_dir, "snapshot", "create")
    assert code == 0, text
    modes = _modes(data_dir)
    names = {Path(name).name for name in modes}
    assert {"meta.properties", "snapshots.db", "log"} <= names
    assert any(name.endswith(".avro") for name in names), names
    loose = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert loose == {}
    assert loose_paths(data_dir) == []


def test_serve_warns_once_about_older_loose_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True, mode=0o700)
    data_dir.chmod(0o700)
    old = data_dir / "log" / "00000000000000000000.avro"
    old.write_bytes(b"")
    old.chmod(0o644)
    logger = logging.getLogger("test.serve")
    with caplog.at_level(logging.WARNING, logger="test.serve"):
        warn_loose_files(data_dir, logger)
    (line,) = [r.getMessage() for r in caplog.records]
    assert str(old) in line and "chmod -R go-rwx" in line
    assert stat.S_IMODE(old.stat().st_mode) == 0o644  # not changed behind the operator's back
