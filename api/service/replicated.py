"""A metadata service whose writes a controller quorum replicates before they are answered.

The quorum's shell (`api.raft`) drives it through its public methods: `follow` a committed
image, `drop_uncommitted` on a leadership change, `first_image`, the snapshots it holds; the
service knows the shell only as a `ReplicationNode`, so imports run one way (api.raft uses
api.service, never the reverse).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from api.service.client_writes import CURRENT_WRITE, noting_write
from api.service.service import (
    SERVICE_PRINCIPAL,
    Command,
    MetadataService,
    bootstrap_features,
)
from metadata_log.config import LogConfig
from metadata_log.errors import LogError
from metadata_log.log import AppendResult
from metadata_log.replica_log import ReplicaLog
from records.model import Record
from replay.controller.commands import PurgeResult
from replay.controller.controller import Controller
from replay.controller.errors import ApiError, ErrorCode
from replay.features import CHAINED_METADATA_VERSION, finalized_level
from replay.image import EMPTY_IMAGE, METADATA_VERSION, MetadataImage
from replay.loader import load_image

if TYPE_CHECKING:
    from api.service.snapshots import Snapshotter
    from replay.sql.store import SnapshotInfo

T = TypeVar("T")


class ReplicationNode(Protocol):
    """What the service needs of its quorum node: who leads, and a way to commit records."""

    @property
    def leading(self) -> bool:
        """Whether this node leads and takes writes."""
        ...

    @property
    def epoch(self) -> int:
        """The current epoch (a leader's writes carry it)."""
        ...

    async def wait_leading(self) -> None:
        """Wait while this node may be about to lead; NOT_CONTROLLER otherwise."""

    async def propose(
        self, records: Sequence[Record], *, principal: str | None, first: int
    ) -> AppendResult:
        """Append `records` as a batch starting at `first`; returns once committed."""
        ...


class ReplicatedService(MetadataService):
    """A `MetadataService` whose writes are replicated by the quorum before they are answered.

    `node` is set by the quorum's shell (`api.raft.node.QuorumNode`), which uses only the
    public methods below. Commands that write run only on the leader; commands that
    only read run anywhere, on the committed image.
    """

    node: ReplicationNode | None = None

    @classmethod
    def open_replicated(
        cls,
        log_dir: Path,
        *,
        config: LogConfig | None = None,
        controller: Controller | None = None,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
    ) -> ReplicatedService:
        """Open a quorum node's log; the image starts empty and follows the high watermark.

        The log's tail may hold entries that were never committed (a new leader may truncate
        them), so nothing is replayed until the quorum says how far the log is committed;
        then the node starts from its newest snapshot at or below that offset that belongs to
        this log (`snapshots`), and replays only the log after it. With `snapshots` the node
        also takes snapshots of its committed image by the usual policy.
        """
        try:
            log = ReplicaLog.open(log_dir, config=config)
        except BaseException:
            if snapshots is not None:
                snapshots.close()
            raise
        return cls(log, EMPTY_IMAGE, controller, clock_ms=clock_ms, snapshots=snapshots)

    @property
    def replica_log(self) -> ReplicaLog:
        """The node's log, as its Raft shell writes it."""
        log = self.log
        if not isinstance(log, ReplicaLog):  # pragma: no cover - open_replicated makes one
            raise TypeError(f"a quorum node needs a ReplicaLog, not {type(log).__name__}")
        return log

    def first_image(self, last: int) -> MetadataImage:
        """The image at committed offset `last` when nothing is applied yet (worker thread).

        The newest snapshot at or before `last` whose entry this log still holds (same epoch
        and timestamp) is the image of a committed prefix: entries up to a committed offset
        are identical on every node that has them, so the log after it is all that replays.
        """
        if self._snapshots is None:
            return load_image(self.log, lte=last)
        return self._snapshots.start_image(self.log, lte=last)

    def committed_snapshot(self) -> SnapshotInfo | None:
        """The newest stored snapshot that belongs to this log (worker thread or start-up).

        A quorum node's snapshots are taken of committed images only (by the policy, or
        installed from the leader), so this one is of committed state. None without a store.
        """
        if self._snapshots is None or not self._snapshots.may_hold_snapshots():
            return None
        # Time travel's machinery only where a store holds snapshots (as `start_image`).
        from replay.timetravel import snapshot_matches_log  # noqa: PLC0415

        store = self._snapshots.store
        store.ensure_schema()
        for info in store.snapshots(gt=self.log.log_start_offset - 2, desc=True):
            if snapshot_matches_log(self.log, info):
                return info
        return None

    @property
    def is_active_controller(self) -> bool:
        """Whether this node leads the quorum (broker sessions are kept only there)."""
        return self.node is not None and self.node.leading

    def _append_epoch(self) -> int:
        return 0 if self.node is None else self.node.epoch

    def execute(self, command: Command[T], *, principal: str | None = None) -> T:
        """Embedded writes are not possible on a quorum's node: they go through the leader."""
        result = command(self._working)
        if result.records:
            raise ApiError(
                ErrorCode.NOT_CONTROLLER,
                "this data directory belongs to a controller quorum: write through the quorum "
                "with --bootstrap-server",
            )
        return result.response

    async def submit(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command; a write is answered once the quorum has committed it."""
        node = self.node
        if node is None:
            raise ApiError(ErrorCode.NOT_CONTROLLER, "the quorum is not running yet; retry")
        # Leadership first: a node that does not lead has a committed image that may be
        # behind the leader's, so even a refusal computed on it (UNKNOWN_TOPIC_OR_PARTITION of
        # a topic created meanwhile) could be wrong: it answers NOT_CONTROLLER, never from it.
        if not node.leading:
            await node.wait_leading()
        write = CURRENT_WRITE.get()
        if write is not None:
            # Only the leader knows every accepted write: a retry is checked there.
            found = self._retried(write)
            if found is not None:
                return await self._stored(found, write)  # type: ignore[no-any-return]
            command = noting_write(command, write)
        result = command(self._working)
        if not result.records:
            return result.response
        self._check_encodes(result.records)
        first = self._next_offset
        image = self._accept(result.records)
        appended = await node.propose(result.records, principal=principal, first=first)
        self._commit(image, appended, asyncio.get_running_loop())
        if result.more is not None:
            await self.submit_rest(result.more, principal=principal)
        return result.response

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """Pending partition deletions move on by the leader's checks only."""
        if self.node is None or not self.node.leading:
            return []
        try:
            return await super().purge_due_async(now_ms=now_ms)
        except ApiError as exc:
            if exc.error_code != ErrorCode.NOT_CONTROLLER:
                raise
            return []  # leadership moved during the check; the next leader checks

    async def purge_now(self) -> list[PurgeResult]:
        """A client's check (PurgePending), through `submit` even on a follower.

        There it answers NOT_CONTROLLER naming the leader (when not forwarded to it), so the
        client follows; the scheduler's checks skip followers.
        """
        return await MetadataService.purge_due_async(self)

    def _commit(
        self,
        image: MetadataImage,
        appended: AppendResult,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super()._commit(image, appended, loop)
        self._switch_chain(image)

    def _switch_chain(self, image: MetadataImage) -> None:
        """Keep the log's hash chain once the committed metadata.version switches it on."""
        log = self.log
        # Once kept, always kept: every commit after that asks nothing more (a commit per write).
        if not isinstance(log, ReplicaLog) or log.keeps_chain:
            return
        if finalized_level(image, METADATA_VERSION) >= CHAINED_METADATA_VERSION:
            # A closed or failed log is tried again at the next commit.
            with contextlib.suppress(LogError):
                log.keep_chain()

    def follow(self, image: MetadataImage) -> None:
        """Take `image` (committed blocks applied) as both the committed and the working image."""
        self._committed = image
        self._working = image
        self._next_offset = image.provenance.offset + 1
        self._switch_chain(image)
        if self._snapshots is not None:
            self._snapshots.committed(image, self.log)
        if self._commit_waiters:
            self.release_waiters()

    def accept_quorum_records(self, records: tuple[Record, ...]) -> MetadataImage:
        """Records the quorum appended itself at the next offset (a KIP-853 voters entry).

        The working image takes them, so the next writes go after them; once the quorum
        commits them, `commit_quorum_records` publishes the image this returns.
        """
        return self._accept(records)

    def commit_quorum_records(self, image: MetadataImage, appended: AppendResult) -> None:
        """The quorum committed what `accept_quorum_records` accepted: publish it."""
        self._commit(image, appended, asyncio.get_running_loop())

    def drop_uncommitted(self) -> None:
        """Make the committed image the working one: on taking or losing the leadership.

        A new leader writes after everything committed (its log holds nothing more); a
        former one forgets what it accepted and the quorum did not commit.
        """
        self._working = self._committed
        self._next_offset = self._committed.provenance.offset + 1

    @property
    def started_from_snapshot(self) -> SnapshotInfo | None:
        """The snapshot the first committed image started from (None: the log was replayed)."""
        return None if self._snapshots is None else self._snapshots.started_from

    @property
    def written_snapshot(self) -> SnapshotInfo | None:
        """The newest snapshot the policy wrote of a committed image (offered to other nodes)."""
        return None if self._snapshots is None else self._snapshots.written

    async def bootstrap(self) -> None:
        """Write the first records of a new cluster's log (metadata.version), as the leader."""
        with contextlib.suppress(ApiError):
            await self.submit(bootstrap_features, principal=SERVICE_PRINCIPAL)
