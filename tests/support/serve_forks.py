"""`mlog serve` processes forked from a parent that imported the server once (a zygote).

A `mlog serve` start is mostly imports (the server, kio, SQLAlchemy, Alembic: about a second
of CPU on this host), and the suite starts about two hundred servers. Each pytest worker
keeps one zygote: a single-threaded Python process that imported all of that and then only
forks. Its children run the CLI's own `main(["serve", ...])` with the environment, working
directory and stderr file they were given, so a test gets a real process of its own to
SIGKILL, SIGSTOP or cut off, as before, for a tenth of the CPU.

What a fork shares that new processes would not: values drawn when a module is imported (the
SCRAM fake-salt key, `api/security/scram.py`) are the zygote's, the same in each of its
servers; no test compares them between servers. `random` is reseeded in each child (Python
does it at fork), and every per-server secret is drawn at run time.

The zygote is the children's parent: it reaps them and reports each exit status, and it
delivers signals to them (a pid it has not reaped yet is still its child, so a signal never
reaches a process that reused the pid). Its children die with it (`PR_SET_PDEATHSIG`): a
zygote killed under a test takes its servers along, and waiting on one raises at once.
`ForkedProcess` offers the part of `subprocess.Popen` the tests use. `spawn_serve` falls back
to a plain `Popen` where a fork would not behave as a new interpreter: another checkout's code,
or an environment that changes how Python starts; and for every server with
`MLOG_TEST_SERVE_FORKS=0` (to tell whether a failure is the fork's).

Run as `python -m tests.support.serve_forks STDOUT_FD`: the zygote itself (requests on stdin,
one JSON object a line; answers and exits on stdout).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from tests.support.paths import REPO

PRELOADED = (
    "api.cli.main",
    "api.cli.serve",
    "api.server.server",
    "api.server.config",
    "api.server.listeners",
    "api.server.event_loop",
    "api.server.server_log",
    "api.service.archiving",
    "api.service.gc_policy",
    "api.service.replicated",
    "api.service.snapshot_runners",
    "api.service.snapshots",
    "api.raft.node",
    "api.raft.voter_blocks",
    "api.client.admin",
    "replay.sql.store",
    "replay.sql.schema",
)
"""What a server imports by the time it serves (the last two: its snapshots' warm-up)."""

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a child gets when its parent dies (a server never outlives its zygote)."""

STARTUP_VARIABLES = ("PYTHON", "LD_", "MLOG_NO_EXTENSION")
"""Environment variables (prefixes) read when an interpreter starts or a module is imported:
a child whose environment changes one of them from the zygote's is started as a new process."""


class ChildProcess(Protocol):
    """What the tests use of a server's process: `subprocess.Popen` or `ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | Any: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def terminate(self) -> None: ...


def spawn_serve(
    args: Sequence[str],
    *,
    stderr: Path,
    append: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
) -> ChildProcess:
    """`mlog ARGS...` (a `serve`), its stderr written to the file `stderr` (appended to with
    `append`): forked from this worker's zygote, or a new process where a fork would differ."""
    environment = dict(os.environ if env is None else env)
    forks = os.environ.get("MLOG_TEST_SERVE_FORKS", "1") != "0"
    if not forks or cwd.resolve() != REPO or _startup_differs(environment):
        with stderr.open("a" if append else "w") as err:
            command = [sys.executable, "-m", "api.cli", *args]
            return subprocess.Popen(command, stderr=err, env=environment, cwd=cwd)
    stderr.open("a" if append else "w").close()  # there when this returns, as with Popen
    return _zygote().spawn(list(args), environment, cwd, stderr)


def _startup_differs(env: Mapping[str, str]) -> bool:
    def startup(variables: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in variables.items() if k.startswith(STARTUP_VARIABLES)}

    return startup(env) != startup(os.environ)


class ForkedProcess:
    """A child of the zygote, used as a `subprocess.Popen` is (the part the tests use)."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = args

    @property
    def returncode(self) -> int | None:
        """The exit code once the zygote reported it (minus the signal that ended it)."""
        return self._zygote.exit_code(self.pid)

    def poll(self) -> int | None:
        """The exit code if the process has ended, else None (without waiting)."""
        self._zygote.collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end; its exit code. `subprocess.TimeoutExpired` past
        `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.returncode) is None:
            left = 0.5 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._zygote.collect(min(left, 0.5))
        return code

    def send_signal(self, sig: int) -> None:
        """Send `sig`, unless the process has already been reaped (as `Popen` does)."""
        self._zygote.signal(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)


class Zygote:
    """The test side of one zygote: requests go down its stdin, answers come up its stdout."""

    def __init__(self) -> None:
        stdout = os.dup(1)  # the children's stdout: the worker's, as a Popen child's would be
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.serve_forks", str(stdout)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=REPO,
                pass_fds=(stdout,),
            )
        finally:
            os.close(stdout)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        self._answers = self._process.stdout.fileno()
        self._buffer = b""
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        self._replies: dict[int, dict[str, Any]] = {}
        self._asked = 0
        self.pid = self._process.pid
        self._next_reply(0, 120.0)  # imported: ready to fork

    def spawn(self, args: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> ForkedProcess:
        """Fork a child running `main(args)`, appending to the file `stderr`."""
        request = {"spawn": args, "env": env, "cwd": str(cwd), "stderr": str(stderr)}
        started = self._ask(request)
        return ForkedProcess(self, int(started["pid"]), args)

    def signal(self, pid: int, sig: int) -> None:
        """Have the zygote send `sig` to its child `pid` (nothing if it was reaped)."""
        self._ask({"signal": pid, "number": int(sig)})

    def alive(self) -> bool:
        """Whether the zygote still runs."""
        return self._process.poll() is None

    def exit_code(self, pid: int) -> int | None:
        """The child's exit code, if its end was reported."""
        return self._exits.get(pid)

    def collect(self, timeout: float) -> None:
        """Read the reports that arrive within `timeout` seconds (or are there already)."""
        with self._lock:
            self._read(timeout)

    def close(self) -> None:
        """End the zygote: it kills the children still running, reaps them and exits."""
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(30)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._asked += 1
            asked = self._asked
            self._requests.write(json.dumps({**request, "id": asked}).encode() + b"\n")
            self._requests.flush()
        reply = self._next_reply(asked, 60.0)
        if "error" in reply:  # raised here, as Popen raises it: the zygote serves on
            raise OSError(f"the serve zygote: {reply['error']}")
        return reply

    def _next_reply(self, asked: int, timeout: float) -> dict[str, Any]:
        """The answer to request `asked` (0: the zygote's "ready")."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while (reply := self._replies.pop(asked, None)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self._process.poll() is not None:
                    raise AssertionError(f"the serve zygote did not answer request {asked}")
                self._read(min(left, 0.5))
            return reply

    def _read(self, timeout: float) -> None:
        """Read what the zygote wrote within `timeout` seconds (the lock held)."""
        if not select.select([self._answers], [], [], timeout)[0]:
            return
        chunk = os.read(self._answers, 1 << 16)
        if not chunk:  # its children died with it (PR_SET_PDEATHSIG): no exit code to wait for
            raise AssertionError(f"the serve zygote (pid {self.pid}) ended, and its servers too")
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "exited" in message:
                self._exits[int(message["exited"])] = int(message["code"])
            else:
                self._replies[int(message["id"])] = message


_zygote_lock = threading.Lock()
_zygotes: dict[int, Zygote] = {}
"""This process's zygote, by its pid (a process forked from a worker starts its own)."""


def _zygote() -> Zygote:
    with _zygote_lock:
        zygote = _zygotes.get(os.getpid())
        if zygote is None or not zygote.alive():
            zygote = _zygotes[os.getpid()] = Zygote()
            atexit.register(zygote.close)
        return zygote


# ---------------------------------------------------------------------- the zygote itself


def _preload() -> None:
    """Import what a server imports (kio without Hypothesis's hooks: `api.protocol`)."""
    for name in PRELOADED:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the imported modules stay shared with the children (no collector writes)


def _run_zygote(stdout_fd: int) -> None:
    """Fork a child per request until stdin ends; report each child's exit."""
    _preload()
    me = os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the children themselves
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    children: set[int] = set()
    answers = sys.stdout.buffer

    def answer(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message).encode() + b"\n")
        answers.flush()

    def reap() -> None:
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            children.discard(pid)
            answer({"exited": pid, "code": os.waitstatus_to_exitcode(status)})

    answer({"id": 0})
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                while True:
                    try:
                        if not os.read(wake_read, 512):
                            break
                    except BlockingIOError:
                        break
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:  # the worker closed us (or died): no server outlives it
                for pid in children:
                    os.kill(pid, signal.SIGKILL)
                while children:
                    pid, _ = os.waitpid(-1, 0)
                    children.discard(pid)
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                try:
                    if "spawn" in request:
                        pid = os.fork()
                        if pid == 0:
                            _child(
                                request, stdout_fd, (wake_read, wake_write, selector.fileno()), me
                            )
                        children.add(pid)
                        answer({"id": request["id"], "pid": pid})
                    else:
                        target = int(request["signal"])
                        if target in children:  # not reaped: the pid is still this child's
                            os.kill(target, int(request["number"]))
                        answer({"id": request["id"]})
                except (OSError, ValueError) as exc:  # no fork (EAGAIN), no such signal
                    answer({"id": request["id"], "error": str(exc)})
        reap()


def _child(
    request: dict[str, Any], stdout_fd: int, zygote_fds: tuple[int, ...], zygote: int
) -> None:
    """In the forked child: become `mlog serve` with the request's environment; never return."""
    code = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote:  # it died before that took hold (a reaper adopted us)
            os._exit(1)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in zygote_fds:  # its wake-up pipe and its selector
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(stdout_fd, 1)
        os.close(stdout_fd)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(err, 2)
        os.close(err)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        args: list[str] = request["spawn"]
        sys.argv = [str(REPO / "api" / "cli" / "__main__.py"), *args]
        from api.cli.main import main

        code = main(args)
    except SystemExit as exc:
        code = _exit_code(exc)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    """The exit code the interpreter gives a `SystemExit`: None is 0, a message is 1."""
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


if __name__ == "__main__":
    _run_zygote(int(sys.argv[1]))
