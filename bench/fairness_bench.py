"""Fairness of `mlog serve` under a hostile or greedy connection, seen by a well-behaved probe.

Usage: python bench/fairness_bench.py [--seconds 30] [--topics 200] [--dir PATH]
                                      [--idle 2000] [--slowloris 300] [--repo PATH]

A server process (`mlog serve`, the real CLI, default limits) runs on a fresh data directory
with 3 brokers and `--topics` topics of 3 partitions, so that a Metadata answer for every topic
is the expensive request it is on a real cluster. A probe connection (this process, a blocking
socket) sends ApiVersions v3 and then Metadata v12 for every topic every 50 ms and records the
latency of each request (a failed one counts with the time it took). The phases, each
`--seconds` long, one after the other on one server (`--phases` chooses; the default is
baseline, reading, never-reading, baseline, crowd, baseline):

- baseline: the probe alone;
- reading: another process pipelines Metadata (every topic) on one connection as fast as it
  can and reads the answers;
- never-reading: the same, but it never reads an answer;
- crowd: `--idle` connections that send nothing and `--slowloris` ones that send a request
  one byte per second (from another process).

For each phase: the probe's p50, p99 and max latency, p99 against the baseline before it
(this machine's load drifts within minutes, hence a baseline on each side of the crowd), the
server's
RSS growth from the start of the phase to its highest sample (from /proc, every 100 ms) and
what the load process did. Targets (issue #18): with a pipeliner, probe p99 <= 50 ms, max <=
250 ms and RSS growth <= 100 MiB; the crowd moves the probe's p99 by at most 10 ms.

`--repo PATH` runs the server of another checkout (say, the code before a change, in a
temporary worktree) with this bench, for a before/after table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.protocol import codec
from api.server.limits import raise_open_file_limit
from tests.support.protocol_frames import recv_frame

PROBE_INTERVAL = 0.05
"""Seconds between the starts of two probe rounds (ApiVersions + Metadata)."""

CROWD_ACCEPT_WAIT = 3.0
"""Seconds the server is given to accept the crowd's connections (at most 1 ms each)."""


def api_versions(correlation_id: int) -> bytes:
    """An ApiVersions v3 request frame."""
    body = codec.build(
        codec.request_class(18, 3), client_software_name="probe", client_software_version="1"
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="probe")


def metadata_all(correlation_id: int) -> bytes:
    """A Metadata v12 request frame for every topic (what a client's metadata refresh asks)."""
    body = codec.build(
        codec.request_class(3, 12),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="probe")


def create_topics(correlation_id: int, names: list[str]) -> bytes:
    """A CreateTopics v7 request frame: 3 partitions each, replication factor 1."""
    topics = [
        {
            "name": n,
            "num_partitions": 3,
            "replication_factor": 1,
            "assignments": (),
            "configs": (),
        }
        for n in names
    ]
    body = codec.build(
        codec.request_class(19, 7), topics=topics, timeout=30_000, validate_only=False
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="probe")


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """The next answer on `sock`: correlation id and the frame (after the size)."""
    frame = recv_frame(sock)
    return struct.unpack_from(">i", frame, 0)[0], frame


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


# ---------------------------------------------------------------------------------- load roles


def role_pipeline(address: tuple[str, int], seconds: float, read: bool) -> dict[str, Any]:
    """Pipeline Metadata (every topic) on one connection for `seconds`; read answers or never."""
    sock = socket.create_connection(address)
    if not read:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(0.2)
    burst = b"".join(metadata_all(i) for i in range(500))
    deadline = time.monotonic() + seconds
    sent = 0
    answered = 0
    answered_bytes = 0
    stop = threading.Event()

    def reader() -> None:
        nonlocal answered, answered_bytes
        sock_r = sock.dup()
        sock_r.settimeout(1.0)
        buffer = bytearray()
        while not stop.is_set():
            try:
                chunk = sock_r.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            position = 0
            while len(buffer) - position >= 4:
                (size,) = struct.unpack_from(">i", buffer, position)
                if len(buffer) - position < 4 + size:
                    break
                position += 4 + size
                answered += 1
                answered_bytes += 4 + size
            del buffer[:position]
        sock_r.close()

    thread = threading.Thread(target=reader, daemon=True) if read else None
    if thread is not None:
        thread.start()
    view = memoryview(burst)
    offset = 0
    while time.monotonic() < deadline:
        try:
            n = sock.send(view[offset:])
        except TimeoutError:
            continue  # the server is not reading from us: back-pressure
        except OSError:
            break
        sent += n
        offset = (offset + n) % len(burst)
    stop.set()
    if thread is not None:
        thread.join(5)
    sock.close()
    return {
        "sent_bytes": sent,
        "requests_sent": sent // len(metadata_all(0)),
        "answered": answered,
        "answered_bytes": answered_bytes,
    }


