"""Servers forked from the worker's zygote behave as `mlog serve` processes do."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.serve_forks import ForkedProcess, Zygote, _exit_code, spawn_serve
from tests.support.server_process import serving_address

pytestmark = pytest.mark.process


def _serve(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> ForkedProcess:
    stderr = tmp_path / "stderr.txt"
    args = ["serve", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0", *options]
    process = spawn_serve(args, stderr=stderr, env=env)
    assert isinstance(process, ForkedProcess)
    return process


def test_a_forked_server_serves_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    process = _serve(tmp_path, env={**os.environ, "MLOG_MAX_CONNECTIONS": "77"})
    address = serving_address(process, tmp_path / "stderr.txt")
    assert address.startswith("127.0.0.1:")
    log = (tmp_path / "stderr.txt").read_text()
    assert "max.connections=77" in log  # the environment it was given, not the worker's
    assert process.poll() is None and process.returncode is None
    process.terminate()
    assert process.wait(60) == 0
    assert "stopped (SIGTERM)" in (tmp_path / "stderr.txt").read_text()


def test_kill_stop_and_exit_codes_are_those_of_a_process(tmp_path: Path) -> None:
    process = _serve(tmp_path)
    serving_address(process, tmp_path / "stderr.txt")
    process.send_signal(signal.SIGSTOP)
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.3)
    process.kill()
    assert process.wait(60) == -signal.SIGKILL
    process.kill()  # reaped: the zygote sends nothing (the pid may be another's by now)
    assert process.poll() == -signal.SIGKILL


def test_a_signal_that_does_not_exist_raises_and_the_zygote_serves_on(tmp_path: Path) -> None:
    process = _serve(tmp_path)
    serving_address(process, tmp_path / "stderr.txt")
    with pytest.raises(OSError, match="the serve zygote: "):
        process.send_signal(2**31 - 1)
    process.terminate()
    assert process.wait(60) == 0


def test_a_bad_flag_exits_2_with_the_cli_s_line(tmp_path: Path) -> None:
    process = spawn_serve(["serve", "--listen", "bad"], stderr=tmp_path / "err.txt")
    assert process.wait(60) == 2
    assert "argument --listen: 'bad' is not HOST:PORT" in (tmp_path / "err.txt").read_text()


def test_appending_keeps_the_earlier_lines(tmp_path: Path) -> None:
    stderr = tmp_path / "err.txt"
    stderr.write_text("earlier\n")
    process = spawn_serve(["serve", "--listen", "bad"], stderr=stderr, append=True)
    assert process.wait(60) == 2
    assert stderr.read_text().startswith("earlier\n")


def test_an_environment_that_changes_python_s_start_gets_a_new_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDEVMODE": "1"}
    process = spawn_serve(["serve", "--listen", "bad"], stderr=tmp_path / "err.txt", env=env)
    assert isinstance(process, subprocess.Popen)
    assert process.wait(60) == 2


def test_another_checkout_s_code_gets_a_new_process(tmp_path: Path) -> None:
    process = spawn_serve(["serve", "--listen", "bad"], stderr=tmp_path / "err.txt", cwd=tmp_path)
    assert isinstance(process, subprocess.Popen)  # `python -m api.cli` there: its code first
    assert process.wait(60) == 2


def test_a_child_works_in_its_directory_and_closing_the_zygote_ends_it(tmp_path: Path) -> None:
    zygote = Zygote()
    stderr = tmp_path / "err.txt"
    stderr.touch()
    args = ["serve", "--data-dir", "relative", "--listen", "127.0.0.1:0"]
    process = zygote.spawn(args, dict(os.environ), tmp_path, stderr)
    serving_address(process, stderr)
    assert (tmp_path / "relative").is_dir()
    zygote.close()
    deadline = time.monotonic() + 60
    while Path(f"/proc/{process.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{process.pid}").exists()


def test_a_killed_zygote_takes_its_servers_along_and_a_wait_says_so(tmp_path: Path) -> None:
    zygote = Zygote()
    stderr = tmp_path / "err.txt"
    stderr.touch()
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0"]
    process = zygote.spawn(args, dict(os.environ), tmp_path, stderr)
    serving_address(process, stderr)
    os.kill(zygote.pid, signal.SIGKILL)
    with pytest.raises(AssertionError, match=r"the serve zygote \(pid \d+\) ended"):
        process.wait(60)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{process.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{process.pid}").exists()  # not left serving, unwatched
    zygote.close()


def test_a_child_that_exits_through_system_exit_gets_its_code() -> None:
    assert _exit_code(SystemExit()) == 0
    assert _exit_code(SystemExit(3)) == 3
    assert _exit_code(SystemExit("a message")) == 1
