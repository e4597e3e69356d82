"""A controller quorum of real `mlog serve` processes on loopback, and the checks of its logs.

Used by tests/system/test_quorum_processes.py and bench/quorum_bench.py. Each node is formatted with
`mlog quorum format` and started with `mlog serve --config` (Kafka's keys), on ports picked
free beforehand: a client listener (`protocol`, the node's `address`) and a CONTROLLER listener
with mTLS (`controller.listener.names`, certificates made at test time, `controller_certs.py`),
which the voters and bootstrap servers name. `Quorum.writer` drives writes through
`AdminClient.connect_controller`, following the leader across failures, and remembers what
was acknowledged; `check_logs` proves every acknowledged write is in every node's log, with
identical entries per offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from api.cli.main import main as cli_main
from api.client import AdminClient
from api.security.client_config import ClientSecurity
from metadata_log.errors import LogError
from metadata_log.reader import LogReader
from records import TopicRecord
from replay.controller.commands import CreatableTopic, RegisterBroker
from tests.support.controller_certs import ControllerPki, make_controller_pki
from tests.support.paths import REPO
from tests.support.serve_forks import ChildProcess, spawn_serve
from tests.support.tcp_proxy import Proxy, ProxyLoop

PROJECT = REPO
"""Where `mlog serve` children start (first on their path): a bench may point it at another
checkout to run that code."""

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
"""Every test quorum's cluster id (with proxies, each node's voters string differs)."""


DIRECTORY_IDS = (
    "AAAAAAAAQACAAAAAAAAAAQ",
    "AAAAAAAAQACAAAAAAAAAAg",
    "AAAAAAAAQACAAAAAAAAAAw",
    "AAAAAAAAQACAAAAAAAAABA",
    "AAAAAAAAQACAAAAAAAAABQ",
)
"""The directory ids a dynamic test quorum's initial controllers are formatted with."""


PORT_RANGE = (10_000, 32_768)
"""Where `free_ports` picks: below Linux's ephemeral range (32768-60999), which every outgoing
connection of the machine takes its port from. A port the kernel handed out (`bind(0)`) came
from that range, and was taken again by another suite's client before the node bound it
(`address already in use`, with two suites running side by side)."""


RESERVATIONS = Path(tempfile.gettempdir()) / "mlog-test-ports"
"""One empty file per port a test picked (`reserve_port`), shared by every suite of the machine."""

RESERVED_SECONDS = 900.0
"""How long a picked port stays reserved: longer than a test holds a server's port."""


