"""Our own APIs, the AdminClient and `mlog ... --bootstrap-server` against a running server.

The parity test runs one script of commands on a data directory and the same script through
a server, and requires the same output, the same errors and the same exit codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import io
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.cli.main import main
from api.client import AdminClient, RemoteError
from api.client.connection import ClientError
from api.protocol import private
from api.protocol.connection import Close, Connection, PrivateRequest
from api.server.kafka.base import Session
from api.server.private_apis import INLINE_FETCH_ENTRIES, PrivateApis, plain_fields
from api.service.service import MetadataService
from records.model import ConfigResourceType
from records.uuids import Uuid
from replay.controller.commands import (
    BrokerAction,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    DeletePartitionsTopic,
    MoveTopic,
    Reassignment,
    TopicPartition,
    TopicRef,
)
from replay.controller.errors import ErrorCode
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, Provenance
from replay.timetravel import Entity
from tests.support.paths import REPO
from tests.support.server_thread import running_server

PRINCIPAL = "User:ANONYMOUS"  # what the server records for its (unauthenticated) clients

SCRIPT: list[list[str]] = [
    ["brokers", "register", "--id", "1", "--rack", "a"],
    ["brokers", "register", "--id", "2", "--rack", "b"],
    ["brokers", "register", "--id", "3", "--rack", "a"],
    ["brokers", "list"],
    ["namespaces", "create", "--namespace", "team.blue"],
    ["topics", "create", "--topic", "orders", "--replica-assignment", "1:2,2:3,3:1"],
    ["topics", "create", "--topic", "orders", "--replica-assignment", "1:2"],  # exists
    ["topics", "create", "--topic", "pay", "--namespace", "team.blue", "--replica-assignment", "2"],
    ["topics", "create", "--topic", "bad name!", "--partitions", "1"],  # invalid
    ["topics", "list"],
    ["topics", "describe", "--topic", "orders"],
    ["--output", "json", "topics", "describe"],
    [
        "topics",
        "add-partitions",
        "--topic",
        "orders",
        "--partitions",
        "4",
        "--replica-assignment",
        "2:1",
    ],
    ["configs", "alter", "--cluster", "--set", "delete.topic.partition.enable=true"],
    ["configs", "alter", "--topic", "orders", "--set", "retention.ms=1000"],
    ["configs", "alter", "--topic", "orders", "--set", "no.such.key=1"],  # invalid
    ["configs", "describe", "--topic", "orders"],
    ["topics", "alter", "--topic", "orders", "--partitions", "2", "--delete-partitions-delay", "0"],
    [
        "topics",
        "alter",
        "--topic",
        "orders",
        "--partitions",
        "1",
        "--delete-partitions-delay",
        "3600000",
    ],
    ["topics", "describe", "--topic", "orders"],
    ["topics", "purge-pending"],
    ["namespaces", "create", "--namespace", "team.red"],
    [
        "topics",
        "move",
        "--topic",
        "pay",
        "--from-namespace",
        "team.blue",
        "--to-namespace",
        "team.red",
    ],
    ["namespaces", "list", "--recursive"],
    ["brokers", "fence", "--id", "3"],
    ["leaders", "elect"],
    [
        "partitions",
        "reassign",
        "--topic",
        "orders",
        "--partition",
        "0",
        "--replicas",
        "3,1",
    ],  # busy
    [
        "partitions",
        "reassign",
        "--topic",
        "pay",
        "--namespace",
        "team.red",
        "--partition",
        "0",
        "--replicas",
        "3,1",
    ],
    ["partitions", "list-reassignments"],
    ["brokers", "unfence", "--id", "3"],
    ["topics", "delete", "--topic", "orders"],
    ["topics", "delete", "--topic", "orders"],  # already gone
    ["namespaces", "delete", "--namespace", "nope"],  # unknown
    ["history", "--topic", "orders"],
    ["--output", "json", "history", "--broker", "3", "--limit", "3"],
    ["image", "diff", "--from", "5", "--to", "12"],
    ["image", "show", "--at-offset", "10", "/topics"],
    ["image", "show", "/"],
    ["namespaces", "delete", "--namespace", "team.blue", "--recursive"],
    ["log", "dump", "--gt", "3", "--limit", "6"],
    ["--output", "json", "log", "dump", "--lte", "4"],
    ["log", "dump", "--gt", "100000"],  # past the end: nothing
]

_ID = re.compile(r"\b[A-Za-z0-9_-]{22}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
_MS = re.compile(r"\b1[78]\d{11}\b")
_EPOCH = re.compile(r'"epoch":\d+|epoch: \d+')


def _normal(text: str, ids: dict[str, str]) -> str:
    """Random ids numbered in order of appearance; wall-clock times masked."""

    def number(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.islower():  # a 22-letter word such as in_controlled_shutdown
            return token
        return ids.setdefault(token, f"<id{len(ids)}>")

    # Each embedded command opens the log as a new writer, which bumps its epoch.
    text = _EPOCH.sub("<epoch>", text)
    return _MS.sub("<ms>", _TIME.sub("<time>", _ID.sub(number, text)))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def _transcript(
    prefix: list[str], capsys: pytest.CaptureFixture[str]
) -> list[tuple[int, str, str]]:
    ids: dict[str, str] = {}
    lines = []
    for command in SCRIPT:
        code, out, err = _run([*prefix, *command], capsys)
        out = _normal(out, ids)
        if command[:2] == ["image", "show"]:
            # Topics by id are listed in id order, and ids are random.
            out = "\n".join(sorted(out.splitlines()))
        lines.append((code, out, _normal(err, ids)))
    return lines


def test_every_command_prints_the_same_through_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLOG_BOOTSTRAP_SERVER", raising=False)
    # The embedded CLI records the login name unless told; the server, its connection's
    # principal (history prints them).
    monkeypatch.setattr("getpass.getuser", lambda: PRINCIPAL.removeprefix("User:"))

    # Through a server each write is noted in its batch (a ClientWriteRecord: its id and
    # answer), which moves every later offset the log, history and diff commands print. The
    # notes are tested in test_private_writes.py; here the writes go without an id, so the
    # two logs hold the same entries at the same offsets.
    async def once(self: AdminClient, send: Any) -> Any:
        return await send(None)

    monkeypatch.setattr(AdminClient, "_idempotent", once)
    local = _transcript(["--data-dir", str(tmp_path / "local")], capsys)
    with running_server(tmp_path / "served" / "log", brokers=0) as server:
        remote = _transcript(["--bootstrap-server", server.address], capsys)
    assert len(local) == len(remote) == len(SCRIPT)
    for command, mine, theirs in zip(SCRIPT, local, remote, strict=True):
        assert theirs == mine, "\n".join(
            [" ".join(command), *difflib.unified_diff(mine[1].splitlines(), theirs[1].splitlines())]
        )
    codes = [code for code, _, _ in local]
    assert codes.count(2) == 6, codes  # the six refused commands, refused both ways


def test_bootstrap_server_is_refused_where_only_the_data_directory_can_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert _run([*data, "brokers", "register", "--id", "1"], capsys)[0] == 0
    code, _, err = _run([*data, "log", "segments", "--bootstrap-server", "127.0.0.1:1"], capsys)
    assert code == 2 and "`mlog log segments` works on the data directory only" in err
    # The environment names the server for the commands that use one; the others ignore it.
    monkeypatch.setenv("MLOG_BOOTSTRAP_SERVER", "127.0.0.1:1")
    assert _run([*data, "log", "segments"], capsys)[0] == 0
    code, _, err = _run(["topics", "list"], capsys)
    assert code == 2 and "cannot connect to 127.0.0.1:1" in err and "mlog serve" in err
    code, _, err = _run(["--bootstrap-server", "nohost", "topics", "list"], capsys)
    assert code == 2 and "is not HOST:PORT" in err
    code, _, err = _run(
        ["namespaces", "create", "--namespace", "x", "--principal", "User:me"], capsys
    )
    assert code == 2 and "drop --principal or --bootstrap-server" in err


# ---------------------------------------------------------------------- the client


def _connect(address: str) -> AdminClient:
    return asyncio.run(AdminClient.connect(address))


async def _client_session(address: str) -> None:
    async with await AdminClient.connect(address) as client:
        versions = await client.api_versions()
        assert versions[private.FETCH_LOG.key] == (0, 0) and versions[3] == (0, 13)
        (created,) = await client.create_topics([CreatableTopic(name="t", num_partitions=2)])
        assert created.outcome.ok and created.num_partitions == 2
        await client.create_namespace("ns.a")
        infos = await client.list_namespaces(recursive=True)
        assert [i.name for i in infos] == ["ns.a"]
        moved = await client.move_topic(MoveTopic(topic=TopicRef(name="t"), to_namespace="ns.a"))
        assert moved.to_name == "ns.a:t" and moved.topic_id == created.topic_id
        (refused,) = await client.delete_partitions(
            [DeletePartitionsTopic(topic=TopicRef(name="ns.a:t"), count=1, delay_ms=0)]
        )
        assert refused.outcome.error_code == ErrorCode.INVALID_PARTITIONS  # disabled by default
        with pytest.raises(RemoteError) as error:
            await client.delete_namespace("missing")
        assert error.value.error_code == ErrorCode.INVALID_REQUEST
        # The image the server sends is the committed one, record for record.
        image = await client.image_at()
        served = await client.image_at(at_offset=image.provenance.offset)
        assert list(image.write()) == list(served.write())
        earlier = await client.image_at(at_offset=2)
        assert earlier.provenance.offset == 2 and not earlier.topics.by_name
        start, end, changes = await client.diff("2")
        assert (start, end) == (2, image.provenance.offset)
        assert any(c.kind == "topic" and c.name == "ns.a:t" for c in changes)
        lines = await client.history(Entity(topic_id=created.topic_id))
        assert lines[0].record_type == "TopicRecord" and lines[-1].record_type == "MoveTopicRecord"
        with pytest.raises(RemoteError, match="past the end"):
            await client.image_at(at_offset=10_000)


def test_admin_client_private_apis(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_client_session(server.address))


def test_server_log_lines_show_values_not_python_reprs() -> None:
    request = private.DeletePartitions(
        topics=(
            DeletePartitionsTopic(topic=TopicRef(name="orders"), count=3, delay_ms=600_000),
            DeletePartitionsTopic(topic=TopicRef(name="a b"), count=1, delay_ms=0),
        )
    )
    assert plain_fields(request) == (
        'topics=[topic=orders count=3 delay_ms=600000, topic="a b" count=1 delay_ms=0] '
        "validate_only=False"
    )
    change = private.ChangeBroker(broker_id=3, action=BrokerAction.FENCE)
    assert plain_fields(change) == "broker_id=3 action=fence"
    move = MoveTopic(topic=TopicRef(name="org:t"), to_namespace="")
    assert plain_fields(move) == 'topic=org:t to_namespace=""'


async def _cancel_session(address: str) -> None:
    async with await AdminClient.connect(address) as client:
        await client.create_topics([CreatableTopic(name="c", num_partitions=3)])
        cluster = ConfigResource(type=ConfigResourceType.BROKER, name="")
        await client.alter_configs(cluster, {"delete.topic.partition.enable": "true"})
        (reduced,) = await client.delete_partitions(
            [DeletePartitionsTopic(topic=TopicRef(name="c"), count=1, delay_ms=3_600_000)]
        )
        assert reduced.outcome.ok and reduced.removed == (1, 2)
        (cancelled,) = await client.cancel_partition_deletions([TopicRef(name="c")])
        assert cancelled.outcome.ok and cancelled.restored == (1, 2)
        (again,) = await client.cancel_partition_deletions([TopicRef(name="c")])
        assert again.outcome.error_code == ErrorCode.INVALID_REQUEST
        image = await client.image_at()
        topic = image.topics.get_by_name("c")
        assert topic is not None and topic.pending_deletion is None
        assert len(topic.partitions) == 3


def test_a_pending_partition_deletion_is_cancelled_through_the_server(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_cancel_session(server.address))


async def _follow(address: str) -> None:
    leader = await AdminClient.connect(address)
    follower = await AdminClient.connect(address)
    try:
        entries, end = await follower.fetch_log(0)
        assert [e.offset for e in entries] == list(range(end))
        # Blocks travel whole; the client trims them to what it asked for.
        middle, _ = await follower.fetch_log(2, max_entries=2)
        assert [e.offset for e in middle] == [2, 3] and middle[0] == entries[2]
        delta = MetadataDelta(EMPTY_IMAGE)
        delta.replay_all(e.record for e in entries)
        # A long poll at the end answers as soon as a write commits.
        waiting = asyncio.create_task(follower.fetch_log(end, max_wait_ms=20_000))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await leader.create_topics([CreatableTopic(name="late", num_partitions=3)])
        more, new_end = await asyncio.wait_for(waiting, 10)
        assert more[0].offset == end and new_end == end + len(more)
        delta.replay_all(e.record for e in more)
        last = more[-1]
        mine = delta.apply(Provenance(offset=last.offset, epoch=last.epoch, timestamp=0))
        served = await leader.image_at()
        assert mine.same_state(served)
        # Nothing new: an empty answer after the wait; past the end: an error.
        assert (await follower.fetch_log(new_end, max_wait_ms=50))[0] == []
        with pytest.raises(RemoteError) as error:
            await follower.fetch_log(new_end + 5)
        assert error.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        # The schema was sent once; later answers name it by id.
        assert follower._entries.known is not None
    finally:
        await leader.close()
        await follower.close()


def test_fetch_log_long_polls_and_a_follower_keeps_its_image_current(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_follow(server.address))


async def _far_and_near(address: str) -> None:
    async with await AdminClient.connect(address) as client:
        many = INLINE_FETCH_ENTRIES + 200
        await client.create_topics([CreatableTopic(name="wide", num_partitions=many)])
        _, end = await client.fetch_log(0, max_entries=1)
        # From the start: read on the worker thread; near the end: on the loop.
        far: list[Any] = []
        while not far or far[-1].offset < end - 1:
            got, _ = await client.fetch_log(len(far), max_entries=500)
            far.extend(got)
        near_from = end - INLINE_FETCH_ENTRIES // 2
        near, near_end = await client.fetch_log(near_from)
        assert near_end == end and near[0].offset == near_from
        assert near == far[near_from:end]
        assert [e.offset for e in far] == list(range(end))


def test_fetches_far_behind_and_near_the_end_read_the_same_entries(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_far_and_near(server.address))


@pytest.mark.parametrize("through_server", [False, True])
def test_log_dump_follow_prints_entries_as_they_are_committed(
    tmp_path: Path, through_server: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mlog log dump --follow` waits past the log's end; `--limit` ends it after new entries."""
    monkeypatch.delenv("MLOG_BOOTSTRAP_SERVER", raising=False)
    log_dir = tmp_path / "data" / "log"
    with running_server(log_dir, brokers=1) as server:
        where = (
            ["--bootstrap-server", server.address]
            if through_server
            else ["--data-dir", str(tmp_path / "data")]
        )
        end = server.service.log.end_offset
        out = io.StringIO()
        codes: list[int] = []
        argv = [*where, "log", "dump", "--follow", "--gt", str(end - 1), "--limit", "2"]
        follower = threading.Thread(target=lambda: codes.append(main(argv, out=out)), daemon=True)
        follower.start()
        time.sleep(1.0)  # it has read to the end and waits
        assert follower.is_alive() and out.getvalue() == ""

        async def create() -> None:
            async with await AdminClient.connect(server.address) as client:
                (created,) = await client.create_topics([CreatableTopic(name="late")])
                assert created.outcome.ok

        asyncio.run(create())
        follower.join(30)
        assert not follower.is_alive() and codes == [0]
    lines = out.getvalue().splitlines()
    assert [line.split(" ")[1] for line in lines] == [str(end), str(end + 1)]
    assert '"name":"late"' in lines[0] and "PARTITION_RECORD" in lines[1]


