"""A failed command leaves nothing it created, and never touches what was there before."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.cli.created_paths import removed_on_failure
from tests.support.cli import mlog, ok


class Failed(Exception):
    """The command's failure."""


def test_a_failure_removes_the_directories_made_for_the_path(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "data"
    with pytest.raises(Failed), removed_on_failure(path):
        (path / "log").mkdir(parents=True)
        (path / "log" / "segment").write_text("x")
        raise Failed
    assert not (tmp_path / "a").exists()
    assert list(tmp_path.iterdir()) == []


def test_what_existed_stays_and_a_success_keeps_what_it_made(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine").write_text("old")
    with pytest.raises(Failed), removed_on_failure(tmp_path / "data"):
        (tmp_path / "data" / "new").write_text("x")
        raise Failed
    assert (tmp_path / "data" / "mine").read_text() == "old"
    with removed_on_failure(tmp_path / "made"):
        (tmp_path / "made").mkdir()
    assert (tmp_path / "made").is_dir()


def test_once_kept_a_later_failure_or_ctrl_c_removes_nothing(tmp_path: Path) -> None:
    for failure in (Failed, KeyboardInterrupt):
        path = tmp_path / failure.__name__
        with pytest.raises(failure), removed_on_failure(path) as keep:
            path.mkdir()
            keep()  # a server that served: its log holds acknowledged writes
            raise failure
        assert path.is_dir()


def test_a_new_file_goes_and_a_ctrl_c_is_a_failure(tmp_path: Path) -> None:
    database = tmp_path / "snapshots.db"
    with pytest.raises(KeyboardInterrupt), removed_on_failure(database):
        database.write_text("half made")
        raise KeyboardInterrupt
    assert not database.exists()


FAILING = {
    "log import of a missing file": ["log", "import", "--file", "/nonexistent/export.jsonl"],
    "log import of no blocks": ["log", "import", "--file", "/dev/null"],
    "serve on a listener that cannot bind": ["serve", "--listen", "192.0.2.1:9092"],
}
"""Commands that make a data directory on the way, failing after it was made."""


@pytest.mark.parametrize("args", FAILING.values(), ids=FAILING.keys())
def test_a_failed_command_leaves_no_data_directory(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "new" / "data"
    code, _ = mlog(data_dir, *args)
    assert code == 2
    assert "mlog: error: " in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_a_failed_import_into_an_empty_directory_leaves_it_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    code, _ = mlog(tmp_path, "log", "import", "--file", "/nonexistent/export.jsonl")
    assert code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]


def test_an_import_that_succeeds_is_kept(tmp_path: Path) -> None:
    source = tmp_path / "source"
    ok(source, "brokers", "register", "--id", "1")
    export = tmp_path / "export.jsonl"
    ok(source, "log", "export", "--file", str(export))
    ok(tmp_path / "copy", "log", "import", "--file", str(export))
    assert "REGISTER_BROKER_RECORD" in ok(tmp_path / "copy", "log", "dump")