def reserve_port(port: int) -> bool:
    """Whether `port` is this caller's to use: no test on this machine picked it lately.

    A free port is only free until its server binds it, a second or more after the pick for a
    process under load; two suites side by side picking at random (or a test and another
    worker) met in that window (`address already in use`). A pick creates
    `RESERVATIONS/<port>` exclusively; a reservation older than `RESERVED_SECONDS` is
    removed, and the port left to a later pick.
    """
    RESERVATIONS.mkdir(exist_ok=True)
    path = RESERVATIONS / str(port)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - path.stat().st_mtime > RESERVED_SECONDS:
                path.unlink()
        return False


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports of 127.0.0.1 that were free a moment ago.

    Picked at random in `PORT_RANGE` among those no test reserved lately (`reserve_port`),
    each held bound until all are chosen.
    """
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            port = random.randrange(*PORT_RANGE)
            if not reserve_port(port):
                continue
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()  # in use: another
                continue
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass(slots=True)
class Node:
    """One controller: its id, port, data directory and (while running) its process."""

    node_id: int
    port: int
    data_dir: Path
    config: Path
    stderr: Path
    process: ChildProcess | None = None
    controller_port: int = 0
    """Its CONTROLLER listener's port (mTLS: the other controllers reach it there)."""

    @property
    def address(self) -> str:
        """`127.0.0.1:port`: its client listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def controller_address(self) -> str:
        """`127.0.0.1:controller_port`: its CONTROLLER listener."""
        return f"127.0.0.1:{self.controller_port}"

    @property
    def running(self) -> bool:
        """Whether its process is alive."""
        return self.process is not None and self.process.poll() is None


@dataclass(slots=True)
class Quorum:
    """Three (or five) `mlog serve` processes forming one quorum."""

    root: Path
    size: int = 3
    timers: dict[str, int | str] = field(default_factory=dict)
    """More server keys (Kafka's names) for every node: timers, TLS, an authorizer."""
    protocol: str = "PLAINTEXT"
    """The client listener's security protocol (its name too)."""
    security: ClientSecurity | None = None
    """How the test's clients connect (None: PLAINTEXT)."""
    proxies: ProxyLoop | None = None
    """With proxies, node i reaches node j through its own proxy `links[i, j]` (cut-able)."""
    node_env: dict[int, dict[str, str]] = field(default_factory=dict)
    """More environment variables for one node's process, by node id (read at each start)."""
    dynamic: bool = False
    """KIP-853: voters in the log (`controller.quorum.bootstrap.servers`, formatted with
    `--initial-controllers`) instead of `controller.quorum.voters`; nodes may be added."""
    nodes: dict[int, Node] = field(default_factory=dict)
    links: dict[tuple[int, int], Proxy] = field(default_factory=dict)
    pki: ControllerPki | None = None
    """The controllers' CA and certificate (made on first use under `root / "pki"`)."""

    def __post_init__(self) -> None:
        self.pki = make_controller_pki(self.root / "pki")
        both = free_ports(2 * self.size)
        ports, controller_ports = both[: self.size], both[self.size :]
        ids = range(1, self.size + 1)
        if self.proxies is not None:
            for i in ids:
                for j in ids:
                    if i != j:
                        self.links[i, j] = self.proxies.proxy(controller_ports[j - 1])
        initial = ",".join(
            f"{j}@127.0.0.1:{controller_ports[j - 1]}:{DIRECTORY_IDS[j - 1]}" for j in ids
        )
        for index, port in enumerate(ports):
            node_id = index + 1
            voters = ",".join(
                f"{j}@127.0.0.1:{self._port(node_id, j, controller_ports[j - 1])}" for j in ids
            )
            quorum_key = (
                f"controller.quorum.bootstrap.servers={self.bootstrap_servers(controller_ports)}"
                if self.dynamic
                else f"controller.quorum.voters={voters}"
            )
            node = self.configure_node(
                node_id, port, quorum_key, controller_port=controller_ports[index]
            )
            self.format(node, *(("--initial-controllers", initial) if self.dynamic else ()))

    @staticmethod
    def bootstrap_servers(ports: Sequence[int]) -> str:
        """`controller.quorum.bootstrap.servers` of these (controller) ports on loopback."""
        return ",".join(f"127.0.0.1:{port}" for port in ports)

    @staticmethod
    def format(node: Node, *flags: str) -> str:
        """`mlog quorum format` of `node` (its config, data directory, the cluster id, `flags`).

        Run in this process (the CLI's own `main`, as a process would run it) unless the nodes
        run another checkout's code (`PROJECT`): a format is 0.2 CPU-seconds of a process's
        start-up for a few milliseconds of work, and the suite formats over a hundred nodes.
        """
        args = ("quorum", "format", *flags, "--config", str(node.config))
        args += ("--data-dir", str(node.data_dir), "--cluster-id", CLUSTER_ID)
        if PROJECT != REPO:
            return mlog(*args)
        return mlog_here(*args)

    def configure_node(
        self, node_id: int, port: int, quorum_key: str, *, controller_port: int | None = None
    ) -> Node:
        """Node `node_id`'s directory and server.properties (not formatted, not started).

        `port` is its client listener's; its CONTROLLER listener takes `controller_port`
        (None: a free one).
        """
        assert self.pki is not None
        if controller_port is None:
            (controller_port,) = free_ports(1)
        directory = self.root / f"node{node_id}"
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "server.properties"
        lines = [
            f"node.id={node_id}",
            f"listeners={self.protocol}://127.0.0.1:{port},"
            f"CONTROLLER://127.0.0.1:{controller_port}",
            f"listener.security.protocol.map={self.protocol}:{self.protocol},CONTROLLER:SSL",
            "controller.listener.names=CONTROLLER",
            *(f"{key}={value}" for key, value in self.pki.server_keys().items()),
            quorum_key,
            *(f"{key}={value}" for key, value in self.timers.items()),
        ]
        config.write_text("\n".join(lines) + "\n")
        node = Node(
            node_id=node_id,
            port=port,
            data_dir=directory / "data",
            config=config,
            stderr=directory / "stderr.txt",
            controller_port=controller_port,
        )
        self.nodes[node_id] = node
        return node

    def add_node(self, node_id: int) -> Node:
        """A new node of a dynamic quorum, formatted with --no-initial-controllers (not started).

        It finds the quorum through the running nodes (its bootstrap servers) and fetches as
        an observer until `mlog quorum add-controller --config` makes it a voter.
        """
        port, controller_port = free_ports(2)  # one call: two calls may return one port twice
        servers = self.bootstrap_servers([n.controller_port for n in self.nodes.values()])
        node = self.configure_node(
            node_id,
            port,
            f"controller.quorum.bootstrap.servers={servers}",
            controller_port=controller_port,
        )
        self.format(node, "--no-initial-controllers")
        return node

    def _port(self, source: int, destination: int, port: int) -> int:
        link = self.links.get((source, destination))
        return port if link is None else link.port

    def isolate(self, node_id: int) -> None:
        """Cut every link to and from `node_id` (needs proxies)."""
        for (i, j), link in self.links.items():
            if node_id in (i, j):
                link.cut()

    def heal(self) -> None:
        """Restore every link."""
        for link in self.links.values():
            link.restore()

    def start(self, node_id: int) -> None:
        """Start node `node_id` (appending to its stderr file)."""
        node = self.nodes[node_id]
        node.process = spawn_serve(
            ["serve", "--config", str(node.config), "--data-dir", str(node.data_dir)],
            stderr=node.stderr,
            append=True,
            cwd=PROJECT,
            env={**_env(), **self.node_env.get(node_id, {})},
        )

    def start_all(self) -> None:
        """Start every node."""
        for node_id in self.nodes:
            self.start(node_id)

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Send `sig` (kill -9 by default) and, for a kill, wait for the process to end."""
        node = self.nodes[node_id]
        if node.process is None:
            return
        node.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.process.wait(60)
            node.process = None

    def signal(self, node_id: int, sig: int) -> None:
        """Send `sig` to node `node_id` without waiting for anything."""
        process = self.nodes[node_id].process
        if process is not None:
            process.send_signal(sig)

    def stop_all(self) -> None:
        """SIGTERM every running node (then SIGKILL what does not stop)."""
        for node in self.nodes.values():
            if node.process is not None:
                if node.process.poll() is None:
                    node.process.send_signal(signal.SIGCONT)
                    node.process.send_signal(signal.SIGTERM)
                try:
                    node.process.wait(30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(30)
                node.process = None

    async def leader(self, timeout: float = 30.0) -> int:
        """The id of the node that takes writes, asked of the running nodes.

        Asked on their controller listeners, as a controller: a client listener names only
        its own node as the controller (it forwards the writes it does not lead). The leader
        says so itself, and is the only one that answers so: a leader cut off from its
        majority leads on until check-quorum (1.5 fetch timeouts) while the others elect a new
        one, and then neither is named until it resigns.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leading = []
            for node in self.nodes.values():
                if not node.running:
                    continue
                with contextlib.suppress(Exception):  # no answer: it says nothing
                    named = await asyncio.wait_for(self.controller_named_by(node.node_id), 4)
                    if named == node.node_id:
                        leading.append(named)
            if len(leading) == 1:
                return leading[0]
            await asyncio.sleep(0.1)
        raise TimeoutError("no leader in time: " + self.stderr_tails())

    def controller_command_config(self) -> Path:
        """A `--command-config` file for the CLI at a controller listener, as a controller.

        The quorum's own APIs (voter changes, and DescribeQuorum from any voter's view of the
        leader) are an operator's at the controller listeners, with the controllers'
        certificate (docs/security.md "The quorum's trust boundary").
        """
        assert self.pki is not None
        path = self.root / "controller-client.properties"
        path.write_text(
            "security.protocol=SSL\n"
            f"ssl.ca.location={self.pki.ca}\n"
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.location={self.pki.controller}\n"
        )
        return path

    async def controller_named_by(self, node_id: int) -> int:
        """The controller node `node_id` names on its controller listener (the leader it knows)."""
        assert self.pki is not None
        client = await AdminClient.connect(
            self.nodes[node_id].controller_address, security=self.pki.controller_client()
        )
        try:
            return int((await client.metadata([])).controller_id)
        finally:
            await client.close()

    async def serving(self, timeout: float = 30) -> None:
        """Wait until every running node accepts connections on its port.

        A commit needs only a majority: two nodes can elect a leader and take writes before
        the third listens, so a test that uses every node's address waits for this first.
        """
        deadline = time.monotonic() + timeout
        for node in self.nodes.values():
            while node.running:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", node.port)
                except OSError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"node {node.node_id} is not serving: {self.stderr_tails()}"
                        ) from None
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break

    async def register_brokers(self, ids: Sequence[int] = (1, 2, 3), timeout: float = 60) -> None:
        """Register brokers through the leader (topics need one), retrying while it changes.

        Each try starts from the next running node (one that does not answer is not asked
        again and again). Every running node is serving when it returns (`serving`).
        """
        await self.serving(timeout)
        deadline = time.monotonic() + timeout
        for attempt in itertools.count():
            running = [n for n in self.nodes.values() if n.running]
            assert running, "no node of the quorum is running: none can register brokers"
            node = running[attempt % len(running)]
            try:
                client = await AdminClient.connect_controller(
                    node.address, timeout_ms=5000, security=self.security
                )
                try:
                    for broker_id in ids:
                        await client.register_broker(RegisterBroker(broker_id=broker_id))
                finally:
                    await client.close()
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"brokers {list(ids)} not registered within {timeout} s ({exc}); "
                        f"the nodes' logs end:\n{self.stderr_tails()}"
                    ) from exc
                await asyncio.sleep(0.2)

    def stderr_tails(self) -> str:
        """The last lines of each node's stderr (for a failing test's message)."""
        parts = []
        for node in self.nodes.values():
            text = node.stderr.read_text() if node.stderr.exists() else ""
            parts.append(f"--- node {node.node_id}:\n" + "\n".join(text.splitlines()[-15:]))
        return "\n".join(parts)


