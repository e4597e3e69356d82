"""Deterministic simulation of the controller quorum (Kafka's RaftEventSimulationTest as model).

One seed fixes everything: the scenario, the network's faults (drops, delays, duplicates,
reordering, one-way and two-way partitions), kills that lose unflushed entries and may tear the
last one, wipes, and every election timeout. A fake clock jumps from event to event. The
invariants (`Checker`) are checked after every event.

    python -m tests.support.raft_sim --seeds 100000          # run seeds 0..99999, print failures
    python -m tests.support.raft_sim --seed 42 --trace       # replay one seed, printing every event
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from api.protocol.quorum.messages import (
    Entry,
    EntryKind,
    ErrorCode,
    FetchResponse,
    FetchSnapshotResponse,
    Message,
    SnapshotId,
)
from api.raft.core import (
    Batch,
    LogView,
    OffsetRange,
    QuorumConfig,
    RaftCore,
    Ready,
    ReadyDone,
    Role,
)
from api.raft.core.quorum_state import QuorumState
from api.raft.core.transfer import with_checksum
from api.raft.core.voters import Voter, VoterHistory, VoterSet
from metadata_log.errors import LogError
from metadata_log.memory_replica import MemoryReplicaLog
from metadata_log.replica import ReplicaBlock
from metadata_log.start_snapshot import StartSnapshot

MAX_FETCH_ENTRIES = 4
"""The most entries per Fetch answer (small, so catching up takes several steps)."""


def encode_snapshot(entries: tuple[Entry, ...], *, dynamic: bool = False) -> bytes:
    """A simulated snapshot's bytes: the state is the entries below its end, checksummed.

    A dynamic quorum's snapshot starts with a JSON header line naming the voter set at its
    end, as the real snapshot's header does (`api.raft.core.voters.snapshot_voters`).
    """
    rows = [[e.offset, e.epoch, e.payload.hex(), int(e.kind), e.count] for e in entries]
    body = json.dumps(rows, separators=(",", ":")).encode()
    if dynamic:
        header = {"voters": voters_below(entries, len(entries)).to_json()}
        body = json.dumps(header, separators=(",", ":")).encode() + b"\n" + body
    return with_checksum(body)


def decode_snapshot(data: bytes) -> tuple[Entry, ...]:
    """The entries a simulated snapshot's bytes hold (the checksum was checked by the core)."""
    body = data[:-4]
    if body.startswith(b"{"):
        body = body.partition(b"\n")[2]
    rows = json.loads(body)
    return tuple(
        Entry(offset=o, epoch=e, payload=bytes.fromhex(p), kind=EntryKind(k), count=n)
        for o, e, p, k, n in rows
    )


def voters_below(entries: tuple[Entry, ...] | list[Entry], end: int) -> VoterSet:
    """The voter set of a dynamic quorum's log that ends at `end`: its last voters entry's."""
    for offset in range(min(end, len(entries)) - 1, -1, -1):
        if entries[offset].kind is EntryKind.VOTERS:
            return VoterSet.decode(entries[offset].payload)
    return VoterSet()


def holds_voters(entries: tuple[Entry, ...] | list[Entry]) -> bool:
    """Whether `entries` hold a voters entry (a snapshot of them names its voters)."""
    return any(e.kind is EntryKind.VOTERS for e in entries)


def voters_entry(voters: VoterSet) -> Entry:
    """The voters entry a dynamic quorum is formatted with (offset 0, epoch 0, every node)."""
    return Entry(offset=0, epoch=0, payload=voters.encode(), kind=EntryKind.VOTERS)


class InvariantViolation(AssertionError):
    """An invariant broke: the message says which, where and when."""


_KINDS = {int(kind): kind for kind in EntryKind}


def entry_block(entry: Entry) -> ReplicaBlock:
    """The block a core entry is stored as: its kind and payload are the body (no records)."""
    body = bytes((entry.kind,)) + entry.payload
    return ReplicaBlock(
        first_offset=entry.offset,
        count=entry.count,
        epoch=entry.epoch,
        timestamp=0,
        body=body,
        crc32=zlib.crc32(body),
    )


def block_entry(block: ReplicaBlock) -> Entry:
    """The core entry a stored block stands for (`entry_block` undone)."""
    return Entry(
        offset=block.first_offset,
        epoch=block.epoch,
        payload=block.body[1:],
        count=block.count,
        kind=_KINDS[block.body[0]],
    )