@pytest.mark.process
def test_log_dump_follow_ends_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """SIGINT ends a follower as every command: exit 130, one line, what it printed intact."""
    log_dir = tmp_path / "data" / "log"
    # A suite started as a background job of a shell without job control (`nohup ... &`, the
    # mutation runner under it) ignores SIGINT, and an ignored signal stays ignored across
    # exec: the followers would never see the Ctrl-C. A handled one is reset to the default.
    with contextlib.ExitStack() as stack:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        stack.callback(signal.signal, signal.SIGINT, previous)
        server = stack.enter_context(running_server(log_dir, brokers=1))
        followers = {
            where: subprocess.Popen(
                [sys.executable, "-m", "api.cli", *args, "log", "dump", "--follow"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "MLOG_BOOTSTRAP_SERVER": ""},
            )
            for where, args in {
                "server": ["--bootstrap-server", server.address],
                "data directory": ["--data-dir", str(tmp_path / "data")],
            }.items()
        }
        printed = {}
        for where, process in followers.items():
            # Each is waiting once it printed the log so far, the broker's registration last
            # (a follower flushes each line).
            assert process.stdout is not None
            printed[where] = b""
            while b"REGISTER_BROKER_RECORD" not in printed[where]:
                ready, _, _ = select.select([process.stdout], [], [], 120)
                assert ready, f"the follower of the {where} printed {printed[where]!r} only"
                # Unbuffered: a buffered readline could hold the next line where select
                # does not see it.
                printed[where] += os.read(process.stdout.fileno(), 1 << 16)
        for where, process in followers.items():
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
            assert process.returncode == 130, (where, err)
            assert err == b"mlog: interrupted\n", (where, err)
            assert (printed[where] + out).decode().count("REGISTER_BROKER_RECORD") == 1, where


