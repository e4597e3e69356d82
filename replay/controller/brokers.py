"""Brokers: registration, fencing, unfencing, controlled shutdown, and the leaders they move.

A broker going away (fenced, unregistered, in controlled shutdown) takes leadership and ISR
membership with it, as Kafka's `handleBrokerFenced` does; a broker coming up (registered
unfenced, unfenced) gives leaderless partitions whose ISR holds it a leader again. Both are
`PartitionChangeRecord`s, the first ones in the same batch as the broker's own record and
the rest in batches of `MOVES_PER_BATCH` after it; the partitions come from the
broker's index, so a change costs what the broker holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from records.fields import INT32_MAX
from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.broker_index import BrokerPartitions
from replay.controller.commands import (
    MAX_RECORDS_PER_BATCH,
    BrokerAction,
    BrokerResult,
    Continuation,
    ControllerResult,
    RegisterBroker,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import INT16_MAX, check_int, check_label, clip
from replay.controller.names import partition_name
from replay.controller.states import ChangeChecker, is_live
from replay.delta import MetadataDelta
from replay.image import ClusterImage, MetadataImage, TopicImage


def register_broker(
    image: MetadataImage, request: RegisterBroker, new_id: Callable[[], Uuid]
) -> ControllerResult[BrokerResult]:
    """Register a broker (a new incarnation, id from `new_id`, if it was registered before).

    The broker epoch is the offset the registration record gets, as in Kafka, so every
    incarnation has a larger one.
    """
    check_registration(request)
    epoch = image.provenance.offset + 1
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=new_id(),
        broker_epoch=epoch,
        end_points=request.endpoints,
        rack=request.rack,
        fenced=request.fenced,
    )
    if request.fenced:
        return ControllerResult(
            records=(record,),
            response=BrokerResult(broker_id=request.broker_id, broker_epoch=epoch),
        )
    cluster_after = _cluster_with(image.cluster, record)
    return with_moves(image, cluster_after, record, request.broker_id, epoch, elect=True)


def check_registration(request: RegisterBroker) -> None:
    """Refuse what a registration record cannot hold, or what would break the broker tables."""
    check_int(
        request.broker_id,
        what="broker id",
        low=0,
        high=INT32_MAX,
        code=ErrorCode.INVALID_REQUEST,
    )
    if request.rack is not None:
        check_label(request.rack, what="a rack name")
    seen: set[tuple[str, int]] = set()
    for endpoint in request.endpoints:
        check_label(endpoint.name, what="a listener name")
        check_label(endpoint.host, what="an endpoint host")
        if (
            isinstance(endpoint.port, bool)
            or not isinstance(endpoint.port, int)
            or not (0 < endpoint.port < 65536)
        ):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"endpoint {clip(endpoint.host)}:{clip(endpoint.port)} is not HOST:PORT with "
                "a port in 1..65535",
            )
        check_int(
            endpoint.security_protocol,
            what="an endpoint's security protocol",
            low=0,
            high=INT16_MAX,
            code=ErrorCode.INVALID_REQUEST,
        )
        # By address, not by listener name: `mlog brokers register --endpoint` names every
        # endpoint PLAINTEXT.
        address = (endpoint.host, endpoint.port)
        if address in seen:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"endpoint {clip(endpoint.host)}:{endpoint.port} is given twice; give it once",
            )
        seen.add(address)


def change_broker(
    image: MetadataImage, broker_id: int, action: BrokerAction
) -> ControllerResult[BrokerResult]:
    """Unregister, fence, unfence, or start a controlled shutdown of a broker.

    Fencing, unregistering and controlled shutdown move leadership off the broker and drop
    it from ISRs (keeping the last ISR member, leaderless, as Kafka does); unfencing gives
    leaderless partitions whose ISR holds the broker a leader again.
    """
    current = image.cluster.get(broker_id)
    if current is None:
        raise ApiError(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            f"Broker {broker_id} is not registered; see `mlog brokers list`",
        )
    epoch = current.broker_epoch
    already = {
        BrokerAction.FENCE: current.fenced,
        BrokerAction.UNFENCE: not current.fenced,
        BrokerAction.CONTROLLED_SHUTDOWN: current.in_controlled_shutdown,
    }
    if already.get(action, False):
        # Idempotent, as a repeated heartbeat is in Kafka: nothing to write.
        return ControllerResult(
            records=(),
            response=BrokerResult(broker_id=broker_id, broker_epoch=epoch, changed=False),
        )
    record: Record
    if action == BrokerAction.UNREGISTER:
        record = UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
    elif action == BrokerAction.FENCE:
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.FENCE
        )
    elif action == BrokerAction.UNFENCE:
        if current.in_controlled_shutdown:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Broker {broker_id} is in controlled shutdown; register it again "
                "(a new incarnation) to bring it back",
            )
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.UNFENCE
        )
    else:
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id,
            broker_epoch=epoch,
            in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
        )
    delta = MetadataDelta(image)
    delta.replay(record)
    cluster_after = delta.apply(image.provenance).cluster
    if action == BrokerAction.UNFENCE:
        return with_moves(image, cluster_after, record, broker_id, epoch, elect=True)
    return with_moves(image, cluster_after, record, broker_id, epoch, elect=False)


def with_moves(
    image: MetadataImage,
    cluster_after: ClusterImage,
    record: Record,
    broker_id: int,
    epoch: int,
    *,
    elect: bool,
) -> ControllerResult[BrokerResult]:
    """The broker's record and the partition changes it causes, in batches.

    The partitions to look at come from the broker's index (`TopicsImage.by_broker`), so this
    costs what the broker holds, and no batch looks at more than a bounded number of them
    (`SCANS_PER_MOVE` a record): the first batch is the broker's record and the first changes
    found; the rest follow through `more`, each carrying on through the index from where the
    one before stopped and judging each partition against the image of its time (a partition
    another command changed meanwhile is judged as it is then). The answer's
    `partitions_changed` is the count over every batch, set when the last one is computed.
    """
    # The index as it is now (an immutable map): what the batches walk through. A partition
    # the broker gains after this is not its to give up (a fenced broker is given none).
    topics = _Walk(image.topics.by_broker.get(broker_id))
    batch = max(2, records_per_batch())
    response = BrokerResult(broker_id=broker_id, broker_epoch=epoch)
    moves = _Moves(broker_id, topics, elect=elect, batch=batch, response=response)
    first, cursor = moves.next(image, cluster_after, _START, batch - 1)
    return ControllerResult(
        records=(record, *first),
        response=response,
        more=moves.after(cursor, len(first)),
    )


MOVES_PER_BATCH = 250
"""The records of one batch of broker moves, well under KRaft's cap (`MAX_RECORDS_PER_BATCH`).

