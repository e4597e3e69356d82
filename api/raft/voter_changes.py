"""A node's voter set as it changes (KIP-853): changes placed in the loop, links and addresses.

An AddRaftVoter / RemoveRaftVoter request waits for the node's loop, which hands it to the
core between two `Ready`s, after the queued proposals (`VoterChanges.place`): an accepted
change is a voters entry at the log's end, where the service's next write would have gone.
Its block is made there, the service's working image takes its VotersRecord, and it is
tracked with the proposals, so it commits, fails on a lost leadership and is applied in offset
order with the writes; the request is answered once it is committed. The links follow the
voter set the log holds (`link`), and the voters' addresses are the log's in a dynamic quorum,
the config's in a static one (`addresses`). Only the service's public API is used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from api.protocol.quorum.errors import wire_error_code
from api.protocol.quorum.messages import ErrorCode as CoreError
from api.raft.blocks import ReplicaBlocks
from api.raft.core.config import QuorumConfig, VoterAddress
from api.raft.core.core import RaftCore
from api.raft.core.ready import NotLeader, VoterChangeRefused
from api.raft.core.roles import Role
from api.raft.core.voters import Voter, VoterSet
from api.raft.proposals import Proposals
from api.raft.transport.protocol import QuorumTransport
from api.raft.voter_blocks import UPGRADE_BLOCK_COUNT, bootstrap_records, voters_record
from api.service.replicated import ReplicatedService
from api.service.service import SERVICE_PRINCIPAL
from metadata_log.log import AppendResult
from records.model import Record
from replay.controller.errors import ApiError
from replay.features import KRAFT_VERSION, finalized_level
from replay.image import MetadataImage

logger = logging.getLogger("api.server.quorum")

KRAFT_VERSION_0 = (
    "this quorum's voters are fixed by controller.quorum.voters (kraft.version 0). Voter "
    "changes need its voters in the log (kraft.version 1): upgrade it in place with `mlog "
    "features upgrade --feature kraft.version=1 --bootstrap-server ...` first (`mlog "
    "features describe` shows the level)"
)
"""Why a static quorum refuses AddRaftVoter / RemoveRaftVoter (UNSUPPORTED_VERSION)."""

VOTER_CHANGE_TIMEOUT_MS = 30_000
"""How long an AddRaftVoter / RemoveRaftVoter waits for its commit by default."""

Answer = tuple[int, str | None]
"""A voter change's answer: (error code, message)."""


@runtime_checkable
class AddressBook(Protocol):
    """A transport whose links follow the voter set (KIP-853: voters added and removed)."""

    def set_addresses(self, addresses: dict[int, VoterAddress]) -> None:
        """Link to exactly these nodes (this node's own id is ignored)."""


@dataclass(slots=True, eq=False)
class _VoterChange:
    add: Voter | None
    remove: int | None
    directory_id: str
    ack_when_committed: bool
    future: asyncio.Future[Answer]
    upgrade: bool = False
    """The kraft.version upgrade: the static voters into the log (`VoterChanges.upgrade`)."""


