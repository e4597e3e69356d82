"""Kafka's CLI conventions a new user relies on: flags named when mistyped, bootstrap lists."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.cli import mlog
from tests.support.server_thread import running_server


def _usage_error(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> str:
    capsys.readouterr()
    code, _ = mlog(data_dir, *args)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


def test_a_mistyped_global_flag_is_named_with_the_nearest_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(capsys, tmp_path, "--data-dri", "foo", "topics", "list")
    assert "unknown option --data-dri; did you mean --data-dir?" in err
    assert "invalid choice" not in err


def test_a_mistyped_command_flag_is_named_with_the_nearest_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(capsys, tmp_path, "topics", "create", "--topic", "t", "--partitons", "3")
    assert "unknown option --partitons; did you mean --partitions?" in err
    assert err.endswith("(see `mlog topics create --help`)")  # the command's own help
    err = _usage_error(capsys, tmp_path, "topics", "list", "--outptu", "json")
    assert "did you mean --output?" in err


def test_an_unknown_flag_with_nothing_near_is_named_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(capsys, tmp_path, "--xyzzy", "topics", "list")
    assert "unknown option --xyzzy (see" in err


def test_abbreviations_are_refused_and_values_are_not_taken_for_typos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No prefix is taken for a flag (as Kafka's tools); a value after `=` is not a flag.
    err = _usage_error(capsys, tmp_path, "--out=json", "topics", "list")
    assert "unknown option --out; did you mean --output?" in err
    err = _usage_error(capsys, tmp_path, "--output=json", "topics", "list")
    assert "there is no log" in err  # the flags were taken; the directory is empty
    err = _usage_error(capsys, tmp_path, "topics", "lst")
    assert "invalid choice: 'lst'" in err


def _closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_bootstrap_server_takes_a_list_and_uses_the_first_that_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"127.0.0.1:{_closed_port()}"
    with running_server(tmp_path / "served" / "log", brokers=1) as server:
        listed = f"{dead},{server.address}"
        code, text = mlog(tmp_path / "none", "brokers", "list", "--bootstrap-server", listed)
        assert code == 0 and "1" in text
        # The environment variable takes the same list.
        monkeypatch.setenv("MLOG_BOOTSTRAP_SERVER", f" {dead} , {server.address} ")
        code, _ = mlog(tmp_path / "none", "topics", "list")
        assert code == 0


def test_global_flags_go_before_the_verb_too(tmp_path: Path) -> None:
    # Kafka's tools take their flags in any order: `mlog brokers --bootstrap-server B list`.
    with running_server(tmp_path / "served" / "log", brokers=1) as server:
        code, text = mlog(
            tmp_path / "none", "brokers", "--bootstrap-server", server.address, "list"
        )
        assert code == 0 and "1" in text
        args = ("topics", "--output", "json", "--bootstrap-server", server.address, "list")
        code, text = mlog(tmp_path / "none", *args)
        assert code == 0 and text.strip() == "[]"


def test_a_bootstrap_list_none_answers_is_one_line_naming_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = f"127.0.0.1:{_closed_port()}", f"127.0.0.1:{_closed_port()}"
    err = _usage_error(
        capsys, tmp_path, "topics", "list", "--bootstrap-server", f"{first},{second}"
    )
    assert "no server of the bootstrap list answered" in err
    assert first in err and second in err
    err = _usage_error(capsys, tmp_path, "topics", "list", "--bootstrap-server", f"{first},nope")
    assert "'nope' is not HOST:PORT" in err


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:²", "127.0.0.1:٩٠٩٢", "\x01bad:9092", "bad host:9092", "127.0.0.1:0", ":9092"],
)
def test_a_hostile_bootstrap_address_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str
) -> None:
    err = _usage_error(capsys, tmp_path, "quorum", "describe", "--bootstrap-server", address)
    assert "is not HOST:PORT" in err and "Traceback" not in err