Computing and replaying one batch holds the event loop ~2-3 ms (~7 us a change of CPU), so
heartbeats and admin requests are answered between batches within a few ms. Through a quorum
`BATCHES_IN_FLIGHT` batches overlap their replication rounds. Against a 3-node quorum
(`bench/fleet_bench.py fleet --snapshot --partitions 200000 --share 0.2`, 40,701 moves, three
alternating pairs at load 4.6-6.4) batches of 1,000 moved them in 2.1-4.1 s with a heartbeat
p99 of 217-2,588 ms during the move, batches of 250 in 2.0-3.0 s and 36-98 ms; batches of 100
(400 moves in flight) were bound by the replication rounds (4.6 s)."""

SCANS_PER_MOVE = 4
"""The partitions of the broker's index one batch looks at, at most, per record it may hold:
an unfence looks at partitions most of which need nothing, and stops (a batch with fewer or
no records, the rest to follow) rather than hold the event loop over all of them."""

_START = (0, 0)


def records_per_batch() -> int:
    """The records of one batch of broker moves (`MOVES_PER_BATCH`; tests lower it)."""
    return min(MOVES_PER_BATCH, MAX_RECORDS_PER_BATCH)


class _Moves:
    """The moves of one broker change: a walk through the broker's index, batch by batch.

    A position in the walk is (topic index, partition index) into `topics`; a batch is a pure
    function of the image and its starting position, so one run twice writes the same records.
    """

    __slots__ = ("batch", "broker_id", "elect", "response", "topics")

    def __init__(
        self,
        broker_id: int,
        topics: _Walk,
        *,
        elect: bool,
        batch: int,
        response: BrokerResult,
    ) -> None:
        self.broker_id = broker_id
        self.topics = topics
        self.elect = elect
        self.batch = batch
        self.response = response

    def after(self, cursor: tuple[int, int] | None, moved: int) -> Continuation | None:
        """The continuation from `cursor` (None: done, and the answer's count is final)."""
        if cursor is None:
            # The most of any run: a batch run again (a service may) after its moves are
            # written finds them done, and must not lower the count.
            self.response.partitions_changed = max(self.response.partitions_changed, moved)
            return None

        def step(image: MetadataImage) -> ControllerResult[None]:
            if is_live(image.cluster, self.broker_id) != self.elect:
                # The broker changed state again meanwhile: that change moved what it had to.
                return ControllerResult(records=(), response=None, more=self.after(None, moved))
            changes, following = self.next(image, image.cluster, cursor, self.batch)
            return ControllerResult(
                records=tuple(changes),
                response=None,
                more=self.after(following, moved + len(changes)),
            )

        return step

    def next(
        self,
        image: MetadataImage,
        cluster_after: ClusterImage,
        cursor: tuple[int, int],
        limit: int,
    ) -> tuple[list[Record], tuple[int, int] | None]:
        """Up to `limit` checked changes from `cursor` on, and where the next batch starts."""
        broker_id = self.broker_id
        topics = self.topics
        elect = self.elect
        changes: list[Record] = []
        by_id = image.topics.by_id
        checker = ChangeChecker(image.cluster, cluster_after)
        live = _Liveness(cluster_after, broker_id)
        budget = limit * SCANS_PER_MOVE
        index, position = cursor
        while (entry := topics.at(index)) is not None:
            topic_id, ids = entry
            topic = by_id.get(topic_id)
            if topic is None:  # deleted meanwhile
                index, position = index + 1, 0
                continue
            partitions = topic.partitions
            count = len(partitions)
            end = min(len(ids), position + budget, position + limit - len(changes))
            for partition_id in ids[position:end]:
                if partition_id >= count:
                    continue  # deleted meanwhile (a partition reduction)
                partition = partitions[partition_id]
                if elect:
                    change = _elected(topic, partition, live, broker_id)
                else:
                    change = _moved_off(topic, partition, live, broker_id)
                if change is not None:
                    checker.check(partial(partition_name, topic, partition_id), partition, change)
                    changes.append(change)
            budget -= end - position
            if end < len(ids):
                position = end
            else:
                index, position = index + 1, 0
            if len(changes) >= limit or budget <= 0:
                break
        return changes, (index, position) if topics.at(index) is not None else None


class _Walk:
    """The entries of a broker's index (an immutable map), by position, read as far as asked.

    A broker holding 20% of 1M partitions is in ~90,000 topics: listing them all at once
    would hold the event loop ~15 ms at the fence's start; each batch reads only the entries
    it looks at. The map does not change and its order is fixed, so the entry at a position
    is always the same one (a batch run again sees what it saw).
    """

    __slots__ = ("_entries", "_rest")

    def __init__(self, held: BrokerPartitions | None) -> None:
        self._entries: list[tuple[Uuid, tuple[int, ...]]] = []
        self._rest: Iterator[tuple[Uuid, tuple[int, ...]]] | None = (
            None if held is None else iter(held.items())
        )

    def at(self, index: int) -> tuple[Uuid, tuple[int, ...]] | None:
        """The entry at `index`, or None past the last."""
        entries = self._entries
        while index >= len(entries):
            if self._rest is None:
                return None
            entry = next(self._rest, None)
            if entry is None:
                self._rest = None
                return None
            entries.append(entry)
        return entries[index]


class _Liveness:
    """Liveness, an ISR's first live member and an ISR without the broker, remembered.

    A batch meets the same few ISRs (and brokers) over and over: each is worked out once.
    """

    __slots__ = ("_broker_id", "_cluster", "_first", "_known", "_without")

    def __init__(self, cluster: ClusterImage, broker_id: int) -> None:
        self._cluster = cluster
        self._broker_id = broker_id
        self._known: dict[int, bool] = {}
        self._first: dict[tuple[int, ...], int] = {}
        self._without: dict[tuple[int, ...], tuple[int, ...]] = {}

    def __call__(self, broker_id: int) -> bool:
        known = self._known.get(broker_id)
        if known is None:
            known = self._known[broker_id] = is_live(self._cluster, broker_id)
        return known

    def first(self, isr: tuple[int, ...]) -> int:
        """The first live member of `isr`, or NO_LEADER."""
        found = self._first.get(isr)
        if found is None:
            found = self._first[isr] = next((b for b in isr if self(b)), NO_LEADER)
        return found

    def without(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        """`isr` without the broker (one tuple for equal ISRs: the new records share it)."""
        found = self._without.get(isr)
        if found is None:
            broker_id = self._broker_id
            found = self._without[isr] = tuple([b for b in isr if b != broker_id])
        return found


_new_move: Callable[[int, Uuid, tuple[int, ...] | None, int], PartitionChangeRecord] = (
    preset_constructor(PartitionChangeRecord, ("partition_id", "topic_id", "isr", "leader"))
)
"""A move's change from values the fence has worked out (every other field unchanged): a
fence makes one per partition it moves, so it skips the dataclass's keyword parsing."""


def _moved_off(
    topic: TopicImage, partition: PartitionRecord, live: _Liveness, broker_id: int
) -> PartitionChangeRecord | None:
    """The change taking a broker out of a partition's ISR and leadership (`handleBrokerFenced`)."""
    isr = partition.isr
    leader = partition.leader
    if broker_id in isr:
        if len(isr) > 1:
            isr = live.without(isr)
        # else the last member stays (leaderless), as in Kafka
    elif leader != broker_id:
        return None
    if leader == broker_id or leader not in isr:
        leader = live.first(isr)
    changed_isr = isr is not partition.isr
    if not changed_isr and leader == partition.leader:
        return None
    return _new_move(
        partition.partition_id,
        topic.topic_id,
        isr if changed_isr else None,
        leader if leader != partition.leader else LEADER_UNCHANGED,
    )


def _elected(
    topic: TopicImage, partition: PartitionRecord, live: _Liveness, broker_id: int
) -> PartitionChangeRecord | None:
    """A leader for a leaderless partition whose ISR holds a broker that just came up."""
    if partition.leader != NO_LEADER or broker_id not in partition.isr:
        return None
    leader = live.first(partition.isr)
    if leader == NO_LEADER:
        return None
    return _new_move(partition.partition_id, topic.topic_id, None, leader)


def _cluster_with(cluster: ClusterImage, registration: RegisterBrokerRecord) -> ClusterImage:
    return ClusterImage(brokers=cluster.brokers.set(registration.broker_id, registration))