def test_shutdown_answers_a_long_poll_at_once(tmp_path: Path) -> None:
    polling = threading.Event()

    async def poll(address: str) -> int:
        async with await AdminClient.connect(address) as client:
            _, end = await client.fetch_log(0)
            polling.set()
            entries, _ = await client.fetch_log(end, max_wait_ms=60_000)
            return len(entries)

    results: list[int] = []
    with running_server(tmp_path / "log") as server:
        thread = threading.Thread(target=lambda: results.append(asyncio.run(poll(server.address))))
        thread.start()
        # Connected and answered once (a loaded host may take seconds): the long poll is sent
        # next; the pause lets it reach the server before the shutdown.
        assert polling.wait(120)
        time.sleep(0.5)
        started = time.monotonic()
    assert time.monotonic() - started < 20
    thread.join(10)
    assert results == [0]


def test_a_malformed_private_body_is_refused_and_the_connection_stays_open(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log") as server:
        host, port = server.host, server.port
        with socket.create_connection((host, port), timeout=10) as sock:
            api = private.LIST_NAMESPACES
            header = struct.pack(">hhih", api.key, 0, 7, -1)
            sock.sendall(struct.pack(">i", len(header) + 3) + header + b"\xff\xff\xff")
            size = struct.unpack(">i", _read(sock, 4))[0]
            correlation, status, body = private.decode_response(api, _read(sock, size))
            assert correlation == 7 and body is None
            assert status.error_code == ErrorCode.INVALID_REQUEST
            assert "ListNamespaces" in (status.error_message or "")
            good = private.encode_request(api, private.ListNamespaces(), correlation_id=8)
            sock.sendall(good)
            size = struct.unpack(">i", _read(sock, 4))[0]
            correlation, status, body = private.decode_response(api, _read(sock, size))
            assert (correlation, status.error_code, body.namespaces) == (8, 0, ())
            # An unsupported version closes the connection, as Kafka does.
            bad = bytearray(good)
            struct.pack_into(">h", bad, 6, 9)
            sock.sendall(bytes(bad))
            assert sock.recv(10) == b""


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_client_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="is not HOST:PORT"):
        _connect("localhost")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(ClientError, match="cannot connect"):
        _connect(f"127.0.0.1:{port}")


