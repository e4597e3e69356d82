"""Load test of `mlog serve`: concurrent connections issuing create/describe/delete.

Usage: python bench/server_bench.py [--connections 50] [--seconds 60] [--dir PATH]
                                   [--profile FILE] [--repo PATH] [--event-loop LOOP]
       python bench/server_bench.py --against PATH [--pairs 3] [--seconds 60] [--repo PATH]
       python bench/server_bench.py --metrics [--pairs 3] [--seconds 60]

`--against PATH` measures two checkouts in one run (bench/against.py): PATH's server and this
checkout's (or `--repo`'s) take turns for `--pairs` pairs (so the host's drift falls on both
alike), each on a fresh data directory with the same load and checks; it prints each run and
the medians of writes/s and server CPU per request (the figure that depends least on the
host's other load) with their ratios. Run it under `nice -n -15` where allowed.

`--metrics` measures the cost of the metrics in one run: the same server without and with
`--metrics-listen` (scraped once a second during the load, 15 times Prometheus's usual rate)
takes turns for `--pairs` pairs, each on a fresh data directory; it prints each run and the
medians of writes/s and server CPU per request, with metrics over without (the ratio). With
`--instructions CYCLES` it counts instructions per request under callgrind instead (no scrape:
the request path's cost alone), a figure the host's load does not move.

`--event-loop asyncio` (or `uvloop`) runs every server of the run on that loop (`mlog serve`'s
`event.loop`; by default uvloop where it is installed); the report names the loop the server
ran on.

`--profile FILE` runs the server under cProfile and writes its statistics to FILE (read them
with `python -m pstats FILE`); the figures of such a run are not the server's speed.

A server process (`mlog serve`, the real CLI) runs on a fresh data directory with 3 registered
brokers. The load runs in this process: `--connections` asyncio connections, each a loop of
CreateTopics v7 (one topic, 1 partition, replication factor 1), Metadata v12 for that topic
and DeleteTopics v6 (by id), one request in flight per connection, speaking the wire protocol
through hand-made frames and answer readers checked against `api.protocol.codec` at start
(no client library overhead: the load shares the cores with the server). Every latency is
recorded.

After the run the server is stopped with SIGTERM (it must exit 0) and the log is read back:
the TopicRecords and RemoveTopicRecords in it must be exactly the acknowledged creates and
deletes (no lost and no extra records), and no request may have failed.

The server's CPU time (from /proc, Linux) is reported per request, all threads together,
with the share of the run its main thread (the event loop) was busy: a figure that depends
less on what else the machine is doing than the throughput does.

Baseline, measured in the same run: the same loop of commands submitted to an in-process
`MetadataService` by the same number of asyncio tasks for `--baseline-seconds`, without the
network or the protocol, on the event loop the server ran on (uvloop's or asyncio's). The
ratio is server writes/s over in-process writes/s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from against import THIS, Figure, code_env, paired, print_table

sys.path.insert(0, str(THIS))

from api.protocol import codec
from api.protocol.generated_reader_runtime import read_uvarint
from api.service.service import MetadataService
from metadata_log import LogReader
from records import RemoveTopicRecord, TopicRecord
from replay.controller.commands import CreatableTopic, RegisterBroker, TopicRef


@dataclass
class Stats:
    """What the load connections saw."""

    latencies_ms: list[float] = field(default_factory=list)
    writes: int = 0
    errors: list[str] = field(default_factory=list)
    created: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)


def cpu_seconds(path: str) -> float:
    """CPU seconds (user + system) of a process or thread, from its /proc stat file (Linux)."""
    try:
        with open(path) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SERVER_OVERRIDES: list[str] = []
"""Flags every server of the run gets (`--event-loop` sets `--override event.loop=...`)."""


def start_server(
    data_dir: Path,
    log_path: Path,
    *,
    python: Sequence[str] = (),
    repo: Path | None = None,
    wrapper: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    """`mlog serve` on a free port of 127.0.0.1; the process and its address once it serves.

    `python` goes between the interpreter and `-m api.cli` (`-m cProfile -o FILE`); `repo` runs
    the server of another checkout instead of the one on this interpreter's path; `wrapper`
    goes before the interpreter (`valgrind --tool=callgrind ...`); `extra` after the flags.
    """
    where: dict[str, Any] = {}
    if repo is not None:
        where = {"cwd": repo, "env": code_env(repo)}
    with log_path.open("w") as log_file:
        server = subprocess.Popen(
            [
                *wrapper,
                sys.executable,
                *python,
                "-m",
                "api.cli",
                "serve",
                "--data-dir",
                str(data_dir),
                "--listen",
                "127.0.0.1:0",
                *extra,
                *SERVER_OVERRIDES,
            ],
            stderr=log_file,
            **where,
        )
    for _ in range(3000):  # 5 minutes: a server under valgrind starts slowly
        text = log_path.read_text()
        if "serving on " in text:
            host, port = text.split("serving on ", 1)[1].split()[0].rsplit(":", 1)
            return server, (host, int(port))
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    raise SystemExit(f"the server did not start: {log_path.read_text()[-2000:]}")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact(text: str | None) -> bytes:
    if text is None:
        return b"\0"
    data = text.encode()
    return _uvarint(len(data) + 1) + data


_CLIENT = b"metadata-log"


def _header(api_key: int, version: int, correlation: int) -> bytes:
    """Request header v2 (the three requests below are flexible versions)."""
    return struct.pack(">hhih", api_key, version, correlation, len(_CLIENT)) + _CLIENT + b"\0"


def create_topic_v7(correlation: int, name: str) -> bytes:
    """CreateTopics v7: one topic, 1 partition, replication factor 1, 30 s timeout."""
    return create_topics_v7(correlation, (name,))


def create_topics_v7(correlation: int, names: Sequence[str]) -> bytes:
    """CreateTopics v7 of `names`: each 1 partition, replication factor 1; 30 s timeout."""
    one = struct.pack(">ih", 1, 1) + b"\x01\x01\0"  # no assignments, no configs, no tags
    body = _uvarint(len(names) + 1) + b"".join(_compact(name) + one for name in names)
    return _header(19, 7, correlation) + body + struct.pack(">i?", 30_000, False) + b"\0"


def metadata_v12(correlation: int, name: str) -> bytes:
    """Metadata v12 for one topic by name."""
    body = b"\x02" + bytes(16) + _compact(name) + b"\0" + b"\0\0\0"
    return _header(3, 12, correlation) + body


def delete_topic_v6(correlation: int, topic_id: bytes) -> bytes:
    """DeleteTopics v6 of one topic by id."""
    body = b"\x02" + b"\0" + topic_id + b"\0" + struct.pack(">i", 30_000) + b"\0"
    return _header(20, 6, correlation) + body


def _skip_tags(frame: bytes, at: int) -> int:
    """Past a tagged-fields section."""
    count, at = read_uvarint(frame, at)
    for _ in range(count):
        _, at = read_uvarint(frame, at)
        size, at = read_uvarint(frame, at)
        at += size
    return at


def _skip_compact(frame: bytes, at: int) -> int:
    """Past a compact (nullable) string or bytes."""
    size, at = read_uvarint(frame, at)
    return at + max(size - 1, 0)


def created_topic(frame: bytes) -> tuple[int, int, bytes]:
    """(correlation id, error code, topic id) of a CreateTopics v7 answer's first topic.

    A load loop needs only these: read by hand (as etcd's load reads only the HTTP status),
    not by decoding the whole answer with its topic configs (24 µs a write on the cores the
    servers share). Checked against the codec by `_check_encoders`.
    """
    (correlation,) = struct.unpack_from(">i", frame)
    at = _skip_tags(frame, 4)  # response header v1
    _, at = read_uvarint(frame, at + 4)  # throttle time, then the topics' count + 1
    at = _skip_compact(frame, at)  # the name
    topic_id = frame[at : at + 16]
    (code,) = struct.unpack_from(">h", frame, at + 16)
    return correlation, code, topic_id


def created_topics(frame: bytes) -> tuple[int, list[int]]:
    """(correlation id, every topic's error code) of a CreateTopics v7 answer frame.

    For requests of several topics (`quorum_bench --topics-per-request`): each topic's
    configs are walked past, which `created_topic` (the first topic only) does not need.
    """
    (correlation,) = struct.unpack_from(">i", frame)
    at = _skip_tags(frame, 4)  # response header v1
    count, at = read_uvarint(frame, at + 4)  # throttle time, then the topics' count + 1
    codes: list[int] = []
    for _ in range(count - 1):
        at = _skip_compact(frame, at) + 16  # the name, the topic id
        (code,) = struct.unpack_from(">h", frame, at)
        codes.append(code)
        at = _skip_compact(frame, at + 2) + 6  # the message; partitions, replication factor
        configs, at = read_uvarint(frame, at)
        for _ in range(max(configs - 1, 0)):
            at = _skip_compact(frame, _skip_compact(frame, at)) + 3  # name, value; 3 flags
            at = _skip_tags(frame, at)
        at = _skip_tags(frame, at)
    return correlation, codes


def described_error_code(frame: bytes) -> tuple[int, int]:
    """(correlation id, the first topic's error code) of a Metadata v12 answer frame."""
    (correlation,) = struct.unpack_from(">i", frame)
    at = _skip_tags(frame, 4)
    brokers, at = read_uvarint(frame, at + 4)  # throttle time, then the brokers' count + 1
    for _ in range(brokers - 1):
        at = _skip_compact(frame, at + 4)  # node id, host
        at = _skip_compact(frame, at + 4)  # port, rack
        at = _skip_tags(frame, at)
    at = _skip_compact(frame, at)  # cluster id
    _, at = read_uvarint(frame, at + 4)  # controller id, then the topics' count + 1
    (code,) = struct.unpack_from(">h", frame, at)
    return correlation, code


def deleted_error_code(frame: bytes) -> tuple[int, int]:
    """(correlation id, the first topic's error code) of a DeleteTopics v6 answer frame."""
    (correlation,) = struct.unpack_from(">i", frame)
    at = _skip_tags(frame, 4)
    _, at = read_uvarint(frame, at + 4)  # throttle time, then the answers' count + 1
    at = _skip_compact(frame, at)  # the name
    (code,) = struct.unpack_from(">h", frame, at + 16)  # after the topic id
    return correlation, code


def _answer_frame(api_key: int, version: int, **fields: Any) -> bytes:
    """The frame the codec writes for an answer of `fields` (correlation id 7, no size)."""
    answer = codec.build(
        codec.response_class(api_key, version), throttle_time=datetime.timedelta(0), **fields
    )
    return bytes(codec.encode_response(7, answer)[4:])


def _create_topics_body(names: Sequence[str]) -> Any:
    """The codec's CreateTopics v7 of `names` (what `create_topics_v7` must write)."""
    topic = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    return codec.build(
        codec.request_class(19, 7),
        topics=[{"name": name, **topic} for name in names],
        timeout=30_000,
        validate_only=False,
    )


def _check_encoders() -> None:
    """The hand-written frames are what the protocol codec writes; the answer readers agree.

    The frames must be byte for byte the codec's, and each answer reader must read what the
    codec reads from an answer it writes.
    """
    topic: dict[str, Any] = {"name": "x-1", "topic_id": bytes(range(16))}
    for error in (0, 36):
        config = {"name": "cleanup.policy", "value": "delete", "read_only": False}
        config |= {"config_source": 5, "is_sensitive": False}
        created = topic | {"error_code": error, "error_message": None if error == 0 else "no"}
        created |= {"num_partitions": 1, "replication_factor": 1, "configs": [config]}
        brokers = [
            {"node_id": 1, "host": "h-1", "port": 9092, "rack": None},
            {"node_id": 2, "host": "host-2", "port": 9093, "rack": "rack-a"},
        ]
        described = topic | {"error_code": error, "is_internal": False, "partitions": []}
        deleted = topic | {"error_code": error, "error_message": None if error == 0 else "no"}
        second = created | {"name": "second-topic", "error_code": 0, "error_message": None}
        second |= {"configs": [config, config | {"value": None}]}
        read: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [
            (created_topic(_answer_frame(19, 7, topics=[created])), (7, error, bytes(range(16)))),
            (created_topics(_answer_frame(19, 7, topics=[created, second])), (7, [error, 0])),
            (
                described_error_code(
                    _answer_frame(
                        3,
                        12,
                        brokers=brokers,
                        cluster_id="cluster",
                        controller_id=1,
                        topics=[described],
                    )
                ),
                (7, error),
            ),
            (deleted_error_code(_answer_frame(20, 6, responses=[deleted])), (7, error)),
        ]
        for got, wanted in read:
            if got != wanted:
                raise SystemExit(f"a bench answer reader differs from the codec: {got} != {wanted}")
    topic_id = bytes(range(16))
    pairs = [
        (create_topic_v7(7, "x-1"), _create_topics_body(("x-1",))),
        (
            metadata_v12(7, "x-1"),
            codec.build(
                codec.request_class(3, 12),
                topics=[{"name": "x-1", "topic_id": None}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        ),
        (
            delete_topic_v6(7, topic_id),
            codec.build(
                codec.request_class(20, 6),
                topics=[{"name": None, "topic_id": topic_id}],
                timeout=30_000,
            ),
        ),
    ]
    names = ("x-1", "topic-two")
    pairs.append((create_topics_v7(7, names), _create_topics_body(names)))
    for mine, body in pairs:
        expected = codec.encode_request(body, correlation_id=7)[4:]
        if mine != expected:
            raise SystemExit(f"bench encoder differs from the codec: {mine!r} != {expected!r}")


class Wire:
    """One connection: send a request frame, read its response (one in flight).

    Requests are written by the hand-made encoders above and the load's answers read by the
    hand-made readers (both checked against the codec at start), so the load generator, which
    shares the machine with the server, spends as little CPU as it can; `call` reads a whole
    answer with the codec (kio's native reader).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    async def call(self, api_key: int, version: int, encode: Any, argument: Any) -> Any:
        data = await self.call_raw(encode, argument)
        correlation, response = codec.decode_response(api_key, version, data)
        if correlation != self.correlation:
            raise RuntimeError(f"correlation {correlation} != {self.correlation}")
        return response

    async def call_raw(self, encode: Any, argument: Any) -> bytes:
        """Send `encode(correlation, argument)`; the answer frame, not decoded."""
        self.correlation += 1
        frame = encode(self.correlation, argument)
        self.writer.write(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    async def create_topic(self, name: str) -> int:
        """CreateTopics v7 of one topic; its error code (the answer read by hand)."""
        code, _ = await self.create_topic_id(name)
        return code

    async def create_topic_id(self, name: str) -> tuple[int, bytes]:
        """CreateTopics v7 of one topic; its error code and topic id (read by hand)."""
        correlation, code, topic_id = created_topic(await self.call_raw(create_topic_v7, name))
        self._check(correlation)
        return code, topic_id

    async def create_topics(self, names: Sequence[str]) -> list[int]:
        """CreateTopics v7 of several topics; each one's error code (read by hand)."""
        correlation, codes = created_topics(await self.call_raw(create_topics_v7, names))
        self._check(correlation)
        if len(codes) != len(names):
            raise RuntimeError(f"{len(codes)} topics answered of {len(names)}")
        return codes

    async def describe_topic(self, name: str) -> int:
        """Metadata v12 of one topic; its error code (read by hand)."""
        correlation, code = described_error_code(await self.call_raw(metadata_v12, name))
        self._check(correlation)
        return code

    async def delete_topic(self, topic_id: bytes) -> int:
        """DeleteTopics v6 of one topic by id; its error code (read by hand)."""
        correlation, code = deleted_error_code(await self.call_raw(delete_topic_v6, topic_id))
        self._check(correlation)
        return code

    def _check(self, correlation: int) -> None:
        if correlation != self.correlation:
            raise RuntimeError(f"correlation {correlation} != {self.correlation}")


async def _connection(port: int, index: int, deadline: float, stats: Stats) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await _connection_loop(Wire(reader, writer), index, deadline, stats)
    finally:
        writer.close()


async def _connection_loop(
    wire: Wire,
    index: int,
    deadline: float,
    stats: Stats,
    *,
    prefix: str = "load",
    cycles: int | None = None,
) -> None:
    """Create, describe and delete topics on one connection until `deadline` (or `cycles`)."""
    i = 0
    while time.perf_counter() < deadline and (cycles is None or i < cycles):
        name = f"{prefix}-{index}-{i}"
        i += 1
        start = time.perf_counter()
        code, topic_id = await wire.create_topic_id(name)
        now = time.perf_counter()
        stats.latencies_ms.append((now - start) * 1000)
        if code != 0:
            stats.errors.append(f"create {name}: {code}")
            continue
        stats.created.add(name)
        stats.writes += 1
        start = now
        code = await wire.describe_topic(name)
        now = time.perf_counter()
        stats.latencies_ms.append((now - start) * 1000)
        if code != 0:
            stats.errors.append(f"describe {name}: {code}")
        start = now
        code = await wire.delete_topic(topic_id)
        stats.latencies_ms.append((time.perf_counter() - start) * 1000)
        if code != 0:
            stats.errors.append(f"delete {name}: {code}")
            continue
        stats.deleted.add(name)
        stats.writes += 1


def _prepare(data_dir: Path) -> None:
    service = MetadataService.open(data_dir / "log")
    with service:
        for broker_id in (1, 2, 3):
            request = RegisterBroker(broker_id=broker_id)
            service.execute(lambda image, r=request: service.controller.register_broker(image, r))  # type: ignore[misc]


def _check_log(data_dir: Path, stats: Stats) -> tuple[int, int]:
    created: set[str] = set()
    deleted: set[str] = set()
    names: dict[bytes, str] = {}
    with LogReader.open(data_dir / "log") as log:
        for entry in log.read():
            record = entry.record
            if isinstance(record, TopicRecord) and record.name.startswith("load-"):
                created.add(record.name)
                names[record.topic_id.bytes] = record.name
            elif isinstance(record, RemoveTopicRecord) and record.topic_id.bytes in names:
                deleted.add(names[record.topic_id.bytes])
    if created != stats.created or deleted != stats.deleted:
        raise SystemExit(
            f"log and acknowledgements differ: {len(created ^ stats.created)} creates, "
            f"{len(deleted ^ stats.deleted)} deletes"
        )
    return len(created), len(deleted)


async def _baseline(data_dir: Path, tasks: int, seconds: float) -> float:
    _prepare(data_dir)
    service = MetadataService.open(data_dir / "log")
    controller = service.controller
    writes = 0
    deadline = time.perf_counter() + seconds

    async def loop(index: int) -> None:
        nonlocal writes
        i = 0
        while time.perf_counter() < deadline:
            name = f"base-{index}-{i}"
            i += 1
            topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            await service.submit(lambda image, t=topic: controller.create_topics(image, [t]))  # type: ignore[misc]
            _ = service.image.topics.get_by_name(name)
            ref = TopicRef(name=name)
            await service.submit(lambda image, r=ref: controller.delete_topics(image, [r]))  # type: ignore[misc]
            writes += 2

    start = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(tasks)))
    elapsed = time.perf_counter() - start
    await service.aclose()
    return writes / elapsed


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """The figures of one served run."""

    label: str
    writes_per_s: float
    requests: int
    elapsed: float
    p50_ms: float
    p99_ms: float
    cpu_us: float
    """Server CPU per request, all threads."""
    main_busy: float
    """Share of the run the server's main thread (the event loop) was on the CPU."""
    load: str
    """The host's load averages when the run started."""
    event_loop: str = "asyncio"
    """The server's event loop, as its start line names it."""


def serve_run(
    scratch: Path,
    *,
    connections: int,
    seconds: float,
    repo: Path | None,
    label: str,
    profile: Path | None = None,
    metrics: bool = False,
) -> tuple[Run, Stats]:
    """One served run on a fresh data directory under `scratch`: its figures and what it saw.

    With `metrics` the server serves `/metrics`, scraped once a second during the load.
    """
    data_dir = scratch / "served"
    if data_dir.exists():
        raise SystemExit(f"{data_dir} exists; give an empty --dir")
    _prepare(data_dir)
    server_log = scratch / "server.log"
    python = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    extra = ["--metrics-listen", "127.0.0.1:0"] if metrics else []
    server, (_, port) = start_server(data_dir, server_log, python=python, repo=repo, extra=extra)
    scrape_at = _metrics_address(server_log) if metrics else None
    stats = Stats()
    load_average = " ".join(f"{x:.1f}" for x in os.getloadavg())

    async def load() -> float:
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        work = [_connection(port, i, deadline, stats) for i in range(connections)]
        if scrape_at is not None:
            work.append(_scrape_loop(scrape_at, deadline))
        await asyncio.gather(*work)
        return time.perf_counter() - start

    process_stat = f"/proc/{server.pid}/stat"
    main_stat = f"/proc/{server.pid}/task/{server.pid}/stat"
    cpu_before = (cpu_seconds(process_stat), cpu_seconds(main_stat))
    elapsed = asyncio.run(load())
    cpu = (cpu_seconds(process_stat) - cpu_before[0], cpu_seconds(main_stat) - cpu_before[1])
    server.send_signal(signal.SIGTERM)
    code = server.wait(60)
    if code != 0:
        raise SystemExit(f"the server exited {code}: {server_log.read_text()[-2000:]}")
    _check_log(data_dir, stats)
    latencies = sorted(stats.latencies_ms)
    run = Run(
        label=label,
        writes_per_s=stats.writes / elapsed,
        requests=len(latencies),
        elapsed=elapsed,
        p50_ms=statistics.median(latencies),
        p99_ms=latencies[int(len(latencies) * 0.99) - 1],
        cpu_us=cpu[0] / len(latencies) * 1e6,
        main_busy=cpu[1] / elapsed,
        load=load_average,
        event_loop=_event_loop(server_log),
    )
    return run, stats


def _run_on(event_loop: str, coroutine: Coroutine[Any, Any, float]) -> float:
    """Run `coroutine` on the loop `_event_loop` named (`uvloop ...` or `asyncio`)."""
    if event_loop.startswith("uvloop"):
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


def _event_loop(server_log: Path) -> str:
    """The server's event loop from its start line (`event loop: uvloop 0.23.0 (...)`).

    A server from before the line existed ran on asyncio's loop.
    """
    marker = "event loop: "
    text = server_log.read_text()
    if marker not in text:
        return "asyncio"
    return text.split(marker, 1)[1].split(" (", 1)[0].splitlines()[0]


def _metrics_address(server_log: Path) -> str:
    """`host:port` of the server's metrics listener, from its start line."""
    text = server_log.read_text()
    marker = "metrics and health probes on http://"
    if marker not in text:
        raise SystemExit(f"the server logged no metrics listener: {text[-2000:]}")
    return text.split(marker, 1)[1].split("/metrics", 1)[0]


async def _scrape_loop(address: str, deadline: float) -> None:
    """GET /metrics once a second until `deadline` (each answer must be a 200)."""
    host, port = address.rsplit(":", 1)
    while time.perf_counter() < deadline:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        answer = await reader.read()
        writer.close()
        if not answer.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"/metrics answered {answer[:80]!r}")
        await asyncio.sleep(1.0)


def _metrics_instructions(args: argparse.Namespace, scratch: Path) -> None:
    """`--metrics --instructions CYCLES`: callgrind counts without and with the metrics."""
    cycles = args.instructions
    print(f"{args.connections} connections x {cycles} cycles (3 requests each) under callgrind")
    print(f"{'run':<10}{'instructions/request':>22}")
    pairs = []
    for pair in range(1, args.pairs + 1):
        got: dict[bool, float] = {}
        for metrics in (True, False) if pair % 2 else (False, True):
            label = "on" if metrics else "off"
            got[metrics] = instructions_run(
                scratch / f"{label}-{pair}",
                connections=args.connections,
                cycles=cycles,
                repo=args.repo,
                extra=["--metrics-listen", "127.0.0.1:0"] if metrics else [],
            )
            print(f"{label + ' ' + str(pair):<10}{got[metrics]:>22,.0f}", flush=True)
        pairs.append((got[True], got[False]))
    on = statistics.median(a for a, _ in pairs)
    off = statistics.median(b for _, b in pairs)
    ratio = statistics.median(a / b for a, b in pairs)
    print()
    print(f"instructions per request: on {on:,.0f}, off {off:,.0f}, ratio {ratio:.4f}")


def _metrics_pairs(args: argparse.Namespace, scratch: Path) -> None:
    """`--metrics`: runs without and with the metrics listener in turns; medians and ratios."""
    print(f"{'run':<10}{'writes/s':>10}{'CPU/req':>10}{'p99':>9}{'loop busy':>11}  load average")
    pairs: list[tuple[Run, Run]] = []
    for pair in range(1, args.pairs + 1):
        got: dict[bool, Run] = {}
        for metrics in (True, False) if pair % 2 else (False, True):
            label = "on" if metrics else "off"
            run, stats = serve_run(
                scratch / f"{label}-{pair}",
                connections=args.connections,
                seconds=args.seconds,
                repo=args.repo,
                label=label,
                metrics=metrics,
            )
            _report(f"{label} {pair}", run, stats)
            got[metrics] = run
        pairs.append((got[True], got[False]))
    print()
    print(f"median of {len(pairs)} pairs; ratio = metrics on / metrics off (target within 3%)")
    print(f"{'figure':<26}{'on':>12}{'off':>12}{'ratio':>8}")
    for name, attribute, unit in (
        ("writes/s", "writes_per_s", ""),
        ("server CPU per request", "cpu_us", "us"),
        ("latency p99", "p99_ms", "ms"),
    ):
        ons = [float(getattr(a, attribute)) for a, _ in pairs]
        offs = [float(getattr(b, attribute)) for _, b in pairs]
        on, off = statistics.median(ons), statistics.median(offs)
        ratio = statistics.median(a / b for a, b in zip(ons, offs, strict=True))
        print(f"{name:<26}{on:>10,.1f}{unit:<2}{off:>10,.1f}{unit:<2}{ratio:>8.3f}")


def _report(name: str, run: Run, stats: Stats) -> None:
    """One run's row; a run with errors ends the bench, showing the first ten."""
    if stats.errors:
        print("errors:", *stats.errors[:10], sep="\n  ")
        raise SystemExit(1)
    print(
        f"{name:<10}{run.writes_per_s:>10,.0f}{run.cpu_us:>8.1f}us"
        f"{run.p99_ms:>7.1f}ms{run.main_busy:>10.0%}  {run.load}",
        flush=True,
    )


def _interleaved(args: argparse.Namespace, scratch: Path) -> None:
    """`--against`: runs of the other checkout and of this one taken in turns; medians."""
    this = (args.repo or THIS).resolve()
    other = args.against.resolve()
    print(f"{'run':<10}{'writes/s':>10}{'CPU/req':>10}{'p99':>9}{'loop busy':>11}  load average")
    pairs = []
    for pair in range(1, args.pairs + 1):

        def measure(repo: Path, pair: int = pair) -> Run:
            label = "now" if repo == this else "before"
            run, stats = serve_run(
                scratch / f"{label}-{pair}",
                connections=args.connections,
                seconds=args.seconds,
                repo=repo,
                label=label,
            )
            _report(f"{label} {pair}", run, stats)
            return run

        pairs.append(paired(pair - 1, other, measure, this=this))
    print()
    print_table(
        [
            Figure(label="writes/s", pairs=[(n.writes_per_s, b.writes_per_s) for n, b in pairs]),
            Figure(
                label="server CPU per request",
                pairs=[(n.cpu_us, b.cpu_us) for n, b in pairs],
                unit="us",
                lower_is_better=True,
            ),
        ],
        other=other,
        this=this,
    )


async def _cycles(port: int, connections: int, cycles: int, tag: str, stats: Stats) -> None:
    """`cycles` create/describe/delete loops on each of `connections` connections, in parallel."""

    async def one(index: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await _connection_loop(
                Wire(reader, writer), index, float("inf"), stats, prefix=tag, cycles=cycles
            )
        finally:
            writer.close()

    await asyncio.gather(*(one(i) for i in range(connections)))


def instructions_run(
    scratch: Path,
    *,
    connections: int,
    cycles: int,
    repo: Path | None,
    extra: Sequence[str] = (),
) -> float:
    """Instructions the server executes per request (all threads), counted by callgrind.

    The server runs under `valgrind --tool=callgrind` with counting off; after a warm-up of two
    cycles per connection (imports, caches, the first segment), counting is turned on for
    `cycles` cycles per connection and off again. A count of instructions does not depend on
    what else the machine runs, unlike seconds (valgrind's documentation: the same binary and
    inputs give the same count). The server runs about 50 times slower under valgrind, so more
    requests wait per turn of its loop than at full speed: the count is that of a busy server.
    """
    data_dir = scratch / "served"
    if data_dir.exists():
        raise SystemExit(f"{data_dir} exists; give an empty --dir")
    _prepare(data_dir)
    out = scratch / "callgrind.out"
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    server, (_, port) = start_server(
        data_dir, scratch / "server.log", repo=repo, wrapper=wrapper, extra=extra
    )
    stats = Stats()
    asyncio.run(_cycles(port, connections, 2, "warm", stats))
    control = ["callgrind_control", "--instr"]
    subprocess.run([*control, "on", str(server.pid)], check=True, capture_output=True)
    measured = Stats()
    asyncio.run(_cycles(port, connections, cycles, "load", measured))
    subprocess.run([*control, "off", str(server.pid)], check=True, capture_output=True)
    server.send_signal(signal.SIGTERM)
    code = server.wait(300)
    if code != 0:
        log_tail = (scratch / "server.log").read_text()[-2000:]
        raise SystemExit(f"the server exited {code}: {log_tail}")
    if stats.errors or measured.errors:
        raise SystemExit("errors: " + "; ".join((stats.errors + measured.errors)[:10]))
    total = 0
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            total = int(line.split()[1])
    if total == 0:
        raise SystemExit(f"no instruction count in {out}")
    return total / len(measured.latencies_ms)


def _instructions(args: argparse.Namespace, scratch: Path) -> None:
    """`--instructions`: callgrind counts of the other checkout and this one, in turns."""
    this = (args.repo or THIS).resolve()
    other = args.against.resolve()
    cycles = args.instructions
    print(f"{args.connections} connections x {cycles} cycles (3 requests each) under callgrind")
    print(f"{'run':<10}{'instructions/request':>22}")
    pairs = []
    for pair in range(1, args.pairs + 1):

        def measure(repo: Path, pair: int = pair) -> float:
            label = "now" if repo == this else "before"
            count = instructions_run(
                scratch / f"{label}-{pair}", connections=args.connections, cycles=cycles, repo=repo
            )
            print(f"{label + ' ' + str(pair):<10}{count:>22,.0f}", flush=True)
            return count

        pairs.append(paired(pair - 1, other, measure, this=this))
    print()
    print_table(
        [Figure(label="instructions per request", pairs=pairs, unit="", lower_is_better=True)],
        other=other,
        this=this,
    )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline-seconds", type=float, default=15.0)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the server to FILE")
    parser.add_argument(
        "--repo",
        type=Path,
        default=None,
        help="serve with another checkout's code (say, a worktree of an earlier commit); the "
        "load, the checks and the in-process baseline stay this checkout's",
    )
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another checkout (say, a worktree of an earlier commit) to run in turns with this "
        "one (or with --repo): before, now, before, now... for --pairs pairs, then the medians "
        "(no in-process baseline)",
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="pairs of runs with --against or --metrics"
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="compare the server without and with --metrics-listen (scraped every second), "
        "in turns for --pairs pairs, and print the ratios",
    )
    parser.add_argument(
        "--instructions",
        type=int,
        default=None,
        metavar="CYCLES",
        help="with --against or --metrics: count the server's instructions per request under "
        "callgrind "
        "(valgrind), CYCLES create/describe/delete cycles per connection, instead of timing",
    )
    parser.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default=None,
        help="the servers' event.loop (default: theirs, auto: uvloop where installed)",
    )
    args = parser.parse_args()
    if args.event_loop is not None:
        SERVER_OVERRIDES.extend(["--override", f"event.loop={args.event_loop}"])
    _check_encoders()
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="server-bench-"))
    if args.metrics and args.instructions is not None:
        _metrics_instructions(args, scratch)
        return
    if args.instructions is not None:
        if args.against is None:
            parser.error("--instructions compares two checkouts: give --against PATH")
        if args.instructions < 1:
            parser.error(f"--instructions needs at least 1 cycle, got {args.instructions}")
        _instructions(args, scratch)
        return
    if args.metrics:
        _metrics_pairs(args, scratch)
        return
    if args.against is not None:
        _interleaved(args, scratch)
        return
    run, stats = serve_run(
        scratch,
        connections=args.connections,
        seconds=args.seconds,
        repo=args.repo,
        label="now",
        profile=args.profile,
    )
    # The baseline runs on the event loop the server ran on: the network and the protocol are
    # what the ratio prices, not the loop (on uvloop the in-process service is ~3% faster).
    baseline = _run_on(
        run.event_loop, _baseline(scratch / "baseline", args.connections, args.baseline_seconds)
    )
    print(
        f"{args.connections} connections, {run.elapsed:.1f} s, {run.requests:,} requests "
        f"({stats.writes:,} writes), errors: {len(stats.errors)}, log check: "
        f"{len(stats.created):,} creates and {len(stats.deleted):,} deletes match the "
        f"acknowledgements; load average at the start {run.load}; event loop of the server "
        f"and the in-process baseline: {run.event_loop}"
    )
    print()
    print(f"{'measure':<26}{'server':>14}{'in-process':>14}{'ratio':>8}  target")
    rate = run.writes_per_s
    print(f"{'admin writes/s':<26}{rate:>14,.0f}{baseline:>14,.0f}{rate / baseline:>8.2f}  >= 0.5")
    print(f"{'requests/s (all)':<26}{run.requests / run.elapsed:>14,.0f}")
    print(f"{'latency p50':<26}{run.p50_ms:>12.1f}ms")
    print(f"{'latency p99':<26}{run.p99_ms:>12.1f}ms{'':>22}  <= 10 ms")
    print(
        f"{'server CPU per request':<26}{run.cpu_us:>12.0f}us"
        f"   (all threads; main thread busy {run.main_busy:.0%} of the run)"
    )
    if stats.errors:
        print("errors:", *stats.errors[:10], sep="\n  ")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