@dataclass(slots=True)
class SimLog:
    """A node's log: the blocks from its start are in a `MemoryReplicaLog`, the one the
    conformance suite holds to `ReplicaLog`'s behaviour; this adds the simulated disk.

    Each core entry (a batch of `count` offsets) is one block, written with `write_blocks`,
    cut with `truncate_to`, trimmed with `trim_before` (or `reset_to_snapshot` when the start
    moves to the end), read with `replica_blocks`, and the epochs are the log's epoch cache.
    What the simulation adds: `flushed`, its own durability mark (a truncation here keeps an
    unflushed tail unflushed, where the file log's makes it durable: the weaker disk the seeds
    have always run), `crash`, which loses a random part of the unflushed tail and may tear
    its last entry, and `below`, the entries before the start kept for the checker.
    """

    replica: MemoryReplicaLog = field(default_factory=MemoryReplicaLog)
    flushed: int = 0
    below: tuple[Entry, ...] = ()
    """The entries before the log start (one per offset): only in `snapshot`, kept here for the
    checker."""
    snapshot: tuple[SnapshotId, bytes] | None = None
    """The newest snapshot of committed state: its id and bytes."""

    @classmethod
    def installed(cls, entries: tuple[Entry, ...], snapshot: tuple[SnapshotId, bytes]) -> SimLog:
        """The log of a node that installed `snapshot` (of `entries`): empty after it."""
        log = cls(flushed=len(entries), below=entries, snapshot=snapshot)
        log.replica.reset_to_snapshot(log.start_snapshot(len(entries)))
        return log

    @property
    def start(self) -> int:
        """The log start: the first offset in the replica log."""
        return self.replica.log_start_offset

    @property
    def end(self) -> int:
        """One past the last offset in the log."""
        return self.replica.end_offset

    @property
    def start_epoch(self) -> int:
        start = self.start
        return self.below[start - 1].epoch if start else 0

    def start_snapshot(self, start: int) -> StartSnapshot:
        """The snapshot record of a log that starts at `start` (the entries before it)."""
        return StartSnapshot(
            offset=start - 1, epoch=self.below[start - 1].epoch, timestamp=0, checksum="sim"
        )

    def epochs(self) -> list[tuple[int, int]]:
        return self.replica.epoch_cache()

    def entry(self, offset: int) -> Entry:
        """The batch holding `offset` (below the start too)."""
        if offset < self.start:
            return self.below[offset]
        return block_entry(self.replica.block_at(offset))

    def holds(self, offset: int, entry: Entry) -> bool:
        """True if the batch holding `offset` is `entry`."""
        return offset < self.end and self.entry(offset) == entry

    @property
    def entries(self) -> list[Entry]:
        """Every offset's batch, from offset 0 (for tests and the snapshots)."""
        entries = list(self.below[: self.start])
        if self.end > self.start:
            for block in self.replica.replica_blocks(start=self.start, max_bytes=1 << 62):
                entries.extend([block_entry(block)] * block.count)
        return entries

    def read_batch(self, offset: int) -> Entry:
        """The batch a fetch from `offset` starts with (it holds `offset`, maybe from before)."""
        if offset < self.start:
            return self.below[offset]
        try:
            (block,) = self.replica.replica_blocks(start=offset, max_bytes=0)
        except LogError:  # inside a block: the caller reports the batch it fell into
            return self.entry(offset)
        return block_entry(block)

    def append(self, entry: Entry) -> None:
        """Write the entry's block at the end, not yet flushed."""
        self.replica.write_blocks([entry_block(entry)], check=False)

    def flush(self) -> None:
        self.flushed = self.replica.flush()

    def truncate(self, offset: int) -> None:
        """Remove the entries from `offset` on; the unflushed part kept stays unflushed."""
        self.replica.truncate_to(offset)
        self.flushed = min(self.flushed, self.end)

    def trim(self, start: int) -> None:
        """Move the start to the batch boundary `start` (<= the snapshot's end, > 0)."""
        self.below = tuple(self.entries[:start])
        if start == self.end:
            self.replica.reset_to_snapshot(self.start_snapshot(start))
        else:
            self.replica.trim_before(start)

    def holds_voters(self) -> bool:
        """Whether the log (or what its start moved past) holds a voters entry."""
        return any(e.kind is EntryKind.VOTERS for e in self.entries[: self.end])

    def history(self, static: VoterSet | None = None) -> VoterHistory:
        """The voter sets of this log, as a node's shell reads them at start (KIP-853).

        `static`: a static quorum's voters, the base below the log's first voters entry
        (its kraft.version upgrade's) unless the start moved past that entry.
        """
        entries = self.entries
        below = voters_below(entries, self.start)
        history = VoterHistory(
            base=below if below.voters or static is None else static,
            dynamic=static is None or bool(below.voters),
        )
        for offset in range(self.start, self.end):
            entry = entries[offset]
            if entry.kind is EntryKind.VOTERS and entry.offset == offset:
                history.append(offset, VoterSet.decode(entry.payload))
        return history

    def boundary(self, offset: int) -> int:
        """The batch boundary at or below `offset` (a batch is kept or lost whole)."""
        return self.entry(offset).offset if offset < self.end else offset

    def crash(self, rng: random.Random) -> None:
        """Lose what was not flushed: a random prefix of it survives, the last one maybe torn."""
        keep = self.flushed + rng.randint(0, self.end - self.flushed)
        if keep > self.flushed and rng.random() < 0.5:
            keep -= 1  # a torn last entry: recovery drops it
        keep = self.boundary(keep)
        self.replica.truncate_to(keep)
        self.flush()  # an open makes what it recovered durable, as `ReplicaLog.open` does