def test_private_api_schemas_are_the_documented_ones() -> None:
    documented = json.loads((REPO / "docs" / "private_apis.json").read_text())
    assert private.schemas_document() == documented, (
        "regenerate with `python -m api.protocol.private`"
    )


# ---------------------------------------------------------------------- fuzz

_PRIVATE_SEEDS = [
    private.encode_request(api, request, correlation_id=5)
    for api, request in (
        (private.LIST_NAMESPACES, private.ListNamespaces(namespace="a", recursive=True)),
        (private.CREATE_NAMESPACE, CreateNamespace(name="team")),
        (
            private.DELETE_PARTITIONS,
            private.DeletePartitions(
                topics=(DeletePartitionsTopic(topic=TopicRef(name="t"), count=1, delay_ms=5),)
            ),
        ),
        (private.FETCH_LOG, private.FetchLog(offset=0, max_entries=3)),
        (private.IMAGE_AT, private.ImageAt(at_offset=0)),
        (private.DIFF, private.Diff(from_point="0")),
        (private.HISTORY, private.History(entity=private.Entity(topic="t"), limit=2)),
    )
]


@st.composite
def _mutated_private(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(_PRIVATE_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        frame[draw(st.integers(14, len(frame) - 1))] = draw(st.integers(0, 255))
    return bytes(frame)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_mutated_private())
def test_fuzzed_private_requests_are_answered_or_closed(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    service = MetadataService.open(tmp_path_factory.mktemp("fuzz") / "log")
    try:
        apis = PrivateApis(service)
        for event in Connection().receive(data):
            if isinstance(event, PrivateRequest):
                session = Session(principal="User:fuzz")
                answer = asyncio.run(apis.handle(event.header, event.body, session))
                api = private.PRIVATE_APIS[event.header.api_key]
                (size,) = struct.unpack_from(">i", answer)
                assert size == len(answer) - 4
                correlation, status, _ = private.decode_response(api, answer[4:])
                assert correlation == 5 and status.error_code in {int(c) for c in ErrorCode}
            else:
                assert isinstance(event, Close)
    finally:
        service.close()


async def _kafka_apis_through_the_client(address: str) -> None:
    async with await AdminClient.connect(address) as client:
        (created,) = await client.create_topics([CreatableTopic(name="k", num_partitions=2)])
        metadata = await client.metadata(["k"])
        assert [t.name for t in metadata.topics] == ["k"] and len(metadata.brokers) == 1
        by_id = await client.metadata(topic_ids=[created.topic_id])
        assert by_id.topics[0].name == "k"
        assert await client.topic_name(TopicRef(topic_id=created.topic_id)) == "k"
        topic = ConfigResource(type=ConfigResourceType.TOPIC, name="k")
        described = await client.describe_configs([topic])
        retention = {c.name: c for c in described.results[0].configs}["retention.ms"]
        assert retention.value == "604800000" and not retention.read_only
        altered = await client.alter_configs(topic, {"retention.ms": "1000"})
        assert int(altered.responses[0].error_code) == 0
        described = await client.describe_configs([topic])
        assert {c.name: c.value for c in described.results[0].configs}["retention.ms"] == "1000"
        cluster = await client.describe_cluster()
        assert cluster.controller_id == 0 and [b.broker_id for b in cluster.brokers] == [0]
        pages = await client.describe_topic_partitions(["k"])
        assert [len(t.partitions) for t in pages.topics] == [2]
        (moved,) = await client.alter_partition_reassignments(
            [
                Reassignment(
                    partition=TopicPartition(topic=TopicRef(name="k"), partition=0),
                    replicas=(1, 2, 3),
                )
            ]
        )
        assert moved.outcome.ok
        listed = await client.list_partition_reassignments()
        assert int(listed.error_code) == 0
        # this server runs without an authorizer: Kafka's answer to an ACL API then
        with pytest.raises(RemoteError, match="SECURITY_DISABLED"):
            await client.describe_acls()
        with pytest.raises(RemoteError, match="UNKNOWN_TOPIC_ID"):
            await client.topic_name(TopicRef(topic_id=Uuid.random()))


def test_the_client_speaks_every_kafka_api(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_kafka_apis_through_the_client(server.address))


Page = tuple[list[tuple[str, list[int]]], tuple[str, int] | None]
"""A DescribeTopicPartitions page: (topic, partition ids) listed, and its next cursor."""


async def _pages(address: str, *, limit: int) -> list[Page]:
    pages: list[Page] = []
    async with await AdminClient.connect(address) as client:
        await client.create_topics(
            [
                CreatableTopic(name="a", num_partitions=3),
                CreatableTopic(name="b", num_partitions=2),
            ]
        )
        cursor: dict[str, object] | None = None
        while True:
            page = await client.request(
                75,
                topics=[{"name": "b"}, {"name": "a"}],
                response_partition_limit=limit,
                cursor=cursor,
            )
            listed = [(t.name, [int(p.partition_index) for p in t.partitions]) for t in page.topics]
            after = page.next_cursor
            if after is None:
                pages.append((listed, None))
                return pages
            pages.append((listed, (after.topic_name, int(after.partition_index))))
            cursor = {"topic_name": after.topic_name, "partition_index": after.partition_index}


def test_describe_topic_partitions_pages_by_the_partition_limit(tmp_path: Path) -> None:
    """Each page holds at most the limit's partitions; its cursor is where the next one starts."""
    with running_server(tmp_path / "log") as server:
        pages = asyncio.run(_pages(server.address, limit=2))
    assert pages == [
        ([("a", [0, 1])], ("a", 2)),
        ([("a", [2]), ("b", [0])], ("b", 1)),
        ([("b", [1])], None),
    ]


# ---------------------------------------------------------------------- older versions


def test_history_v0_requests_are_read_as_before_users_could_be_followed() -> None:
    # A History v0 frame (an older mlog) is read as the same request, not misread as v1.
    request = private.History(entity=private.Entity(namespace="org"), gt=3, lte=9, limit=2)
    frame = private.encode_request(private.HISTORY, request, correlation_id=1, version=0)
    header, body = private.private_header(frame[4:], private.HISTORY.key, 0, 1)
    assert private.decode_request_body(private.HISTORY, body, header.api_version) == request
    newest = private.encode_request(private.HISTORY, request, correlation_id=1)
    assert len(newest) == len(frame) + 1  # v1 adds the (null) user to the entity
    _, new_body = private.private_header(newest[4:], private.HISTORY.key, 1, 1)
    assert private.decode_request_body(private.HISTORY, new_body, 1) == request
    assert private.PRIVATE_VERSIONS[private.HISTORY.key] == (0, 1)


def test_a_user_history_cannot_be_asked_of_a_server_that_only_speaks_history_v0() -> None:
    request = private.History(entity=private.Entity(user="alice"))
    with pytest.raises(private.OlderVersionError, match="upgrade the server"):
        private.encode_request(private.HISTORY, request, correlation_id=1, version=0)


async def _images_forward(address: str, points: list[int]) -> list[list[object]]:
    async with await AdminClient.connect(address) as client:
        return [list((await client.image_at(at_offset=p)).write()) for p in points]


def test_a_server_answers_a_later_past_point_from_the_image_it_kept(tmp_path: Path) -> None:
    # ImageAt keeps the image before each point it builds: a later point replays the gap
    # only, and answers as a fresh build does.
    with running_server(tmp_path / "log") as server:
        for n in range(12):
            server.service.execute(
                partial(
                    server.service.controller.create_topics,
                    topics=[CreatableTopic(name=f"t{n}", num_partitions=1)],
                )
            )
        end = server.service.image.provenance.offset
        points = [end - 20, end - 10, end - 4]
        forward = asyncio.run(_images_forward(server.address, points))
        assert server.private_apis.images.hits == 2
        fresh = []
        for point in points:
            server.private_apis.images.clear()
            fresh.extend(asyncio.run(_images_forward(server.address, [point])))
        assert server.private_apis.images.hits == 2  # no more
    assert forward == fresh