def role_crowd(
    address: tuple[str, int], seconds: float, idle: int, slowloris: int
) -> dict[str, Any]:
    """Open `idle` silent connections and `slowloris` ones trickling a request, for `seconds`."""
    raise_open_file_limit()  # as the server does: the crowd is thousands of sockets
    idle_socks = []
    failed = 0
    for _ in range(idle):
        try:
            idle_socks.append(socket.create_connection(address, timeout=10))
        except OSError:
            failed += 1
    slow_socks = []
    for _ in range(slowloris):
        try:
            sock = socket.create_connection(address, timeout=10)
            sock.sendall(struct.pack(">i", 1000))  # a 1000-byte request, sent one byte a second
            sock.setblocking(False)
            slow_socks.append(sock)
        except OSError:
            failed += 1
    print(json.dumps({"ready": True}), flush=True)
    deadline = time.monotonic() + seconds
    closed_by_server = 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        alive = []
        for sock in slow_socks:
            try:
                sock.send(b"x")
                alive.append(sock)
            except OSError:
                closed_by_server += 1
                sock.close()
        slow_socks = alive
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    for sock in idle_socks:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed_by_server += 1
        except BlockingIOError:
            pass
        except OSError:
            closed_by_server += 1
    for sock in idle_socks + slow_socks:
        sock.close()
    return {
        "opened": len(idle_socks) + len(slow_socks),
        "failed": failed,
        "closed": closed_by_server,
    }


# ---------------------------------------------------------------------------------- the run


@dataclass
class Phase:
    """One phase's figures."""

    name: str
    latencies_ms: list[float]
    rss_start: int
    rss_max: int
    load: dict[str, Any]
    errors: int

    server_cpu: float

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * q) - 1))]


def probe(
    address: tuple[str, int], seconds: float, server_pid: int
) -> tuple[list[float], int, int, int]:
    """Probe rounds for `seconds`: latencies (ms), errors, RSS at the start and its highest."""
    rss_start = rss_bytes(server_pid)
    rss_max = rss_start
    stop = threading.Event()

    def sample() -> None:
        nonlocal rss_max
        while not stop.wait(0.1):
            try:
                rss_max = max(rss_max, rss_bytes(server_pid))
            except (OSError, RuntimeError):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    latencies: list[float] = []
    errors = 0
    sock = socket.create_connection(address, timeout=30)
    correlation = 0
    deadline = time.monotonic() + seconds
    next_round = time.monotonic()
    while time.monotonic() < deadline:
        for make in (api_versions, metadata_all):
            correlation += 1
            frame = make(correlation)
            start = time.perf_counter()
            try:
                sock.sendall(frame)
                answered, _ = read_answer(sock)
                if answered != correlation:
                    raise ConnectionError(f"answer {answered} to request {correlation}")
            except (OSError, ConnectionError):
                # A failed request cost its caller the time it took too: it counts as that.
                errors += 1
                sock.close()
                sock = socket.create_connection(address, timeout=30)
            latencies.append((time.perf_counter() - start) * 1000)
        # Rounds missed while a request was stuck are skipped, not made up in a burst.
        next_round = max(next_round + PROBE_INTERVAL, time.monotonic())
        time.sleep(max(0.0, next_round - time.monotonic()))
    sock.close()
    stop.set()
    sampler.join(2)
    return latencies, errors, rss_start, rss_max


def start_load(role: list[str]) -> subprocess.Popen[str]:
    """Run this script in another process, in a load role; its last stdout line is JSON."""
    return subprocess.Popen([sys.executable, __file__, *role], stdout=subprocess.PIPE, text=True)


def finish_load(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=600)
    lines = [line for line in out.splitlines() if line.strip()]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": process.returncode}
    return result


def prepare(address: tuple[str, int], topics: int) -> int:
    """Create `topics` topics through the server; the size of a Metadata answer for all."""
    sock = socket.create_connection(address, timeout=60)
    names = [f"topic-{i:05d}" for i in range(topics)]
    for i in range(0, topics, 100):
        sock.sendall(create_topics(i, names[i : i + 100]))
        read_answer(sock)
    sock.sendall(metadata_all(1))
    _, frame = read_answer(sock)
    sock.close()
    return len(frame) + 4