@dataclass(slots=True)
class SimNode:
    """A node: its durable state (log, quorum-state) and, while it runs, its core."""

    id: int
    log: SimLog = field(default_factory=SimLog)
    state: QuorumState | None = None
    core: RaftCore | None = None
    incarnation: int = 0
    next_tick: int = -1


@dataclass(slots=True)
class Checker:
    """The invariants, checked after every event."""

    cluster: Cluster
    leaders: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    high_watermarks: dict[tuple[int, int], int] = field(default_factory=dict)
    committed: list[Entry] = field(default_factory=list)
    acked: dict[int, Entry] = field(default_factory=dict)
    committed_voters: frozenset[int] = frozenset()
    """The voters of the latest committed voter set (the static voters in a static quorum)."""
    voter_changes: int = 0
    """Voters entries committed after the first (the changes the seed made)."""
    commit_voters: list[frozenset[int]] = field(default_factory=list)
    """Per committed offset, the voter set of the node that committed it first (its leader's)."""

    def fail(self, what: str) -> None:
        raise InvariantViolation(f"seed {self.cluster.seed} at {self.cluster.now} ms: {what}")

    def after_event(self, node: SimNode, ready_log: list[Ready]) -> None:
        core = node.core
        if core is None:
            return
        if core.epoch < self.epochs.get(node.id, 0):
            self.fail(f"node {node.id} epoch went back to {core.epoch}")
        self.epochs[node.id] = core.epoch
        key = (node.id, node.incarnation)
        if core.high_watermark < self.high_watermarks.get(key, 0):
            self.fail(f"node {node.id} high watermark went back to {core.high_watermark}")
        for ready in ready_log:
            if ready.role is Role.LEADER:
                holder = self.leaders.setdefault(core.epoch, node.id)
                if holder != node.id:
                    self.fail(f"two leaders in epoch {core.epoch}: {holder} and {node.id}")
                if node.id not in core.voters:
                    if not self.removal_pending(node):
                        self.fail(f"node {node.id} leads epoch {core.epoch} but is no voter")
                    self.cluster.stats["leaders elected with their removal pending"] += 1
                self.check_acked_in(node)
            if ready.high_watermark is not None:
                self.on_commit(node, self.high_watermarks.get(key, 0), ready.high_watermark)
                self.high_watermarks[key] = ready.high_watermark
        if core.role is Role.LEADER and self.leaders.get(core.epoch) != node.id:
            self.fail(f"node {node.id} leads epoch {core.epoch}, which it was not elected in")
        if self.cluster.dynamic or core.dynamic:
            self.check_membership(node, ready_log)

    def check_membership(self, node: SimNode, ready_log: list[Ready]) -> None:
        """The voter set in force is the log's; one change at a time; removed nodes step aside."""
        core = node.core
        assert core is not None
        changed = any(
            r.truncate_to is not None
            or r.install is not None
            or any(e.kind is EntryKind.VOTERS for e in r.append)
            for r in ready_log
        )
        if changed:
            expected = self.cluster.log_voters(node.log.entries, node.log.end).ids
            if core.voters != expected:
                self.fail(
                    f"node {node.id} uses voters {sorted(core.voters)}, its log says "
                    f"{sorted(expected)}"
                )
        if (
            node.id not in core.voters
            and core.role not in (Role.OBSERVER, Role.LEADER)
            and not self.removal_pending(node)
        ):
            self.fail(f"node {node.id} is {core.role.name} but no voter")
        if (
            core.role is Role.LEADER
            and node.id not in core.voters
            and core.high_watermark > core.history.latest_offset
        ):
            self.fail(f"node {node.id} leads on after its removal was committed")
        for ready in ready_log:
            if ready.role is Role.OBSERVER and self.leaders.get(core.epoch) == node.id:
                self.cluster.stats["removed leaders stepped aside"] += 1
            for entry in ready.append:
                if entry.kind is EntryKind.VOTERS and core.role is Role.LEADER:
                    self.check_one_change(node, entry)

    def removal_pending(self, node: SimNode) -> bool:
        """Whether the last voters entry of the node's log removed it, not known committed there.

        Such a node still takes part in elections (Raft's single-server changes): it may hold
        the only copy of its removal, which the others need it to commit; its vote never counts.
        """
        core = node.core
        if core is None or not core.dynamic:
            return False
        entries = node.log.entries
        last = max(
            (o for o in range(node.log.end) if entries[o].kind is EntryKind.VOTERS),
            default=-1,
        )
        return (
            last >= 0 and core.high_watermark <= last and node.id in voters_below(entries, last).ids
        )

    def check_one_change(self, node: SimNode, entry: Entry) -> None:
        """A leader's voters entry changes one voter of a committed set."""
        entries = node.log.entries
        previous = voters_below(entries, entry.offset)
        last = max(
            (e.offset for e in entries[: entry.offset] if e.kind is EntryKind.VOTERS),
            default=-1,
        )
        if last >= len(self.committed):
            self.fail(f"node {node.id} changes the voters at {entry.offset} before {last} commits")
        new = VoterSet.decode(entry.payload).ids
        if last < 0 and not self.cluster.dynamic:
            # A static quorum's kraft.version upgrade: its static voters into the log.
            if new != self.cluster.voter_ids:
                self.fail(f"node {node.id} upgrades with voters {sorted(new)}, not the static")
            return
        if len(previous.ids ^ new) != 1:
            self.fail(
                f"node {node.id} changes voters {sorted(previous.ids)} to {sorted(new)} at once"
            )

    def on_truncate(self, node: SimNode, offset: int) -> None:
        core = node.core
        if core is not None and offset < self.high_watermarks.get((node.id, node.incarnation), 0):
            self.fail(f"node {node.id} truncated to {offset}, below its high watermark")

    def on_commit(self, node: SimNode, old: int, new: int) -> None:
        if new > node.log.end:
            self.fail(f"node {node.id} high watermark {new} is past its log end")
        for offset in range(old, new):
            entry = node.log.entry(offset)
            if offset < len(self.committed):
                if self.committed[offset] != entry:
                    self.fail(
                        f"node {node.id} commits {entry} where {self.committed[offset]} "
                        "was committed"
                    )
            elif offset == len(self.committed):
                self.committed.append(entry)
                if node.core is not None:
                    self.commit_voters.append(node.core.voters)
                if entry.kind is EntryKind.VOTERS and entry.offset == offset:
                    voters = VoterSet.decode(entry.payload).ids
                    if voters != self.committed_voters:
                        self.voter_changes += 1
                    self.committed_voters = voters
                self.check_on_majority(offset)
            else:
                self.fail(f"node {node.id} committed offset {offset} out of order")
        self.cluster.on_commit(node, new)

    def holds(self, node: SimNode, offset: int) -> bool:
        return node.log.holds(offset, self.committed[offset])

    def check_on_majority(self, offset: int) -> None:
        """On a majority of the committed voter set, or of the set that committed the offset.

        A leader counts a change from the moment it appends it, so an entry may commit on a
        majority of the new set only, and stay so if that change is lost: one voter apart
        from the committed set, every majority of either set meets it (one change at a time
        is checked on its own). Once a later set commits, its majority holds the offset.
        """
        holders = {
            node.id
            for node in self.cluster.nodes.values()
            # A wiped voter that has not caught up cannot vote: it counts as still holding
            # what it held (the only way to lose a durable entry is the test's wipe).
            if node.state is None or self.holds(node, offset)
        }
        count = len(holders & self.committed_voters)
        if count >= len(self.committed_voters) // 2 + 1:
            return
        voters = self.commit_voters[offset] if offset < len(self.commit_voters) else frozenset()
        if voters and len(holders & voters) >= len(voters) // 2 + 1:
            return
        self.fail(f"committed offset {offset} is on {count} voters only")

    def check_all_committed(self) -> None:
        for offset in range(len(self.committed)):
            self.check_on_majority(offset)

    def check_acked_in(self, node: SimNode) -> None:
        for offset, entry in self.acked.items():
            if not node.log.holds(offset, entry):
                self.fail(f"new leader {node.id} lacks acknowledged {entry}")

    def acknowledge(self, entry: Entry) -> None:
        self.acked[entry.offset] = entry