@dataclass(slots=True)
class Writer:
    """Creates topics one at a time through the leader, following it across failures."""

    quorum: Quorum
    prefix: str = "w"
    acknowledged: list[str] = field(default_factory=list)
    attempts: int = 0
    failures: int = 0
    latencies: list[float] = field(default_factory=list)
    _client: AdminClient | None = None
    _turn: int = 0

    async def _connect(self) -> AdminClient:
        last: Exception | None = None
        # A different node first each time: a client that knows every node's address tries
        # another one when the last did not lead it to a controller.
        self._turn += 1
        nodes = list(self.quorum.nodes.values())
        start = self._turn % len(nodes)
        for node in nodes[start:] + nodes[:start]:
            if not node.running:
                continue
            try:
                return await asyncio.wait_for(
                    AdminClient.connect_controller(
                        node.address, timeout_ms=5000, security=self.quorum.security
                    ),
                    8,
                )
            except Exception as exc:
                last = exc
        raise ConnectionError(f"no node reachable: {last}")

    async def write_one(self) -> bool:
        """One CreateTopics of a new name; True if acknowledged."""
        name = f"{self.prefix}{self.attempts}"
        self.attempts += 1
        started = time.monotonic()
        try:
            if self._client is None:
                self._client = await self._connect()
            (result,) = await asyncio.wait_for(
                self._client.create_topics([CreatableTopic(name=name)]), 10
            )
        except Exception:
            self.failures += 1
            await self.close()
            return False
        if result.outcome.error_code != 0:
            self.failures += 1
            await self.close()  # NOT_CONTROLLER: find the leader again
            return False
        self.acknowledged.append(name)
        self.latencies.append(time.monotonic() - started)
        return True

    async def close(self) -> None:
        """Drop the connection."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def check_logs(quorum: Quorum, acknowledged: Sequence[str]) -> list[tuple[int, int, int]]:
    """Check every node's log; returns (node id, end offset, committed prefix) per node.

    Every offset present on two nodes holds identical entries; every acknowledged topic is in
    every node's log exactly once.
    """
    logs: dict[int, list[tuple[int, int, int, str | None, object]]] = {}
    for node in quorum.nodes.values():
        with LogReader.open(node.data_dir / "log") as log:
            logs[node.node_id] = [
                (e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in log.read()
            ]
    reference = max(logs.values(), key=len)
    summary = []
    for node_id, entries in logs.items():
        common = min(len(entries), len(reference))
        # Only a tail past the committed entries may differ (and be truncated later); the
        # checker requires identical entries on the offsets the final leader's log has.
        assert entries[:common] == reference[:common], f"node {node_id} diverges"
        names = [e[4].name for e in entries if isinstance(e[4], TopicRecord)]
        assert len(names) == len(set(names)), f"node {node_id} has a topic twice"
        missing = set(acknowledged) - set(names)
        assert not missing, f"node {node_id} lost acknowledged writes {sorted(missing)[:5]}"
        summary.append((node_id, len(entries), common))
    return summary


def mlog(*args: str, stdin: str | None = None) -> str:
    """Run `mlog ARGS...` (`stdin` on its standard input); its stdout (fails on a non-zero
    exit)."""
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=_env(),
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"mlog {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def mlog_here(*args: str) -> str:
    """`mlog(*args)` run in this process by the CLI's `main`: its stdout (fails on an error).

    For commands given every flag they read (`quorum format`): a flag wins over the test's
    environment (`MLOG_DATA_DIR`, ...), which `mlog`'s child would not have had."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli_main(list(args), out=out)
    if code != 0:
        raise AssertionError(f"mlog {' '.join(args)} failed: {err.getvalue()}")
    return out.getvalue()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLOG_DATA_DIR", None)
    env.pop("MLOG_BOOTSTRAP_SERVER", None)
    return env