def register_brokers(repo: Path, data_dir: Path) -> None:
    """3 brokers, through the CLI of `repo` on the data directory."""
    for broker_id in (1, 2, 3):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "api.cli",
                "--data-dir",
                str(data_dir),
                "brokers",
                "register",
                "--id",
                str(broker_id),
            ],
            check=True,
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(repo)},
            stdout=subprocess.DEVNULL,
        )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--slowloris", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument(
        "--phases",
        default="baseline,reading,never-reading,baseline,crowd,baseline",
        help="comma-separated; each is compared with the baseline before it (the host's load "
        "drifts within minutes, so the crowd gets a baseline of its own on each side)",
    )
    parser.add_argument("--role", choices=["pipeline", "crowd"], help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--read", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:
        host, port = args.address.rsplit(":", 1)
        address = (host, int(port))
        if args.role == "pipeline":
            result = role_pipeline(address, args.seconds, args.read)
        else:
            result = role_crowd(address, args.seconds, args.idle, args.slowloris)
        print(json.dumps(result), flush=True)
        return
    # Not at the top: a load process would import the service and the log with it, and start
    # later into its phase.
    from server_bench import cpu_seconds, start_server

    scratch = Path(args.dir or tempfile.mkdtemp(prefix="fairness-bench-"))
    data_dir = scratch / "served"
    if data_dir.exists():
        raise SystemExit(f"{data_dir} exists; give an empty --dir")
    repo = args.repo.resolve()
    register_brokers(repo, data_dir)
    server, address = start_server(data_dir, scratch / "server.log", repo=repo)
    where = f"{address[0]}:{address[1]}"
    phases: list[Phase] = []
    try:
        answer_size = prepare(address, args.topics)
        for name in args.phases.split(","):
            load: subprocess.Popen[str] | None = None
            if name == "reading":
                load = start_load(
                    [
                        "--role",
                        "pipeline",
                        "--address",
                        where,
                        "--read",
                        "--seconds",
                        str(args.seconds),
                    ]
                )
            elif name == "never-reading":
                load = start_load(
                    ["--role", "pipeline", "--address", where, "--seconds", str(args.seconds)]
                )
            elif name == "crowd":
                # Open for the client once the kernel's handshake is done, the crowd's
                # connections may still wait in the accept queue: the server is given time to
                # take them all (3 s for the default 2,300) before the probe starts.
                accept_wait = min(CROWD_ACCEPT_WAIT, (args.idle + args.slowloris) / 1000)
                load = start_load(
                    [
                        "--role",
                        "crowd",
                        "--address",
                        where,
                        "--seconds",
                        str(args.seconds + accept_wait + 2),
                        "--idle",
                        str(args.idle),
                        "--slowloris",
                        str(args.slowloris),
                    ]
                )
                assert load.stdout is not None
                json.loads(load.stdout.readline())  # every connection is open
                time.sleep(accept_wait)
            elif name != "baseline":
                raise SystemExit(f"unknown phase {name!r}")
            time.sleep(0.5)  # the load is under way
            cpu = cpu_seconds(f"/proc/{server.pid}/stat")
            latencies, errors, rss_start, rss_max = probe(address, args.seconds, server.pid)
            cpu = (cpu_seconds(f"/proc/{server.pid}/stat") - cpu) / args.seconds
            result = finish_load(load) if load is not None else {}
            phases.append(Phase(name, latencies, rss_start, rss_max, result, errors, cpu))
            time.sleep(min(1.0, args.seconds))  # let the server settle between phases
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(120)
    log_text = (scratch / "server.log").read_text()
    print(
        f"server: {repo} (exit {code}); {args.topics} topics x 3 partitions, Metadata answer "
        f"{answer_size:,} bytes; {args.seconds:g} s per phase; probe ApiVersions + Metadata "
        f"every {PROBE_INTERVAL * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    print()
    base = float("nan")
    expected = 2 * int(args.seconds / PROBE_INTERVAL)
    print(f"probe requests expected per phase: {expected:,} (fewer: the probe was kept waiting)")
    print(
        f"{'phase':<15}{'probe reqs':>11}{'err':>5}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'p99-base':>10}{'RSS growth MiB':>16}{'server CPU':>12}  load"
    )
    for phase in phases:
        if phase.name == "baseline":
            base = phase.pct(0.99)
        growth = (phase.rss_max - phase.rss_start) / 2**20
        load_text = ", ".join(
            f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in phase.load.items()
        )
        print(
            f"{phase.name:<15}{len(phase.latencies_ms):>11,}{phase.errors:>5}"
            f"{phase.pct(0.5):>9.1f}{phase.pct(0.99):>9.1f}"
            f"{max(phase.latencies_ms, default=0):>9.1f}"
            f"{phase.pct(0.99) - base:>+10.1f}{growth:>16.1f}{phase.server_cpu:>12.0%}  {load_text}"
        )
    print()
    print(
        "targets: pipeliner phases p99 <= 50 ms, max <= 250 ms, RSS growth <= 100 MiB; "
        "crowd p99 - the baseline's before it <= 10 ms (and the one after, for the drift)"
    )
    summaries = [line for line in log_text.splitlines() if "over limits" in line]
    if summaries:
        print("server's limit lines:", *summaries, sep="\n  ")
    if code != 0:
        raise SystemExit(f"the server exited {code}: {log_text[-2000:]}")


if __name__ == "__main__":
    main()