class Cluster:
    """Nodes, the network, the clock and the event queue of one seed."""

    def __init__(
        self,
        seed: int,
        *,
        voters: int = 3,
        observers: int = 0,
        trace: bool = False,
        faults: bool = True,
        batch_max: int = 1,
        dynamic: bool = False,
    ) -> None:
        self.seed = seed
        self.dynamic = dynamic
        """The voters are in the log (KIP-853): the initial ones formatted at offset 0, the
        others (`observers`) start as observers that may be added."""
        self.batch_max = batch_max
        """Proposals are batches of 1..batch_max offsets (1: the seeds' historical runs)."""
        self.rng = random.Random(seed)
        self.trace = trace
        self.now = 0
        self.queue: list[tuple[int, int, str, tuple[object, ...]]] = []
        self.seq = 0
        ids = list(range(1, voters + 1))
        self.voter_ids = frozenset(ids)
        self.majority = voters // 2 + 1
        self.nodes = {i: SimNode(id=i) for i in range(1, voters + observers + 1)}
        self.drop_rate = self.rng.choice([0.0, 0.0, 0.02, 0.1])
        self.dup_rate = self.rng.choice([0.0, 0.01, 0.05])
        self.max_delay = self.rng.choice([2, 10, 40])
        # A long linger widens the window in which the leader's entries are not yet durable.
        self.linger = self.rng.choice([0, 25, 25, 400])
        # One entry per answer lets a follower acknowledge a new leader's old-epoch entries
        # without its marker (where the epoch-start rule matters).
        self.fetch_entries = self.rng.randint(1, MAX_FETCH_ENTRIES)
        # Small chunks make a snapshot transfer take several requests (and see leader changes).
        # (Taken from the seed, not the random stream, so the other draws stay as they were.)
        self.snapshot_chunk = (64, 256, 1 << 20)[seed % 3]
        if not faults:
            # A directed schedule: a reliable, fast network, one entry per fetch, no linger.
            self.drop_rate = self.dup_rate = 0.0
            self.max_delay, self.linger, self.fetch_entries = 2, 0, 1
        self.blocked: set[tuple[int, int]] = set()
        self.checker = Checker(self, committed_voters=self.voter_ids)
        self.proposed: dict[int, list[Entry]] = {}
        self.payloads = 0
        self.events = 0
        self.stats: Counter[str] = Counter()
        """What the seed exercised: leaders elected, truncations, entries lost on kill, ..."""
        for node in self.nodes.values():
            if node.id in self.voter_ids:
                node.state = QuorumState(leader_epoch=0, voters=self.voter_ids)
                if dynamic:
                    node.log.append(voters_entry(VoterSet.of(self.voter_ids)))
                    node.log.flush()
            elif dynamic:
                # Formatted with --no-initial-controllers: durable state, no vote, no voters.
                node.state = QuorumState(leader_epoch=0, voters=frozenset())
            self.start(node)

    # ------------------------------------------------------------------------ nodes

    def voters(self) -> list[SimNode]:
        """The nodes of the committed voter set."""
        return [self.nodes[i] for i in sorted(self.checker.committed_voters)]

    def config(self, node_id: int) -> QuorumConfig:
        return QuorumConfig(
            node_id=node_id,
            voters=self.voter_ids,
            append_linger_ms=self.linger,
            fetch_snapshot_max_bytes=self.snapshot_chunk,
        )

    def start(self, node: SimNode) -> None:
        if node.core is not None:
            return
        self.log(f"start {node.id}")
        node.incarnation += 1
        if node.state is None:
            # No durable election state: the epoch it knew was never persisted (it cannot vote).
            self.checker.epochs.pop(node.id, None)
        log = node.log
        view = LogView.from_log(
            end_offset=log.end,
            epochs=log.epochs(),
            start_offset=log.start,
            start_epoch=log.start_epoch,
            snapshot=None if log.snapshot is None else log.snapshot[0],
            voters=log.history()
            if self.dynamic
            else log.history(VoterSet.of(self.voter_ids))
            if log.holds_voters()
            else None,
        )
        node.core = RaftCore(
            self.config(node.id),
            state=node.state,
            log=view,
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.now,
        )
        node.next_tick = -1
        self.proposed[node.id] = []
        self.process(node)

    def kill(self, node: SimNode) -> None:
        if node.core is None:
            return
        self.log(f"kill {node.id}")
        node.core = None
        before = node.log.end
        node.log.crash(self.rng)
        self.stats["kills"] += 1
        self.stats["entries lost on kill"] += before - node.log.end
        self.checker.check_all_committed()

    def snapshot_and_trim(self, node: SimNode, *, whole: bool = False) -> None:
        """Stop the node, snapshot a committed prefix of its log, move its start, restart it.

        As `mlog snapshot create` and `mlog log trim --before-snapshot` on a stopped node: the
        snapshot is of committed entries only, and the start moves at most to its end.
        """
        self.kill(node)
        log = node.log
        committed = self.checker.committed
        agreed = 0
        while agreed < min(log.flushed, len(committed)) and log.entry(agreed) == committed[agreed]:
            agreed += 1
        low = max(log.start, 1, 0 if log.snapshot is None else log.snapshot[0].end_offset)
        end = log.boundary(self.rng.randint(low, agreed)) if agreed >= low else 0
        if end >= low:
            entries = tuple(log.entries[:end])
            log.snapshot = (
                SnapshotId(end_offset=end, epoch=entries[-1].epoch),
                encode_snapshot(entries, dynamic=self.dynamic or holds_voters(entries)),
            )
            log.trim(end if whole else log.boundary(self.rng.randint(log.start, end)))
            self.log(f"snapshot {node.id} at end {end}, log start {log.start}")
            self.stats["trims"] += 1
        self.start(node)

    def wipe(self, node: SimNode) -> None:
        self.kill(node)
        self.log(f"wipe {node.id}")
        self.stats["wipes"] += 1
        node.log = SimLog()
        node.state = None
        self.checker.epochs.pop(node.id, None)

    def leader(self) -> SimNode | None:
        best = None
        for node in self.nodes.values():
            core = node.core
            if (
                core is not None
                and core.role is Role.LEADER
                and (best is None or best.core is None or core.epoch > best.core.epoch)
            ):
                best = node
        return best

    # ---------------------------------------------------------------------- events

    def schedule(self, at: int, kind: str, *args: object) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, kind, args))

    def at(self, at: int, action: Callable[[], None]) -> None:
        self.schedule(at, "action", action)

    def send(self, source: int, destination: int, message: Message) -> None:
        if self.rng.random() < self.drop_rate:
            return
        copies = 2 if self.rng.random() < self.dup_rate else 1
        for _ in range(copies):
            delay = self.rng.randint(1, self.max_delay)
            self.schedule(self.now + delay, "deliver", source, destination, message)

    def process(self, node: SimNode) -> None:
        """Run the node's Ready loop to quiescence, then check the invariants."""
        core = node.core
        assert core is not None
        readies: list[Ready] = []
        while True:
            ready = core.ready()
            if ready.empty:
                break
            readies.append(ready)
            self.apply(node, ready)
            core.advance(ReadyDone(flushed_offset=node.log.flushed))
        self.checker.after_event(node, readies)
        deadline = core.next_deadline_ms()
        if deadline < 2**61 and (node.next_tick < self.now or deadline < node.next_tick):
            node.next_tick = max(deadline, self.now + 1)
            self.schedule(node.next_tick, "tick", node.id, node.incarnation)

    def apply(self, node: SimNode, ready: Ready) -> None:
        log = node.log
        if ready.quorum_state is not None:
            if node.state is None:
                self.stats["wiped voters caught up"] += 1
            node.state = ready.quorum_state
        if ready.role is Role.LEADER:
            self.stats["leaders elected"] += 1
        if ready.role is Role.RESIGNED:
            self.stats["resignations"] += 1
        if ready.install is not None:
            if node.core is not None and node.core.snapshot_transfers > 1:
                self.stats["snapshot transfers started over"] += 1
            self.install(node, ready.install.snapshot_id, ready.install.data)
        if ready.truncate_to is not None:
            self.checker.on_truncate(node, ready.truncate_to)
            if any(
                log.entry(offset).kind is EntryKind.VOTERS
                for offset in range(max(ready.truncate_to, log.start), log.end)
            ):
                self.stats["voters entries truncated"] += 1
            self.stats["truncations"] += 1
            log.truncate(ready.truncate_to)
            self.checker.check_all_committed()
        for entry in ready.append:
            if entry.offset != log.end:
                raise InvariantViolation(f"node {node.id} appends {entry} at {log.end}")
            log.append(entry)
        if ready.flush:
            log.flush()
        for out in ready.messages:
            message = out.message
            if isinstance(message, FetchResponse) and out.read_until > out.read_from:
                message = replace(
                    message, records=self.batches(node, out.read_from, out.read_until)
                )
            elif isinstance(message, FetchSnapshotResponse) and message.error_code == 0:
                if log.snapshot is None or log.snapshot[0] != message.snapshot_id:
                    raise InvariantViolation(f"node {node.id} serves a snapshot it lacks")
                data = log.snapshot[1]
                if out.read_from > len(data):
                    message = replace(message, error_code=ErrorCode.POSITION_OUT_OF_RANGE)
                else:
                    chunk = data[out.read_from : out.read_until]
                    message = replace(message, size=len(data), unaligned_records=chunk)
            self.send(node.id, out.destination, message)
        if ready.role is not None and self.trace:
            self.log(f"node {node.id} is {ready.role.name} in epoch {node.core.epoch}")  # type: ignore[union-attr] # the core runs while its Ready is applied

    def batches(self, node: SimNode, start: int, until: int) -> tuple[Entry, ...]:
        """The whole batches of the node's log in [start, until), `fetch_entries` at most."""
        log = node.log
        found: list[Entry] = []
        offset = start
        while offset < min(until, log.end) and len(found) < self.fetch_entries:
            batch = log.read_batch(offset)
            if batch.offset != offset:
                raise InvariantViolation(f"node {node.id} reads from {offset}, inside {batch}")
            if batch.end_offset > until:
                break
            found.append(batch)
            offset = batch.end_offset
        return tuple(found)

    def install(self, node: SimNode, snapshot_id: SnapshotId, data: bytes) -> None:
        """The node's log becomes the snapshot: its state must be the committed entries."""
        entries = decode_snapshot(data)
        end = snapshot_id.end_offset
        committed = self.checker.committed
        if len(entries) != end or list(entries) != committed[:end] or end > len(committed):
            self.checker.fail(
                f"node {node.id} installs snapshot {snapshot_id} of uncommitted state"
            )
        if entries[-1].epoch != snapshot_id.epoch:
            self.checker.fail(f"node {node.id} installs snapshot {snapshot_id} of another epoch")
        self.checker.on_truncate(node, end)
        node.log = SimLog.installed(entries, (snapshot_id, data))
        self.stats["snapshots installed"] += 1
        self.checker.check_all_committed()

    def on_commit(self, node: SimNode, high_watermark: int) -> None:
        pending = self.proposed.get(node.id, [])
        while pending and pending[0].offset < high_watermark:
            entry = pending.pop(0)
            if node.log.holds(entry.offset, entry):
                self.checker.acknowledge(entry)

    def propose(self) -> None:
        node = self.leader()
        if node is None or node.core is None:
            return
        self.payloads += 1
        payload = f"{self.seed}:{self.payloads}".encode()
        count = self.rng.randint(1, self.batch_max) if self.batch_max > 1 else 1
        answer = node.core.propose([Batch(payload=payload, count=count)])
        if isinstance(answer, OffsetRange):
            entry = Entry(offset=answer.first, epoch=answer.epoch, payload=payload, count=count)
            self.proposed[node.id].append(entry)
        self.process(node)

    def change_voters(
        self, *, add: int | None = None, remove: int | None = None, at: SimNode | None = None
    ) -> bool:
        """Ask the leader to add or remove one voter (AddRaftVoter / RemoveRaftVoter).

        True if a leader appended the change (it is acknowledged once committed, as a
        proposal is); False if there is no leader or it refused (another change pending, the
        new voter not caught up, ...). `at` asks that node (a stale leader, say) instead of
        the leader of the newest epoch.
        """
        node = at or self.leader()
        if node is None or node.core is None:
            return False
        answer = node.core.change_voters(
            add=None if add is None else Voter(id=add, directory_id=f"dir-{add}"),
            remove=remove,
        )
        self.log(f"change voters (add {add}, remove {remove}) at {node.id}: {answer}")
        if not isinstance(answer, OffsetRange):
            self.stats["voter changes refused"] += 1
            self.process(node)
            return False
        self.stats["voter changes appended"] += 1
        entry = node.core.log.voters
        assert entry is not None
        appended = Entry(
            offset=answer.first,
            epoch=answer.epoch,
            payload=entry.latest.encode(),
            kind=EntryKind.VOTERS,
        )
        self.proposed[node.id].append(appended)
        self.process(node)
        return True

    def upgrade_voters(self, *, at: SimNode | None = None) -> bool:
        """Ask the leader to move the static voters into the log (the kraft.version upgrade).

        True if a leader appended it (acknowledged once committed); False otherwise.
        """
        node = at or self.leader()
        if node is None or node.core is None:
            return False
        answer = node.core.upgrade_voters(VoterSet.of(self.voter_ids))
        self.log(f"upgrade voters at {node.id}: {answer}")
        if not isinstance(answer, OffsetRange):
            self.stats["upgrades refused"] += 1
            self.process(node)
            return False
        self.stats["upgrades appended"] += 1
        history = node.core.log.voters
        assert history is not None
        self.proposed[node.id].append(
            Entry(
                offset=answer.first,
                epoch=answer.epoch,
                payload=history.latest.encode(),
                kind=EntryKind.VOTERS,
            )
        )
        self.process(node)
        return True

    def log_voters(self, entries: tuple[Entry, ...] | list[Entry], end: int) -> VoterSet:
        """The voter set of a log that ends at `end`: its last voters entry's, else static."""
        voters = voters_below(entries, end)
        return voters if voters.voters or self.dynamic else VoterSet.of(self.voter_ids)

    def run_until(self, end: int, *, until: Callable[[], bool] | None = None) -> bool:
        """Run the events up to time `end`, or until `until()` holds after an event."""
        while self.queue and self.queue[0][0] <= end:
            if until is not None and until():
                return True
            at, _, kind, args = heapq.heappop(self.queue)
            self.now = max(self.now, at)
            self.events += 1
            if kind == "action":
                action = args[0]
                assert callable(action)
                action()
                continue
            if kind == "tick":
                node = self.nodes[int(args[0])]  # type: ignore[call-overload]
                if node.core is None or node.incarnation != args[1]:
                    continue
                node.next_tick = -1
                node.core.tick(self.now)
                self.process(node)
            elif kind == "deliver":
                source, destination, message = args
                node = self.nodes[destination]  # type: ignore[index]
                if node.core is None or (source, destination) in self.blocked:
                    continue
                if self.trace:
                    self.log(f"{source} -> {destination}: {message}")
                node.core.step(source, message)  # type: ignore[arg-type]
                self.process(node)
        if until is not None and until():
            return True
        self.now = max(self.now, end)
        return False

    def log(self, text: str) -> None:
        if self.trace:
            print(f"{self.now:>7} ms  {text}")

    # ------------------------------------------------------------------- network faults

    def partition(self, group: set[int], *, one_way: bool = False) -> None:
        others = set(self.nodes) - group
        self.log(f"partition {sorted(group)} | {sorted(others)}{' one way' if one_way else ''}")
        for a in group:
            for b in others:
                self.blocked.add((a, b))
                if not one_way:
                    self.blocked.add((b, a))

    def heal(self) -> None:
        self.log("heal")
        self.blocked.clear()
        self.drop_rate = 0.0
        for node in self.nodes.values():
            if node.core is None:
                self.start(node)


