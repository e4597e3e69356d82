"""Quorum nodes in one event loop over real logs, joined by an in-process network.

For the shell's tests: the consensus core is proven by the simulation (tests/support/raft_sim.py);
these drive the real shell (`api.raft.node`) over real `MetadataLog`s in temporary
directories, with a network that can cut links. Real processes and sockets are
tests/system/test_quorum_processes.py's.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, cast

from api.protocol.quorum.messages import Message
from api.raft.core.config import QuorumConfig, VoterAddress
from api.raft.core.quorum_state import QuorumState
from api.raft.core.voters import Voter, VoterSet
from api.raft.node import QuorumNode
from api.raft.quorum_state_file import write_quorum_state
from api.raft.voter_blocks import write_bootstrap_block
from api.service.replicated import ReplicatedService
from api.service.retention import RetentionConfig
from metadata_log.config import LogConfig
from metadata_log.replica_log import ReplicaLog
from records.uuids import Uuid
from replay.controller.commands import CreatableTopic, CreateTopicResult, RegisterBroker
from replay.controller.controller import Controller
from replay.controller.errors import ApiError, ErrorCode


class Timers(TypedDict, total=False):
    """Quorum timers a `Cluster` takes as keywords (`QuorumConfig`'s fields of that name)."""

    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    append_linger_ms: int
    request_timeout_ms: int
    fetch_max_wait_ms: int


FAST: Timers = {
    "election_timeout_ms": 150,
    "fetch_timeout_ms": 300,
    "election_backoff_max_ms": 100,
    "append_linger_ms": 0,
    "request_timeout_ms": 300,
    "fetch_max_wait_ms": 100,
}
"""Timers short enough for tests, in the ratios of Kafka's defaults."""

STEADY: Timers = {
    "election_timeout_ms": 1500,
    "fetch_timeout_ms": 3000,
    "election_backoff_max_ms": 200,
    "append_linger_ms": 0,
    "request_timeout_ms": 600,
    "fetch_max_wait_ms": 200,
}
"""Elections 10x slower than `FAST` (the rest 2x): for a test whose leader must stay the leader
on a loaded host, where `FAST`'s 150 ms election timeout passes between two turns of a loop."""


def directory_of(node_id: int) -> str:
    """A test node's directory id (KIP-853), fixed by its id."""
    return str(Uuid(b"\x42" * 8 + node_id.to_bytes(8, "big")))


class LocalNetwork:
    """Delivers requests to a node's `handle` and the answers back; links can be cut."""

    def __init__(self) -> None:
        self.nodes: dict[int, QuorumNode] = {}
        self.cut: set[tuple[int, int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def transport(self, source: int) -> Callable[[Callable[[int, Message], None]], _Link]:
        def make(deliver: Callable[[int, Message], None]) -> _Link:
            return _Link(self, source, deliver)

        return make

    def isolate(self, node: int) -> None:
        """Cut every link to and from `node`."""
        for other in self.nodes:
            if other != node:
                self.cut.add((node, other))
                self.cut.add((other, node))

    def heal(self) -> None:
        """Restore every link."""
        self.cut.clear()

    def send(self, source: int, destination: int, message: Message, link: _Link) -> None:
        if (source, destination) in self.cut:
            return
        task = asyncio.get_running_loop().create_task(
            self._deliver(source, destination, message, link)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, source: int, destination: int, message: Message, link: _Link) -> None:
        node = self.nodes.get(destination)
        if node is None or node.failed is not None or link.closed:
            return
        try:
            answer = await node.handle(source, message)
        except Exception:
            return
        if (destination, source) in self.cut or link.closed:
            return
        link.deliver(destination, answer)


class _Link:
    def __init__(
        self, network: LocalNetwork, source: int, deliver: Callable[[int, Message], None]
    ) -> None:
        self.network = network
        self.source = source
        self.deliver = deliver
        self.closed = False

    def send(self, destination: int, message: Message) -> bool:
        if not self.closed:
            self.network.send(self.source, destination, message, self)
        return not self.closed

    async def close(self) -> None:
        self.closed = True


class Cluster:
    """Three (or five) formatted nodes in `root`, started and stopped one by one."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        *,
        snapshots: bool = False,
        log_config: LogConfig | None = None,
        policy: RetentionConfig | None = None,
        dynamic: bool = False,
        **timers: int,
    ) -> None:
        self.root = root
        self.dynamic = dynamic
        """KIP-853: the voters in the log (a bootstrap block written first), not fixed."""
        self.snapshots = snapshots
        self.policy = policy
        """The snapshot cadence and online retention of every node (with `snapshots`)."""
        self.log_config = log_config
        """The nodes' log settings (small segments, so that a trim removes some)."""
        """Give every node a SQL snapshot store (`<root>/<id>/snapshots.db`)."""
        self.ids = list(range(1, size + 1))
        self.network = LocalNetwork()
        self.timers = cast(dict[str, int], {**FAST, **timers})
        self.addresses = {i: VoterAddress(host="127.0.0.1", port=19000 + i) for i in self.ids}
        for i in self.ids:
            (root / str(i)).mkdir(parents=True, exist_ok=True)
            write_quorum_state(
                root / str(i), QuorumState(leader_epoch=0, voters=frozenset(self.ids))
            )
            if dynamic:
                self._bootstrap(i)
        self.initial = list(self.ids)

    def _bootstrap(self, node_id: int) -> None:
        """The bootstrap voter set as the log's first block (what `--initial-controllers` does)."""
        voters = VoterSet.of(
            [
                Voter(id=i, directory_id=directory_of(i), host=a.host, port=a.port)
                for i, a in self.addresses.items()
            ]
        )
        log = ReplicaLog.open(self.root / str(node_id) / "log", config=self.log_config)
        try:
            write_bootstrap_block(log, voters)
        finally:
            log.close()

    def add(self, node_id: int) -> None:
        """A new node of a dynamic quorum (formatted empty, no quorum-state): start it next."""
        (self.root / str(node_id)).mkdir(parents=True, exist_ok=True)
        self.addresses[node_id] = VoterAddress(host="127.0.0.1", port=19000 + node_id)
        self.ids.append(node_id)

    def config(self, node_id: int) -> QuorumConfig:
        # A dynamic quorum's node knows the initial voters (its bootstrap servers) only.
        ids = self.initial if self.dynamic else self.ids
        return QuorumConfig(
            node_id=node_id,
            voters=frozenset(ids),
            addresses={i: self.addresses[i] for i in ids},
            **self.timers,
        )

    async def start(self, node_id: int) -> QuorumNode:
        snapshots = None
        if self.snapshots:
            from api.service.snapshots import Snapshotter
            from replay.sql.store import SnapshotStore, sqlite_url

            db = self.root / str(node_id) / "snapshots.db"
            snapshots = Snapshotter(
                lambda: SnapshotStore(sqlite_url(db)), file=db, policy=self.policy
            )
        service = ReplicatedService.open_replicated(
            self.root / str(node_id) / "log",
            config=self.log_config,
            controller=Controller(rng=random.Random(node_id)),
            snapshots=snapshots,
        )
        node = QuorumNode(
            service,
            self.config(node_id),
            state_dir=self.root / str(node_id),
            transport=self.network.transport(node_id),
            rng=random.Random(node_id),
            dynamic=self.dynamic,
        )
        self.network.nodes[node_id] = node
        await node.start()
        return node

    async def start_all(self) -> list[QuorumNode]:
        return [await self.start(i) for i in self.ids]

    async def stop(self, node_id: int, *, resign: bool = True) -> None:
        """Stop a node (gracefully; `resign=False`: silently, as a crash looks to the others)."""
        node = self.network.nodes.pop(node_id)
        await node.aclose(resign=resign)
        await node.service.aclose()

    async def stop_all(self) -> None:
        for node_id in list(self.network.nodes):
            await self.stop(node_id)

    async def leader(
        self, timeout: float = 10.0, *, excluding: QuorumNode | None = None
    ) -> QuorumNode:
        """The node that leads and takes writes (other than `excluding`), once there is one.

        Of two that do (one cut off from its majority leads on until check-quorum, 1.5 fetch
        timeouts), the one of the newer epoch.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            leading = [
                node
                for node in self.network.nodes.values()
                if node.leading and node is not excluding
            ]
            if leading:
                return max(leading, key=lambda node: node.core.epoch)
            await asyncio.sleep(0.01)
        raise TimeoutError("no leader took writes in time")

    async def converged(self, offset: int, timeout: float = 20.0) -> None:
        """Wait until every running node's image has reached `offset`."""
        await self._until(
            lambda: all(n.service.image.provenance.offset >= offset for n in self._running()),
            timeout,
            lambda: (
                f"images at {[n.service.image.provenance.offset for n in self._running()]}"
                f", wanted {offset}"
            ),
        )

    async def agreed(self, timeout: float = 20.0) -> None:
        """Wait until every running node holds the same image (a node that never does fails).

        A leader may change at any time (with FAST's timers a busy host lets an election timer
        fire), and the new one appends its leader-change record: comparing with a leader fetched
        earlier is a race.
        """

        def same() -> bool:
            images = [n.service.image for n in self._running()]
            return all(image == images[0] for image in images)

        await self._until(
            same,
            timeout,
            lambda: f"images at {[n.service.image.provenance for n in self._running()]}",
        )

    def _running(self) -> list[QuorumNode]:
        return list(self.network.nodes.values())

    @staticmethod
    async def _until(done: Callable[[], bool], timeout: float, state: Callable[[], str]) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if done():
                return
            await asyncio.sleep(0.01)
        raise TimeoutError(state())


async def register(node: QuorumNode, broker_id: int) -> None:
    """Register a broker through `node` (the leader)."""
    service = node.service
    await service.submit(
        lambda image: service.controller.register_broker(image, RegisterBroker(broker_id=broker_id))
    )


async def create_topic_at_leader(cluster: Cluster, name: str, attempts: int = 20) -> None:
    """Create a topic through whichever node leads, again if leadership moved meanwhile.

    A refusal for leadership (NOT_CONTROLLER: nothing proposed) is retried at the next
    leader; a retry that finds the topic created by an attempt that did commit is a success.
    """
    for attempt in range(attempts):
        try:
            result = await _created(await cluster.leader(), name)
        except ApiError as exc:
            if exc.error_code != ErrorCode.NOT_CONTROLLER or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.05)
            continue
        code = result.outcome.error_code
        assert code == 0 or (attempt and code == ErrorCode.TOPIC_ALREADY_EXISTS), result
        return


async def _created(node: QuorumNode, name: str) -> CreateTopicResult:
    service = node.service
    (result,) = await service.submit(
        lambda image: service.controller.create_topics(image, [CreatableTopic(name=name)])
    )
    return result


async def create_topic(node: QuorumNode, name: str) -> None:
    """Create a topic of one partition through `node` (the leader)."""
    result = await _created(node, name)
    assert result.outcome.error_code == 0, result
