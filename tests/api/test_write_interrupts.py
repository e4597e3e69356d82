"""Ctrl-C around a write: held while it runs, and once it is answered the command finishes.

The interrupt is a real SIGINT, sent by a patched call at the exact step named (right after
the log's commit, right after the server's answer, while the command prints), so each case
is certain and none depends on timing.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.cli.interrupts import FINISHED_AFTER_WRITE, INTERRUPTED, INTERRUPTED_AFTER_WRITE
from api.client import AdminClient
from api.service.service import MetadataService
from api.targets import LocalTarget
from api.write_interrupts import one_command, writes_finish
from tests.support.cli import entries, mlog, ok
from tests.support.server_thread import running_server


@pytest.fixture(autouse=True)
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt), whatever the runner installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c() -> None:
    """Press Ctrl-C: SIGINT to this process (handled before the next Python instruction)."""
    os.kill(os.getpid(), signal.SIGINT)


def then_ctrl_c(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, then a Ctrl-C as soon as it returned."""

    def call(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        ctrl_c()
        return result

    return call


def commit_then_ctrl_c() -> Callable[..., Any]:
    """`MetadataService.execute`, then a Ctrl-C if it committed something."""
    original = MetadataService.execute

    def execute(service: MetadataService, *args: Any, **kwargs: Any) -> Any:
        before = service.image.provenance
        result = original(service, *args, **kwargs)
        if service.image.provenance != before:
            ctrl_c()
        return result

    return execute


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    ok(tmp_path, "brokers", "register", "--id", "1")
    return tmp_path


def test_a_ctrl_c_right_after_the_commit_lets_the_command_say_it_and_exit_0(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(MetadataService, "execute", commit_then_ctrl_c())
    capsys.readouterr()
    code, out = mlog(data_dir, "topics", "create", "--topic", "intr-1.2")
    assert code == 0
    assert out.startswith("created topic intr-1.2 ")
    assert capsys.readouterr().err.strip() == FINISHED_AFTER_WRITE
    monkeypatch.undo()
    # A script that retried only on failure does not retry; one that did would be told.
    code, _ = mlog(data_dir, "topics", "create", "--topic", "intr-1.2")
    assert code == 2
    assert "TOPIC_ALREADY_EXISTS" in capsys.readouterr().err


def test_a_ctrl_c_as_the_data_directory_closes_after_the_commit_is_noted_only(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Ctrl-C lands before the command printed anything: it still prints what it did.
    monkeypatch.setattr(LocalTarget, "close", then_ctrl_c(LocalTarget.close))
    capsys.readouterr()
    code, out = mlog(data_dir, "topics", "create", "--topic", "late")
    assert (code, out.split(" ")[:3]) == (0, ["created", "topic", "late"])
    assert capsys.readouterr().err.strip() == FINISHED_AFTER_WRITE


def test_a_second_ctrl_c_after_the_commit_ends_the_command_with_exit_0(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A command stuck after its write still ends at the second Ctrl-C; its change stands.
    monkeypatch.setattr(MetadataService, "execute", commit_then_ctrl_c())
    monkeypatch.setattr(LocalTarget, "close", then_ctrl_c(LocalTarget.close))
    before = entries(data_dir)
    capsys.readouterr()
    code, _ = mlog(data_dir, "topics", "create", "--topic", "twice")
    assert code == 0
    assert capsys.readouterr().err.strip() == INTERRUPTED_AFTER_WRITE
    assert entries(data_dir) > before


def test_a_ctrl_c_before_the_write_still_ends_the_command_with_130(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The service is open, nothing is written yet: the Ctrl-C ends the command there.
    monkeypatch.setattr(MetadataService, "open", then_ctrl_c(MetadataService.open))
    before = entries(data_dir)
    capsys.readouterr()
    code, _ = mlog(data_dir, "topics", "create", "--topic", "never")
    assert code == 130
    assert capsys.readouterr().err.strip() == INTERRUPTED
    assert entries(data_dir) == before


def test_a_ctrl_c_right_after_the_servers_answer_lets_the_command_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = AdminClient.create_topics

    async def answered_then_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        answer = await original(*args, **kwargs)
        ctrl_c()
        return answer

    monkeypatch.setattr(AdminClient, "create_topics", answered_then_ctrl_c)
    with running_server(tmp_path / "served" / "log", brokers=1) as server:
        capsys.readouterr()
        remote = ("--bootstrap-server", server.address)
        code, out = mlog(tmp_path / "none", "topics", "create", "--topic", "r1", *remote)
        assert code == 0
        assert out.startswith("created topic r1 ")
        assert capsys.readouterr().err.strip() == FINISHED_AFTER_WRITE
        monkeypatch.undo()
        code, out = mlog(tmp_path / "none", "topics", "list", *remote)
        assert code == 0 and "r1" in out.split()


def test_a_ctrl_c_before_the_servers_answer_ends_the_wait_with_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    async def never_answered(*args: Any, **kwargs: Any) -> Any:
        ctrl_c()
        await asyncio.sleep(3600)

    monkeypatch.setattr(AdminClient, "create_topics", never_answered)
    with running_server(tmp_path / "served" / "log", brokers=1) as server:
        capsys.readouterr()
        remote = ("--bootstrap-server", server.address)
        code, _ = mlog(tmp_path / "none", "topics", "create", "--topic", "r2", *remote)
        assert code == 130
        assert capsys.readouterr().err.strip() == INTERRUPTED


def test_outside_a_command_a_held_ctrl_c_is_raised_as_the_write_ends() -> None:
    # The Python API: no command to finish, so the program gets its Ctrl-C once it is safe.
    done = []
    with pytest.raises(KeyboardInterrupt), writes_finish():
        ctrl_c()
        done.append("written")
    assert done == ["written"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_command_puts_the_sigint_handler_back_when_it_ends() -> None:
    with one_command() as command:
        with writes_finish():
            pass
        assert command.settled
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with one_command() as command:
        assert not command.settled and command.noted == 0


def test_a_ctrl_c_as_log_truncate_cuts_lets_it_say_what_it_cut(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from metadata_log.repair import truncate_after

    ok(data_dir, "brokers", "register", "--id", "2")
    monkeypatch.setattr("api.cli.log.truncate_after", then_ctrl_c(truncate_after))
    capsys.readouterr()
    code, out = mlog(data_dir, "log", "truncate", "--after-offset", "1", "--force")
    assert code == 0
    assert out.startswith("the log now ends at offset 1\n")
    assert capsys.readouterr().err.strip() == FINISHED_AFTER_WRITE
    assert entries(data_dir) == 2