TIMERS: dict[str, int | str] = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
}


async def write_until(writer: Writer, count: int, timeout: float = 60.0) -> None:
    """Write until `count` more writes are acknowledged."""
    target = len(writer.acknowledged) + count
    deadline = time.monotonic() + timeout
    while len(writer.acknowledged) < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(writer.acknowledged)} of {target} writes acknowledged")
        if not await writer.write_one():
            await asyncio.sleep(0.05)


async def converge(quorum: Quorum, writer: Writer, timeout: float = 60.0) -> None:
    """Wait until every running node's log ends where the leader's does."""

    await write_until(writer, 1)  # a write of the final leader's epoch: all before it is committed
    await logs_converge(quorum, timeout)


async def logs_converge(quorum: Quorum, timeout: float = 60.0) -> None:
    """Wait until every running node's log ends at the same offset.

    A commit needs a majority (the leader and the faster follower): the other follower may
    end a round behind when the writes stop, and catches up within its next fetches.
    """
    deadline = time.monotonic() + timeout
    while True:
        ends = []
        for node in quorum.nodes.values():
            if not (node.data_dir / "log").is_dir():
                ends.append(-1)  # a node still starting (a wiped one makes its log anew)
                continue
            try:
                with LogReader.open(node.data_dir / "log") as log:
                    ends.append(log.end_offset)
            except (LogError, FileNotFoundError):
                # A node installing a snapshot (its reset under way), or trimming a segment
                # between the reader's listing and its open (online retention).
                ends.append(-1)
        if len(set(ends)) == 1:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"log ends {ends} did not converge: {quorum.stderr_tails()}")
        await asyncio.sleep(0.2)