def _scenario_kill_leader(c: Cluster, t: int) -> None:
    node = c.leader()
    if node is not None:
        c.kill(node)
        c.at(t + c.rng.randint(200, 3000), lambda: c.start(node))


SCENARIOS = (
    "election",
    "leader_kill_restart",
    "all_killed_majority_restarted",
    "leader_partitioned",
    "split_2_3",
    "back_to_back",
    "wiped_node",
    "one_way",
    "chaos",
    "lagging_trimmed",
)


def run_seed(
    seed: int, *, trace: bool = False, scenario: str | None = None, batch_max: int = 1
) -> Cluster:
    """Run one seed to the end; raises InvariantViolation (or AssertionError) on a bug."""
    name = scenario or SCENARIOS[seed % len(SCENARIOS)]
    voters = 5 if name == "split_2_3" or (name == "chaos" and seed % 2) else 3
    c = Cluster(
        seed,
        voters=voters,
        observers=1 if seed % 3 == 0 else 0,
        trace=trace,
        batch_max=batch_max,
    )
    c.log(f"scenario {name}, {voters} voters")
    rng = c.rng
    fault_at = rng.randint(2000, 3500)
    for t in range(500, 7000, rng.choice([200, 400, 800])):
        c.at(t, c.propose)
    if name == "leader_kill_restart":
        c.at(fault_at, lambda: _scenario_kill_leader(c, fault_at))
    elif name == "all_killed_majority_restarted":

        def all_killed() -> None:
            for node in c.nodes.values():
                c.kill(node)
            for node in rng.sample(c.voters(), c.majority):
                c.at(fault_at + rng.randint(10, 1500), partial(c.start, node))

        c.at(fault_at, all_killed)
    elif name in ("leader_partitioned", "one_way"):

        def cut() -> None:
            node = c.leader()
            if node is not None:
                c.partition({node.id}, one_way=name == "one_way")
                if name == "one_way" and rng.random() < 0.5:
                    # The other way round: the leader hears the others, they do not hear it.
                    c.blocked = {(b, a) for a, b in c.blocked}

        c.at(fault_at, cut)
    elif name == "split_2_3":
        c.at(fault_at, lambda: c.partition(set(rng.sample(sorted(c.voter_ids), 2))))
    elif name == "back_to_back":
        for k in range(3):
            at = fault_at + k * rng.randint(300, 1500)
            c.at(at, partial(_scenario_kill_leader, c, at))
    elif name == "wiped_node":

        def wipe() -> None:
            node = c.nodes[rng.choice(sorted(c.voter_ids))]
            c.wipe(node)
            c.at(fault_at + rng.randint(100, 2000), lambda: c.start(node))

        c.at(fault_at, wipe)
    elif name == "lagging_trimmed":
        # A follower stops; the others snapshot and trim past it, one at a time (a majority
        # stays up), so it catches up by FetchSnapshot when it comes back.
        lagging = c.nodes[rng.choice(sorted(c.voter_ids))]
        c.at(fault_at - 1000, lambda: c.kill(lagging))
        others = [n for n in c.nodes.values() if n is not lagging]
        for k, node in enumerate(others):
            trim = partial(c.snapshot_and_trim, node, whole=rng.random() < 0.7)
            c.at(fault_at + k * rng.randint(200, 700), trim)
        c.at(fault_at + 2500, lambda: c.start(lagging))
    elif name == "chaos":
        for k in range(4):
            at = fault_at - 1500 + k * rng.randint(400, 1200)
            c.at(at, lambda: _chaos_step(c))
    heal_at = 7000
    c.run_until(heal_at)
    c.heal()
    # Liveness once everything is healed: within 10 s, proposals are acknowledged again.
    acked = len(c.checker.acked)
    while len(c.checker.acked) < acked + 2 and c.now < heal_at + 10_000:
        c.propose()
        c.run_until(c.now + 250)
    if len(c.checker.acked) < acked + 2:
        raise InvariantViolation(f"seed {seed}: no proposal acknowledged 10 s after healing")
    c.checker.check_all_committed()
    return c


