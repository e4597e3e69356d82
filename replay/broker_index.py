"""The per-broker partition index of a topics image (`TopicsImage.by_broker`), kept lazily.

The index maps a broker id to the partitions it is a replica of, by topic: it makes fencing a
broker cost what the broker holds. Replay changes it with every topic created, removed or
reassigned; kept up eagerly, each command paid a persistent-map update per broker it placed a
replica on (copying a path of each broker's map), which was a fifth of a topic creation.

So each image holds a `BrokerIndex`: the index of an earlier image (a `Map`, built) and the
changes of the commands since (`IndexStep`s, a chain through the images between). Whoever
reads `by_broker` of an image builds that image's index once, applying the chain in one
mutation pass per broker, and keeps it; the next image then starts its chain from there. The
chain is bounded (`MAX_PENDING_STEPS` commands, `MAX_PENDING_ENTRIES` entries): a longer one
is built when the next image is made, so a read never costs more than that bound beyond what
the broker holds, and the memory the chain holds (references to partitions the images hold
anyway, and a few lists) stays small.

A snapshot's load defers its index too (`BrokerIndex.deferred`): the load gathers what the
index needs as the topics stream by and leaves the building (a persistent-map insert per
broker and topic, a sixth of a 1M-partition load) to the first reader, once; a server reads it
on a thread as soon as it serves (`api/cli/serve.py`), so a start answers without it. A chain
from a deferred index nobody has read yet is bounded by its commands only, not its entries:
its first read builds the whole index whatever the chain holds, and the image a time travel
replays onto a snapshot (one long delta) is most often never asked for its index, so the
build is not forced on it (it was 15% of a time travel into a churn log).

Every image's index is the same value it was when built eagerly (`replay.image.broker_index` of
its topics): a chain only defers the work. Old images (time travel, snapshots) read their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter

from immutables import Map, MapMutation

from records.model import PartitionRecord
from records.uuids import Uuid

BrokerPartitions = Map[Uuid, tuple[int, ...]]
"""The partitions one broker holds a replica of: partition ids (ascending) by topic id."""

MAX_PENDING_STEPS = 256
"""Commands whose index changes an image may leave unapplied (then its index is built)."""

MAX_PENDING_ENTRIES = 8192
"""(broker, topic) entries a chain may leave unapplied: bounds the cost of the first read."""

Touched = dict[int, dict[Uuid, tuple[set[int], set[int]]]]
"""Changed (broker, topic) entries: the partition ids added and removed."""


class IndexStep:
    """The index changes of one delta: topics created, topics removed, replicas moved.

    A topic is in one of the three (the delta compares its base with its result), or in the
    first two if it was removed and created again with the same id (applied lost first).
    Created and removed topics are kept as their partitions: which brokers they touch is
    worked out when the step is applied, if ever.
    """

    __slots__ = ("entries", "gained", "lost", "touched")

    def __init__(
        self,
        gained: list[tuple[Uuid, Sequence[PartitionRecord]]],
        lost: list[tuple[Uuid, Sequence[PartitionRecord]]],
        touched: Touched,
        entries: int,
    ) -> None:
        self.gained = gained
        """New topics: all their partitions go in."""
        self.lost = lost
        """Removed topics, with their partitions as they were: their entries go."""
        self.touched = touched
        """Topics of the base whose replicas changed."""
        self.entries = entries
        """A bound of the (broker, topic) entries the step changes: the partitions of the
        topics gained and lost, and the entries touched."""


class BrokerIndex:
    """`TopicsImage.by_broker` of one image: built (`Map`), a chain of steps from one, or deferred.

    Immutable in behaviour: `map()` always returns the same value, computed at most once
    (or twice, by two threads racing: the result is the same). The chain's links are read
    parent and step first, the built map last, and written in the opposite order, so a
    reader in another thread sees either a whole link or the built map. A deferred index
    (no parent, no step, its builder in `_make`) is built by its first reader; readers on
    other threads meanwhile wait for that one build (`_Once`).
    """

    __slots__ = ("_built", "_depth", "_entries", "_lazy", "_make", "_parent", "_step")

    def __init__(
        self,
        built: Map[int, BrokerPartitions] | None,
        parent: BrokerIndex | None = None,
        step: IndexStep | None = None,
        depth: int = 0,
        entries: int = 0,
    ) -> None:
        self._built = built
        self._parent = parent
        self._step = step
        self._depth = depth
        """Steps between this index and the nearest built one before it."""
        self._entries = entries
        """Their entries together (`IndexStep.entries`)."""
        self._make: _Once | None = None
        """A deferred index's builder (None once built, and for every other index)."""
        self._lazy = False
        """A deferred index, or a chain from one that was not built when the link was made:
        its entries do not force a build (its first read builds the whole index anyway)."""

    @staticmethod
    def of(index: Map[int, BrokerPartitions]) -> BrokerIndex:
        """A built index (`broker_index` of some topics)."""
        return BrokerIndex(index)

    @staticmethod
    def deferred(build: Callable[[], Map[int, BrokerPartitions]]) -> BrokerIndex:
        """An index `build` makes when it is first read (a snapshot load's), called once."""
        index = BrokerIndex(None)
        index._make = _Once(build)
        index._lazy = True
        return index

    @property
    def is_built(self) -> bool:
        """Whether `map()` is a lookup now (no chain left to apply)."""
        return self._built is not None

    def after(self, step: IndexStep) -> BrokerIndex:
        """The index after one more delta's changes (built now if the chain is long)."""
        lazy = False
        if self._built is not None:
            depth, entries = 1, step.entries
        else:
            depth, entries = self._depth + 1, self._entries + step.entries
            lazy = self._lazy
        following = BrokerIndex(None, self, step, depth, entries)
        following._lazy = lazy
        if depth >= MAX_PENDING_STEPS or (entries >= MAX_PENDING_ENTRIES and not lazy):
            following.map()
        return following

    def map(self) -> Map[int, BrokerPartitions]:
        """The index: per broker, its partition ids by topic id."""
        built = self._built
        if built is not None:
            return built
        steps: list[IndexStep] = []
        node: BrokerIndex = self
        while True:
            parent, step, built = node._parent, node._step, node._built
            if built is not None:
                break
            if step is None:  # the deferred index the chain starts from
                built = node._made()
                break
            steps.append(step)  # a link: parent and step set
            node = parent  # type: ignore[assignment]  # (read before `_built`, see above)
        steps.reverse()
        built = apply_steps(built, steps)
        self._built = built
        # The chain before is no longer needed by this index (images before may still hold it).
        self._parent = None
        self._step = None
        return built

    def _made(self) -> Map[int, BrokerPartitions]:
        """A deferred index, built (by this call, or the one another thread made first)."""
        make = self._make
        if make is None:  # built meanwhile: `_built` is written before `_make` is cleared
            built = self._built
            assert built is not None
            return built
        built = make()
        self._built = built
        self._make = None
        return built


