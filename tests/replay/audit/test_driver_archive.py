"""The class-data-sharing archive of Spark's driver: built as the background build runs it,
published only once a driver mapped it, dropped when a driver cannot start with it.

`test_audit_session.py` checks that a session's driver is given it (or starts its build), and
starts again without it when the JVM cannot map it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from replay.audit import driver_archive
from replay.audit.driver_archive import CRASH_REPORT, MODULE, VERIFY, drop_unusable
from replay.audit.parser_jvm import dump_and_publish
from replay.audit.session import java_option
from tests.support.driver_archives import plant_driver_archive


@pytest.mark.spark
@pytest.mark.process
def test_the_background_build_publishes_an_archive_a_driver_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `sharing_options` starts, run to its end: two training drivers (one writes the
    # archive as it exits, one must start with it under -Xshare:on), then the rename. Run
    # here rather than as `python -m`, which only lowers its priority first: at niceness 10
    # beside the rest of the suite the two drivers waited minutes for the cores.
    path = plant_driver_archive(monkeypatch, tmp_path / "cache", None)
    (lock := path.with_name(path.name + ".lock")).touch()  # as the starter leaves it
    monkeypatch.chdir(tmp_path)
    assert driver_archive.build(path)
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


def test_dropping_an_unusable_archive_keeps_every_other_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = plant_driver_archive(monkeypatch, tmp_path / "cache", b"cut short")
    ours = driver_archive.sharing_options()
    assert ours.split() == [VERIFY, CRASH_REPORT, f"-XX:SharedArchiveFile={archive}"]
    log4j = "-Dlog4j2.configurationFile=file:/x"
    assert drop_unusable(f"{log4j} {ours} -Xmx2g") == f"{log4j} -Xmx2g"
    assert not archive.exists()
    assert drop_unusable(f"{log4j} -Xmx2g") is None  # nothing of ours: not ours to retry
    assert drop_unusable("") is None
    # An archive someone named in their own options is theirs: kept, and no retry.
    theirs = tmp_path / "theirs.jsa"
    theirs.write_bytes(b"their archive")
    archive.write_bytes(b"ours")
    assert drop_unusable(f"{log4j} -XX:SharedArchiveFile={theirs}") is None
    assert theirs.exists() and archive.exists()


def test_a_cache_directory_with_a_space_is_quoted_for_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spark splits extraJavaOptions at whitespace: an unquoted path with a space stopped every
    # driver from starting (a home directory such as /Users/Jane Doe), the retry too.
    archive = plant_driver_archive(monkeypatch, tmp_path / "my cache")
    ours = driver_archive.sharing_options()
    assert ours.endswith(f' "-XX:SharedArchiveFile={archive}"')
    assert drop_unusable(f"-Da=1 {ours}") == "-Da=1" and not archive.exists()
    assert java_option('-Dx=a "b" \\c') == '"-Dx=a \\"b\\" \\\\c"'
    assert java_option("-Xmx2g") == "-Xmx2g"


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


def test_no_build_starts_on_a_nearly_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A build fills its draft (~160 MB) before it knows it fails: with less than
    # BUILD_MIN_FREE_BYTES free none starts, and the audit runs without an archive.
    import shutil

    from replay.audit import parser_jvm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    started: list[list[str]] = []
    monkeypatch.setattr("subprocess.Popen", lambda argv, **_: started.append(argv))
    usage = shutil.disk_usage(tmp_path)
    nearly_full = usage._replace(free=parser_jvm.BUILD_MIN_FREE_BYTES - 1)
    monkeypatch.setattr("shutil.disk_usage", lambda path: nearly_full)
    assert driver_archive.sharing_options() == ""
    assert started == [] and list((tmp_path / "cache" / "mlog").iterdir()) == []
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage)
    assert driver_archive.sharing_options() == ""
    assert [argv[1:3] for argv in started] == [["-m", MODULE]]  # room enough: it starts
