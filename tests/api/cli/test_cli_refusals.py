"""A refused command writes nothing, even on a data directory that does not exist yet."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from api.cli.main import main


def _run(args: list[str]) -> int:
    return main(args, out=io.StringIO())


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "create", "--topic", "orders"],  # no broker is registered
        ["topics", "create", "--topic", "__cluster_metadata", "--validate-only"],
        ["topics", "delete", "--topic", "nope"],
        ["brokers", "fence", "--id", "7"],
        ["namespaces", "delete", "--namespace", "nope"],
        ["topics", "create", "--topic", "ok", "--validate-only"],
    ],
    ids=" ".join,
)
def test_a_refused_command_on_a_new_directory_creates_nothing(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "new"
    code = _run(["--data-dir", str(data_dir), *args])
    assert code == 2
    assert not data_dir.exists()
    err = capsys.readouterr().err
    assert err.startswith("mlog: error: ") and len(err.strip().splitlines()) == 1


def test_the_first_accepted_command_still_bootstraps_the_log(tmp_path: Path) -> None:
    data_dir = tmp_path / "new"
    assert _run(["--data-dir", str(data_dir), "brokers", "register", "--id", "1"]) == 0
    out = io.StringIO()
    assert main(["--data-dir", str(data_dir), "log", "dump"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "FEATURE_LEVEL_RECORD" in lines[0] and "REGISTER_BROKER_RECORD" in lines[1]


def test_history_takes_namespace_with_topic_and_names_a_bad_broker_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--data-dir", str(tmp_path)]
    assert _run([*base, "brokers", "register", "--id", "1"]) == 0
    assert _run([*base, "namespaces", "create", "--namespace", "org"]) == 0
    assert _run([*base, "topics", "create", "--topic", "ev", "--namespace", "org"]) == 0
    out = io.StringIO()
    assert main([*base, "history", "--topic", "ev", "--namespace", "org"], out=out) == 0
    assert "created topic org:ev" in out.getvalue()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*base, "history", "--broker", "abc"], out=io.StringIO())
    assert exited.value.code == 2
    assert "'abc' is not a broker id" in capsys.readouterr().err