def _chaos_step(c: Cluster) -> None:
    rng = c.rng
    live = [n for n in c.nodes.values() if n.core is not None]
    down = [n for n in c.nodes.values() if n.core is None]
    choice = rng.random()
    if choice < 0.3 and down:
        c.start(rng.choice(down))
    elif choice < 0.55 and len(down) < c.majority - 1 + (len(c.voter_ids) > 3):
        c.kill(rng.choice(live))
    elif choice < 0.7 and all(n.state is not None for n in c.voters()):
        # One wipe at a time: a voter that lost its state must catch up before another does
        # (wiping a majority loses committed entries whatever the protocol).
        node = rng.choice(live)
        c.wipe(node)
        c.at(c.now + rng.randint(100, 2000), lambda: c.start(node))
    elif choice < 0.8:
        c.snapshot_and_trim(rng.choice(list(c.nodes.values())))
    elif choice < 0.9:
        c.partition(set(rng.sample(sorted(c.nodes), rng.randint(1, 2))), one_way=rng.random() < 0.3)
    else:
        c.blocked.clear()


def main(argv: list[str] | None = None) -> int:
    """Run many seeds (or replay one) and print any failing seed with its replay command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run only this seed")
    parser.add_argument("--trace", action="store_true", help="print every event")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    began = time.monotonic()
    events = 0
    for seed in seeds:
        try:
            events += run_seed(seed, trace=args.trace).events
        except AssertionError as exc:
            failures += 1
            print(f"FAIL {exc}\n  replay: python -m tests.support.raft_sim --seed {seed} --trace")
    took = time.monotonic() - began
    print(f"{len(seeds)} seeds, {events} events, {failures} failed, {took:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