class _Once:
    """A builder called at most once, whichever threads ask: the others wait for its value.

    A build that fails is not tried again (the load's lists it consumed are gone, so a
    second try would build part of the index): every later call raises what it raised.
    """

    __slots__ = ("_build", "_failed", "_lock", "_value")

    def __init__(self, build: Callable[[], Map[int, BrokerPartitions]]) -> None:
        self._build: Callable[[], Map[int, BrokerPartitions]] | None = build
        self._lock = threading.Lock()
        self._value: Map[int, BrokerPartitions] | None = None
        self._failed: BaseException | None = None

    def __call__(self) -> Map[int, BrokerPartitions]:
        with self._lock:
            if self._value is None:
                if self._failed is not None:
                    raise RuntimeError("the per-broker index failed to build") from self._failed
                build = self._build
                assert build is not None
                self._build = None  # what it held (the load's lists) goes with it
                try:
                    self._value = build()
                except BaseException as exc:
                    self._failed = exc
                    raise
            return self._value


EMPTY_INDEX = BrokerIndex.of(Map())
"""The index of no topics."""


def apply_steps(
    index: Map[int, BrokerPartitions], steps: Iterable[IndexStep]
) -> Map[int, BrokerPartitions]:
    """`index` with the steps applied in order: one mutation of each broker's map touched."""
    changed: dict[int, MapMutation[Uuid, tuple[int, ...]]] = {}

    def mutation(broker_id: int) -> MapMutation[Uuid, tuple[int, ...]]:
        found = changed.get(broker_id)
        if found is None:
            found = changed[broker_id] = index.get(broker_id, _NO_PARTITIONS).mutate()
        return found

    layouts: dict[tuple[tuple[int, ...], ...], list[tuple[int, tuple[int, ...]]]] = {}
    for step in steps:
        # Lost first: a topic removed and created again with its id is in both.
        for topic_id, partitions in step.lost:
            for broker_id in {b for p in partitions for b in p.replicas}:
                mutation(broker_id).pop(topic_id, None)
        for topic_id, partitions in step.gained:
            # Placement repeats a few layouts (the replica lists of a topic's partitions):
            # each is split by broker once.
            key = tuple(map(_replicas_of, partitions))
            layout = layouts.get(key)
            if layout is None:
                layout = layouts[key] = [
                    (b, tuple(ids)) for b, ids in replica_partitions(partitions).items()
                ]
            for broker_id, ids in layout:
                found = changed.get(broker_id)
                if found is None:
                    found = mutation(broker_id)
                found[topic_id] = ids
        for broker_id, topics in step.touched.items():
            inner = mutation(broker_id)
            for topic_id, (added, removed) in topics.items():
                now = set(inner.get(topic_id, ()))
                now |= added
                now -= removed
                if now:
                    inner[topic_id] = tuple(sorted(now))
                else:
                    inner.pop(topic_id, None)
    if not changed:
        return index
    with index.mutate() as outer:
        for broker_id, inner in changed.items():
            held = inner.finish()
            if held:
                outer[broker_id] = held
            else:
                outer.pop(broker_id, None)
        finished: Map[int, BrokerPartitions] = outer.finish()
    return finished


_NO_PARTITIONS: BrokerPartitions = Map()
_replicas_of = attrgetter("replicas")


def replica_partitions(partitions: Iterable[PartitionRecord]) -> dict[int, list[int]]:
    """The ids of `partitions` each broker is a replica of (ascending if they are)."""
    held: dict[int, list[int]] = {}
    for partition in partitions:
        partition_id = partition.partition_id
        for broker_id in partition.replicas:
            ids = held.get(broker_id)
            if ids is None:
                held[broker_id] = [partition_id]
            else:
                ids.append(partition_id)
    return held