class VoterChanges:
    """A node's voter changes waiting for its loop, and what follows its voter set."""

    def __init__(
        self,
        core: RaftCore,
        config: QuorumConfig,
        service: ReplicatedService,
        *,
        blocks: ReplicaBlocks,
        proposals: Proposals,
        transport: QuorumTransport,
        wake: Callable[[], None],
        leader_address: Callable[[], str],
        directory_id: str = "",
    ) -> None:
        """`wake()` wakes the node's loop; `leader_address()` names the leader (now).

        `transport`'s links follow the voter set when it is an `AddressBook`;
        `directory_id` is this node's (the upgrade's VotersRecord names it).
        """
        self.core = core
        self.config = config
        self.service = service
        self.directory_id = directory_id
        self._blocks = blocks
        self._proposals = proposals
        self._transport = transport
        self._wake = wake
        self._leader_address = leader_address
        self._waiting: list[_VoterChange] = []
        """AddRaftVoter / RemoveRaftVoter requests waiting for the loop."""
        self._tasks: set[asyncio.Task[None]] = set()  # changes waiting for their commit
        self._linked: VoterSet | None = None

    @property
    def dynamic(self) -> bool:
        """Whether the voters are in the log (the core's latest voter set is the log's)."""
        return self.core.dynamic

    @property
    def waiting(self) -> bool:
        """Whether changes wait for the loop's next turn."""
        return bool(self._waiting)

    async def change(
        self,
        *,
        add: Voter | None,
        remove: int | None,
        directory_id: str,
        timeout_ms: int,
        ack_when_committed: bool,
        upgrade: bool = False,
    ) -> Answer:
        """Queue a change for the loop and wait for its answer (`QuorumNode.change_voters`).

        `upgrade`: the kraft.version upgrade instead (`add`, `remove` unused). REQUEST_TIMED_OUT
        after `timeout_ms`.
        """
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting.append(
            _VoterChange(
                add=add,
                remove=remove,
                directory_id=directory_id,
                ack_when_committed=ack_when_committed,
                future=future,
                upgrade=upgrade,
            )
        )
        self._wake()
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await asyncio.shield(future)
        except TimeoutError:
            return (
                int(CoreError.REQUEST_TIMED_OUT),
                f"the voter change was not committed within {timeout_ms} ms; `mlog quorum "
                "describe` shows whether it took effect",
            )

    def place(self, *, leading: bool) -> None:
        """Hand the waiting changes to the core (between two `Ready`s, after the proposals).

        `leading`: the node takes writes. A change the core accepts is a voters entry at the
        log's end, which is where the service's next write would have gone (every accepted
        write was proposed just before): its block is made here, the service's working image
        takes its VotersRecord, and it is tracked as a proposal, so it commits, fails on a
        lost leadership and is applied in offset order with the writes.
        """
        changes, self._waiting = self._waiting, []
        core = self.core
        for change in changes:
            if change.upgrade:
                self._place_upgrade(change, leading=leading)
                continue
            if leading and not (
                self.dynamic and finalized_level(self.service.image, KRAFT_VERSION) >= 1
            ):
                # The gate: no VotersRecord is written before kraft.version 1 is finalized,
                # so no node of an older version is ever shown one; and a static quorum's
                # nodes keep their configured voters whatever the level says.
                change.future.set_result((int(CoreError.UNSUPPORTED_VERSION), KRAFT_VERSION_0))
                continue
            placed = core.change_voters(
                add=change.add, remove=change.remove, directory_id=change.directory_id
            )
            if isinstance(placed, NotLeader):
                change.future.set_result(
                    (
                        int(CoreError.NOT_LEADER_OR_FOLLOWER),
                        f"node {self.config.node_id} does not lead; the leader is "
                        f"{self._leader_address()}",
                    )
                )
                continue
            if isinstance(placed, VoterChangeRefused):
                change.future.set_result((wire_error_code(placed.error_code), placed.message))
                continue
            what = f"adds node {change.add.id}" if change.add else f"removes node {change.remove}"
            self._track(change, (voters_record(core.voter_set),), placed.first, what)

    def _place_upgrade(self, change: _VoterChange, *, leading: bool) -> None:
        """The kraft.version upgrade (KIP-853): the static voters appended into the log.

        One block of a KRaftVersionRecord (level 1), the FeatureLevelRecord of kraft.version
        1 and a VotersRecord of the voters of `controller.quorum.voters`, with their
        endpoints and directory ids (this node's, and those the others fetch with): the
        bootstrap block's records, so every node that holds the block reads its voters from
        the log from then on, as a dynamic quorum's nodes do. Only once the leader takes
        writes (`leading`): its working image is then the one its records go after.
        """
        core = self.core
        if not leading and core.role is Role.LEADER:
            change.future.set_result(
                (
                    int(CoreError.REQUEST_TIMED_OUT),
                    "the leader does not take writes yet (its epoch is not applied); retry",
                )
            )
            return
        voters = VoterSet.of(
            [
                Voter(
                    id=node_id,
                    directory_id=self.directory_id if node_id == self.config.node_id else "",
                    host=address.host,
                    port=address.port,
                )
                for node_id, address in self.config.addresses.items()
            ]
        )
        placed = core.upgrade_voters(voters, count=UPGRADE_BLOCK_COUNT)
        if isinstance(placed, NotLeader):
            change.future.set_result(
                (
                    int(CoreError.NOT_LEADER_OR_FOLLOWER),
                    f"node {self.config.node_id} does not lead; the leader is "
                    f"{self._leader_address()}",
                )
            )
        elif isinstance(placed, VoterChangeRefused):
            change.future.set_result((wire_error_code(placed.error_code), placed.message))
        else:
            records = bootstrap_records(core.voter_set)
            self._track(change, records, placed.first, "upgrades kraft.version to 1")

    def _track(
        self, change: _VoterChange, records: tuple[Record, ...], first: int, what: str
    ) -> None:
        """A voters entry the core appended at `first`: its block, its image, its answer."""
        core = self.core
        block = self._blocks.encode([(records, SERVICE_PRINCIPAL)], first=first, epoch=core.epoch)
        self._blocks.keep(block)
        image = self.service.accept_quorum_records(records)
        committed = self._proposals.track(
            records,
            principal=SERVICE_PRINCIPAL,
            placed=AppendResult(first, first + len(records) - 1, block.timestamp),
        )
        logger.info(
            "controller %d %s: voters %s from offset %d (in force now, done once committed)",
            self.config.node_id,
            what,
            sorted(core.voters),
            first,
        )
        if not change.ack_when_committed:
            change.future.set_result((0, None))
        task = asyncio.get_running_loop().create_task(self._committed(change, committed, image))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _committed(
        self,
        change: _VoterChange,
        committed: asyncio.Future[AppendResult],
        image: MetadataImage,
    ) -> None:
        """Publish a voter change's image once committed; answer its request."""
        try:
            appended = await committed
        except ApiError:
            answer: Answer = (
                int(CoreError.NOT_LEADER_OR_FOLLOWER),
                "leadership changed before the voter change was committed; `mlog quorum "
                "describe` shows whether the next leader kept it",
            )
        else:
            self.service.commit_quorum_records(image, appended)
            answer = (0, None)
        if not change.future.done():
            change.future.set_result(answer)

    def link(self) -> None:
        """Open links to voters the log added, close those to voters it removed."""
        self._blocks.dynamic = self.dynamic
        voters = self.core.voter_set
        if voters is self._linked or not self.dynamic:
            return
        self._linked = voters
        transport = self._transport
        if isinstance(transport, AddressBook):
            addresses = {
                v.id: VoterAddress(host=v.host, port=v.port) for v in voters.voters if v.port
            }
            transport.set_addresses({**self.config.addresses, **addresses})

    def addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)` by node id.

        The log's voter set (its VotersRecord) in a dynamic quorum, `controller.quorum.voters`
        in a static one.
        """
        addresses = {i: (a.host, a.port) for i, a in self.config.addresses.items()}
        if not self.dynamic:
            return addresses
        known = {v.id: (v.host, v.port) for v in self.core.voter_set.voters if v.port}
        # The leader may be missing from this node's set (a node that has not fetched the
        # entry adding it); the config's bootstrap addresses still say where it is.
        leader = self.core.leader_id
        if leader not in known and leader in addresses:
            known[leader] = addresses[leader]
        return known
