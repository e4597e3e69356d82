"""The class-data-sharing archive of Spark's driver: built as the background build runs it,
published only once a driver mapped it, dropped when a driver cannot start with it.

`test_audit_session.py` checks that a session's driver is given it (or starts its build), and
starts again without it when the JVM cannot map it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from replay.audit import driver_archive
from replay.audit.driver_archive import CRASH_REPORT, MODULE, VERIFY, drop_unusable
from replay.audit.parser_jvm import dump_and_publish


@pytest.mark.spark
@pytest.mark.process
def test_the_background_build_publishes_an_archive_a_driver_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `sharing_options` starts, run to its end: two training drivers (one writes the
    # archive as it exits, one must start with it under -Xshare:on), then the rename.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = driver_archive.archive()
    assert path is not None and path.is_relative_to(tmp_path / "cache")
    path.parent.mkdir(parents=True)
    (lock := path.with_name(path.name + ".lock")).touch()  # as the starter leaves it
    done = subprocess.run(
        [sys.executable, "-m", MODULE, str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard: two Spark starts
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert path.stat().st_size > 1 << 20
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no draft, no lock
    assert not lock.exists()
    assert driver_archive.sharing_options().endswith(f"-XX:SharedArchiveFile={path}")
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]  # nothing left where it ran


def test_a_build_whose_driver_fails_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained: list[str] = []

    def train(log_dir: Path, options: str) -> bool:
        trained.append(options)
        return "ArchiveClassesAtExit" in options  # the dump runs, the check does not pass

    monkeypatch.setattr(driver_archive, "_train", train)
    path = tmp_path / "cache" / "spark-driver-x.jsa"
    assert driver_archive.build(path) is False
    assert [o.split("=")[0] for o in trained] == [
        "-XX:ArchiveClassesAtExit",
        "-Xshare:on -XX:SharedArchiveFile",
    ]
    assert list(path.parent.iterdir()) == []


def test_dropping_an_unusable_archive_keeps_every_other_option(tmp_path: Path) -> None:
    archive = tmp_path / "spark-driver-x.jsa"
    archive.write_bytes(b"cut short")
    log4j = "-Dlog4j2.configurationFile=file:/x"
    named = f"{log4j} {VERIFY} {CRASH_REPORT} -XX:SharedArchiveFile={archive} -Xmx2g"
    assert drop_unusable(named) == f"{log4j} -Xmx2g"
    assert not archive.exists()
    assert drop_unusable(f"{log4j} -Xmx2g") is None  # nothing of ours: not ours to retry
    assert drop_unusable("") is None


def test_a_published_archive_leaves_the_two_newest_of_its_kind(tmp_path: Path) -> None:
    # Each install of the jars is another digest: without pruning, the cache would keep an
    # archive (~160 MB) for every install it ever saw. Other kinds and other files stay.
    cache = tmp_path / "mlog"
    cache.mkdir()
    old = [cache / f"spark-driver-{n:020x}.jsa" for n in range(3)]
    for age, path in enumerate(old):
        path.write_bytes(b"old")
        os.utime(path, ns=(10**18 + age, 10**18 + age))
    parser = cache / f"spark-sql-parser-{0:020x}.jsa"
    parser.write_bytes(b"another kind")
    stray = cache / "spark-driver-notes.txt"
    stray.write_text("not an archive")
    new = cache / f"spark-driver-{9:020x}.jsa"

    def train(options: list[str]) -> bool:
        if options[0].startswith("-XX:ArchiveClassesAtExit="):
            Path(options[0].split("=", 1)[1]).write_bytes(b"dumped")
        return True

    assert dump_and_publish(new, train)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [new.name, old[2].name, parser.name, stray.name]
    )
    assert new.read_bytes() == b"dumped"
