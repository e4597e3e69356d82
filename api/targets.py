"""What a command runs against: the data directory, or a server (`--bootstrap-server`).

`mlog` (`api.cli`) and the Python API (`api.python_api`) both run their calls through these
targets. Both targets answer the same calls with the same result dataclasses
(`replay.controller.commands`), so a command's output does not depend on where it ran.
`LocalTarget` opens the service on the data directory (for writes; reads replay the log
read-only, beside a running writer) and records the caller's principal; `RemoteTarget` sends
each call through the `AdminClient` on a private event loop, and the server records its
connection's principal (the user its client config logs in as, User:ANONYMOUS without one).

Each target imports what it needs when it is used: the service (and the controller) on the
first write, the client (and kio) when a server is named, time travel for diff and history.
A read of the data directory needs only the log and the replay.

The module is one concern past ~600 lines: the two targets answer the same calls, side by
side, so a call added to one is seen missing from the other.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from api.history_dir import ArchiveSource, HistoryDir, log_files
from api.progress import Progress
from api.service.settings import Settings
from api.service.snapshots import existing_store, open_snapshotter, read_image
from api.write_interrupts import writes_finish
from metadata_log.reader import LogReader
from metadata_log.segment import SEGMENT_SUFFIX
from metadata_log.stored_log import StoredLog
from records.errors import MetadataLogError
from replay.controller.errors import ErrorCode, IllegalStateTransitionError

if TYPE_CHECKING:
    import asyncio

    from api.client import AdminClient
    from api.protocol.private import BrokerLivenessItem
    from api.security.client_config import ClientSecurity
    from api.service.service import MetadataService
    from api.service.snapshot_runners import SnapshotRunner
    from records.entry import LogEntry
    from replay.controller.commands import (
        AlterConfig,
        AlterConfigsResult,
        BrokerAction,
        BrokerResult,
        CancelPartitionDeletionResult,
        ConfigResource,
        ControllerResult,
        CreatableTopic,
        CreateNamespace,
        CreateNamespaceResult,
        CreatePartitionsResult,
        CreatePartitionsTopic,
        CreateTopicResult,
        DeleteNamespace,
        DeleteNamespaceResult,
        DeletePartitionsResult,
        DeletePartitionsTopic,
        DeleteTopicResult,
        ElectionType,
        MoveTopic,
        MoveTopicResult,
        PartitionResult,
        PurgeResult,
        Reassignment,
        RegisterBroker,
        TopicPartition,
        TopicRef,
    )
    from replay.controller.controller import Controller
    from replay.image import MetadataImage
    from replay.timetravel import Change, Entity, HistoryEntry
    from replay.timetravel.image_cache import ImageCache


class TargetError(MetadataLogError):
    """A target cannot do what was asked as opened; the message says what to do instead."""


def login_principal() -> str:
    """User:<login>: the principal a local write records when none is given."""
    import getpass  # noqa: PLC0415

    return f"User:{getpass.getuser()}"


T = TypeVar("T")


IMAGES_KEPT = 8
PARTITIONS_KEPT = 2_000_000
"""A data directory's handle keeps at most these many images of past points, of at most these
many partitions in all (counted as if they shared nothing: about 450 MiB at most)."""

QUORUM_STATE = "quorum-state"
"""The file that makes a data directory a quorum node's (api.raft.quorum_state_file)."""


def open_service(settings: Settings, *, runner: SnapshotRunner | None = None) -> MetadataService:
    """The service over the settings' data directory: newest snapshot plus the log after it."""
    from api.service.service import MetadataService  # noqa: PLC0415

    if (settings.data_dir / QUORUM_STATE).exists():
        raise TargetError(
            f"{settings.data_dir} belongs to a node of a controller quorum: changes go through "
            "the quorum's leader (--bootstrap-server HOST:PORT of any node)"
        )
    progress = Progress("replaying the log")
    try:
        return MetadataService.open(
            settings.log_dir,
            config=settings.log,
            progress=progress.advance,
            snapshots=open_snapshotter(settings, runner=runner),
        )
    finally:
        progress.finish()


def open_reader(settings: Settings) -> StoredLog:
    """The log of the data directory, opened read-only (no lock, no recovery writes)."""
    return LogReader.open(settings.log_dir, config=settings.log)


def purge_text(result: PurgeResult) -> str:
    """One line saying what a pending-deletion check did to a topic."""
    from replay.controller.commands import PurgeStep  # noqa: PLC0415

    done = "removed" if result.step == PurgeStep.REMOVED else "set to mode NONE"
    partitions = ",".join(str(p) for p in result.partitions)
    return f"pending partition deletion of {result.name}: partition(s) {partitions} {done}"


FOLLOW_POLL_SECONDS = 0.5
"""How often a following reader of the data directory looks for new entries."""

FOLLOW_WAIT_MS = 10_000
"""How long a following FetchLog waits on the server for new entries before asking again."""

FETCH_PAGE = 10_000
"""The most entries asked for per FetchLog."""

FIRST_FETCH_PAGE = 256
"""Entries asked for by a read's first FetchLog; each next one asks four times as many, up to
`FETCH_PAGE`. A reader that stops early (a console page: ~50 rows) makes the server read and
send a few hundred entries, not ten thousand; a long read pays three more round trips."""


class LocalTarget:
    """The data directory: the service is opened on the first write, reads are read-only."""

    def __init__(
        self,
        settings: Settings,
        principal: str | None = None,
        *,
        check_pending: bool = True,
        archive: ArchiveSource | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._principal = principal
        self._check_pending = check_pending
        self._service: MetadataService | None = None
        self._seen_files: list[tuple[str, int, int, int]] | None = None
        self._seen_last: int | None = None
        """What `wait_past` last saw: the segment files and the log's last offset then."""
        self.history_dir = HistoryDir(settings, archive, note=note)
        """Where its reads of the history go: the log, or the log over `archive` (`note`: why
        the archive could not be joined to the log, one line)."""
        self._images: ImageCache | None = None

    @property
    def images(self) -> ImageCache:
        """Images of past points kept between calls (made on first use).

        A next point after one replays only the gap: a console paging forward, a shell
        stepping. A command that never travels in time imports nothing of it.
        """
        if self._images is None:
            from replay.timetravel.image_cache import ImageCache  # noqa: PLC0415

            self._images = ImageCache(max_images=IMAGES_KEPT, max_partitions=PARTITIONS_KEPT)
        return self._images

    @property
    def principal(self) -> str:
        """Who the writes record: the one given, else User:<login> (looked up on first use)."""
        if self._principal is None:
            self._principal = login_principal()
        return self._principal

    def service(self) -> MetadataService:
        """The open service (opened now, after one check of due pending deletions)."""
        if self._service is None:
            service = open_service(self.settings)
            self._service = service
            if self._check_pending:
                # No scheduler runs in embedded mode: each writer moves due deletions on
                # first. A check that fails is reported and does not block the command.
                try:
                    for result in service.purge_due():
                        print(f"mlog: {purge_text(result)}", file=sys.stderr)
                except IllegalStateTransitionError as exc:
                    print(
                        f"mlog: warning: pending partition deletions not checked: {exc}",
                        file=sys.stderr,
                    )
        return self._service

    def _run(self, command: Callable[[Controller, MetadataImage], ControllerResult[T]]) -> T:
        """Run a controller command and append its records; a refusal writes nothing.

        On a new data directory (no segment yet) the command first runs against the image a
        new log starts with: if it writes nothing (refused, or validate-only), it is answered
        from there and nothing is created, not the directory, the log or its first record.
        """
        if self._service is None and not log_files(self.settings.log_dir, SEGMENT_SUFFIX):
            from api.service.service import first_image  # noqa: PLC0415
            from replay.controller.controller import Controller  # noqa: PLC0415

            result = command(Controller(), first_image())
            if not result.records:
                return result.response
        service = self.service()
        principal = self.principal
        # Ctrl-C waits for the append (and the image's commit) to end: all of it or nothing.
        with writes_finish():
            return service.execute(
                lambda image: command(service.controller, image), principal=principal
            )

    def run(self, command: Callable[[Controller, MetadataImage], ControllerResult[T]]) -> T:
        """Run a controller command as `_run` does (for nouns whose calls are in their module)."""
        return self._run(command)

    def image(self, *, at_offset: int | None = None, at_time: str | None = None) -> MetadataImage:
        """The committed image of the open service, else a read-only replay (time travel)."""
        if at_offset is None and at_time is None and self._service is not None:
            return self._service.image
        progress = Progress("replaying the log")
        try:
            if self.history_dir.archive is None:
                # Through the history directory: its reader is kept between calls.
                with self.history_dir.reader() as log:
                    return read_image(
                        self.settings,
                        at_offset=at_offset,
                        at_time=at_time,
                        progress=progress.advance,
                        cache=self.images,
                        log=log,
                    )
            if at_offset is None and at_time is None:
                return read_image(self.settings, progress=progress.advance, cache=self.images)
            return self._archived_image(at_offset, at_time, progress)
        finally:
            progress.finish()

    def _archived_image(
        self, at_offset: int | None, at_time: str | None, progress: Progress
    ) -> MetadataImage:
        """`read_image` over the history directory (the archive below the local log)."""
        from replay.timetravel import image_at  # noqa: PLC0415

        with self.history_dir.reader() as log:
            store = existing_store(self.settings)
            try:
                return image_at(
                    log,
                    store,
                    at_offset=at_offset,
                    at_time=at_time,
                    progress=progress.advance,
                    cache=self.images,
                )
            finally:
                if store is not None:
                    store.close()

    def register_broker(self, request: RegisterBroker) -> BrokerResult:
        """Register a broker."""
        return self._run(lambda ctl, image: ctl.register_broker(image, request))

    def change_broker(self, broker_id: int, action: BrokerAction) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker."""
        return self._run(lambda ctl, image: ctl.change_broker(image, broker_id, action))

    @staticmethod
    def broker_liveness() -> dict[int, BrokerLivenessItem]:
        """No sessions: only a running server's active controller keeps them."""
        return {}

    def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool
    ) -> list[CreateTopicResult]:
        """Create topics."""
        return self._run(
            lambda ctl, image: ctl.create_topics(image, list(topics), validate_only=validate_only)
        )

    def delete_topics(self, refs: Sequence[TopicRef]) -> list[DeleteTopicResult]:
        """Delete topics."""
        return self._run(lambda ctl, image: ctl.delete_topics(image, list(refs)))

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool
    ) -> list[CreatePartitionsResult]:
        """Raise partition counts."""
        return self._run(
            lambda ctl, image: ctl.create_partitions(
                image, list(topics), validate_only=validate_only
            )
        )

    def delete_partitions(
        self, topics: Sequence[DeletePartitionsTopic], *, validate_only: bool
    ) -> list[DeletePartitionsResult]:
        """Lower partition counts."""
        return self._run(
            lambda ctl, image: ctl.delete_partitions(
                image, list(topics), validate_only=validate_only
            )
        )

    def move_topic(self, request: MoveTopic) -> MoveTopicResult:
        """Move a topic to another namespace."""
        return self._run(lambda ctl, image: ctl.move_topic(image, request))

    def purge_pending(self) -> list[PurgeResult]:
        """One check of pending partition deletions."""
        return self.service().purge_due()

    def cancel_partition_deletions(
        self, topics: Sequence[TopicRef]
    ) -> list[CancelPartitionDeletionResult]:
        """Cancel pending partition deletions (before their purge time)."""
        from replay.controller.commands import CancelPartitionDeletion  # noqa: PLC0415

        requests = [CancelPartitionDeletion(topic=t) for t in topics]
        return self._run(lambda ctl, image: ctl.cancel_partition_deletions(image, requests))

    def alter_configs(
        self, resource: ConfigResource, ops: Sequence[AlterConfig], *, validate_only: bool
    ) -> AlterConfigsResult:
        """Incrementally alter one resource's configs."""
        (result,) = self._run(
            lambda ctl, image: ctl.incremental_alter_configs(
                image, [(resource, list(ops))], validate_only=validate_only
            )
        )
        return result

    def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None, election: ElectionType
    ) -> list[PartitionResult]:
        """Leader election."""
        wanted = None if partitions is None else list(partitions)
        return self._run(lambda ctl, image: ctl.elect_leaders(image, wanted, election))

    def reassign(self, requests: Sequence[Reassignment]) -> list[PartitionResult]:
        """Start or cancel reassignments."""
        return self._run(lambda ctl, image: ctl.alter_reassignments(image, list(requests)))

    def create_namespace(self, request: CreateNamespace) -> CreateNamespaceResult:
        """Create a namespace."""
        return self._run(lambda ctl, image: ctl.create_namespace(image, request))

    def delete_namespace(self, request: DeleteNamespace) -> DeleteNamespaceResult:
        """Delete a namespace."""
        return self._run(lambda ctl, image: ctl.delete_namespace(image, request))

    def diff(self, from_point: str, to_point: str | None) -> tuple[int, int, list[Change]]:
        """What changed between two points."""
        from replay.timetravel import diff_points  # noqa: PLC0415

        with self.history_dir.reader() as log:
            store = existing_store(self.settings)
            try:
                return diff_points(log, store, from_point, to_point, cache=self.images)
            finally:
                if store is not None:
                    store.close()

    def history(
        self, entity: Entity, *, gt: int | None, lte: int | None, limit: int | None
    ) -> list[HistoryEntry]:
        """Entries that touched an entity."""
        from replay.timetravel import history_range, start_image  # noqa: PLC0415

        with self.history_dir.reader() as log:
            start = None
            if log.log_start_offset > 0:
                # A trimmed log: the names it starts with come from its snapshot.
                store = existing_store(self.settings)
                try:
                    start = start_image(log, store)
                finally:
                    if store is not None:
                        store.close()
            return history_range(log, entity, gt=gt, lte=lte, limit=limit, start=start)

    def entries(
        self, *, gt: int | None, lte: int | None, limit: int | None, follow: bool = False
    ) -> Iterator[LogEntry]:
        """Entries with `gt < offset <= lte`, at most `limit`; with `follow`, then each new one.

        A follower looks at the segment files every `FOLLOW_POLL_SECONDS` and reopens the log
        read-only when they changed (a writer may be appending meanwhile; a reader sees its
        complete writes only). Opening verifies the active segment whole, so a follower of a
        busy log spends CPU on it: through a server, FetchLog reads only the new blocks.
        """
        settings = self.settings
        remaining, after = limit, gt
        while True:
            seen = log_files(settings.log_dir, SEGMENT_SUFFIX)
            with self.history_dir.reader() as log:
                for entry in log.read(gt=after, lte=lte, limit=remaining):
                    yield entry
                    after = entry.offset
                    if remaining is not None:
                        remaining -= 1
            done = remaining == 0 or (lte is not None and after is not None and after >= lte)
            if done or not follow:
                return
            while log_files(settings.log_dir, SEGMENT_SUFFIX) == seen:
                time.sleep(FOLLOW_POLL_SECONDS)
            self.history_dir.refresh()  # a view links the local segments it was made with

    def wait_past(self, gt: int, wait_ms: int) -> int:
        """The log's last offset, once past `gt` or after `wait_ms` (-1: an empty log).

        Looks at the segment files every `FOLLOW_POLL_SECONDS` (as `entries(follow=True)`)
        and reads the log's end only when they changed since the last look.
        """
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            seen = log_files(self.settings.log_dir, SEGMENT_SUFFIX)
            if seen != self._seen_files or self._seen_last is None:
                self.history_dir.refresh()
                with self.history_dir.reader() as log:
                    self._seen_files, self._seen_last = seen, log.end_offset - 1
            if self._seen_last > gt or time.monotonic() >= deadline:
                return self._seen_last
            while log_files(self.settings.log_dir, SEGMENT_SUFFIX) == seen:
                if time.monotonic() >= deadline:
                    return self._seen_last
                time.sleep(FOLLOW_POLL_SECONDS)

    def close(self) -> None:
        """Close the service if it was opened, and the history's view if one was made."""
        self.history_dir.close()
        if self._service is not None:
            self._service.close()
            self._service = None


class RemoteTarget:
    """A server, through the `AdminClient` (one connection, a private event loop)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_ms: int = 30_000,
        security: ClientSecurity | None = None,
        reads_only: bool = False,
    ) -> None:
        """Connected to a server of `bootstrap` (with `reads_only`: not the leader if listed)."""
        import asyncio  # noqa: PLC0415

        from api.client.bootstrap import connect_bootstrap  # noqa: PLC0415

        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_quiet_about_interrupts)
        self.client: AdminClient
        try:
            # `bootstrap` may list several servers (h1:p,h2:p): the first that answers serves.
            self.client = self._wait(
                lambda: connect_bootstrap(
                    bootstrap,
                    client_id="mlog-cli",
                    timeout_ms=timeout_ms,
                    security=security,
                    reads_only=reads_only,
                )
            )
        except BaseException:
            _close_loop(self._loop)
            raise

    def _wait(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        task = self._loop.create_task(call())
        try:
            return self._loop.run_until_complete(task)
        except BaseException:
            # An interrupt (Ctrl-C) ends the task with it: take it from the task, so asyncio
            # does not report it again as never retrieved; mlog reports it, in one line.
            if task.done() and not task.cancelled():
                task.exception()
            raise

    def wait(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run one client call to its end (for nouns whose calls are in their own module)."""
        return self._wait(call)

    def write(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run one client call that changes something: its answer is the command's outcome.

        A Ctrl-C before the answer ends the wait (KeyboardInterrupt: what the server did is
        not known); an answer in hand when the wait ends stands, even if a Ctrl-C came with
        it (`writes_finish`): the call is never cancelled between its answer and its return.
        """
        import asyncio  # noqa: PLC0415

        task = self._loop.create_task(call())
        interrupted: asyncio.Future[None] = self._loop.create_future()

        def interrupt() -> None:
            if not interrupted.done():
                interrupted.set_result(None)

        with writes_finish(lambda: self._loop.call_soon_threadsafe(interrupt)):
            waited: set[asyncio.Future[Any]] = {task, interrupted}
            either = asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            self._loop.run_until_complete(either)
            if not task.done():
                raise KeyboardInterrupt  # the task is cancelled as the loop closes
            return task.result()

    def image(self, *, at_offset: int | None = None, at_time: str | None = None) -> MetadataImage:
        """ImageAt."""
        return self._wait(lambda: self.client.image_at(at_offset=at_offset, at_time=at_time))

    def register_broker(self, request: RegisterBroker) -> BrokerResult:
        """RegisterBroker."""
        return self.write(lambda: self.client.register_broker(request))

    def change_broker(self, broker_id: int, action: BrokerAction) -> BrokerResult:
        """ChangeBroker."""
        return self.write(lambda: self.client.change_broker(broker_id, action))

    def broker_liveness(self) -> dict[int, BrokerLivenessItem]:
        """The brokers' sessions on the server, by broker id."""
        found = self._wait(self.client.broker_liveness)
        return {item.broker_id: item for item in found.brokers}

    def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool
    ) -> list[CreateTopicResult]:
        """CreateTopics."""
        return self.write(lambda: self.client.create_topics(topics, validate_only=validate_only))

    def delete_topics(self, refs: Sequence[TopicRef]) -> list[DeleteTopicResult]:
        """DeleteTopics."""
        return self.write(lambda: self.client.delete_topics(refs))

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool
    ) -> list[CreatePartitionsResult]:
        """CreatePartitions."""
        return self.write(
            lambda: self.client.create_partitions(topics, validate_only=validate_only)
        )

    def delete_partitions(
        self, topics: Sequence[DeletePartitionsTopic], *, validate_only: bool
    ) -> list[DeletePartitionsResult]:
        """DeletePartitions."""
        return self.write(
            lambda: self.client.delete_partitions(topics, validate_only=validate_only)
        )

    def move_topic(self, request: MoveTopic) -> MoveTopicResult:
        """MoveTopic."""
        return self.write(lambda: self.client.move_topic(request))

    def purge_pending(self) -> list[PurgeResult]:
        """PurgePending."""
        return self.write(self.client.purge_pending)

    def cancel_partition_deletions(
        self, topics: Sequence[TopicRef]
    ) -> list[CancelPartitionDeletionResult]:
        """CancelPartitionDeletions."""
        return self.write(lambda: self.client.cancel_partition_deletions(topics))

    def alter_configs(
        self, resource: ConfigResource, ops: Sequence[AlterConfig], *, validate_only: bool
    ) -> AlterConfigsResult:
        """IncrementalAlterConfigs."""
        (result,) = self.write(
            lambda: self.client.incremental_alter_configs(
                [(resource, ops)], validate_only=validate_only
            )
        )
        return result

    def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None, election: ElectionType
    ) -> list[PartitionResult]:
        """ElectLeaders."""
        return self.write(lambda: self.client.elect_leaders(partitions, election))

    def reassign(self, requests: Sequence[Reassignment]) -> list[PartitionResult]:
        """AlterPartitionReassignments."""
        return self.write(lambda: self.client.alter_partition_reassignments(requests))

    def create_namespace(self, request: CreateNamespace) -> CreateNamespaceResult:
        """CreateNamespace."""
        return self.write(lambda: self.client.create_namespace(request.name))

    def delete_namespace(self, request: DeleteNamespace) -> DeleteNamespaceResult:
        """DeleteNamespace."""
        return self.write(
            lambda: self.client.delete_namespace(request.name, recursive=request.recursive)
        )

    def diff(self, from_point: str, to_point: str | None) -> tuple[int, int, list[Change]]:
        """Diff."""
        return self._wait(lambda: self.client.diff(from_point, to_point))

    def history(
        self, entity: Entity, *, gt: int | None, lte: int | None, limit: int | None
    ) -> list[HistoryEntry]:
        """History."""
        return self._wait(lambda: self.client.history(entity, gt=gt, lte=lte, limit=limit))

    def _fetch(self, offset: int, count: int, wait_ms: int) -> tuple[list[LogEntry], int]:
        return self._wait(
            lambda: self.client.fetch_log(offset, max_entries=count, max_wait_ms=wait_ms)
        )

    def entries(
        self, *, gt: int | None, lte: int | None, limit: int | None, follow: bool = False
    ) -> Iterator[LogEntry]:
        """FetchLog, a page at a time: the same entries as `LocalTarget.entries`.

        Pages grow from `FIRST_FETCH_PAGE` to `FETCH_PAGE` (a reader may stop early). Without
        `follow` it stops at the end the log had at the first call; with it, each FetchLog
        long-polls up to `FOLLOW_WAIT_MS` for new entries.
        """
        from api.client import RemoteError  # noqa: PLC0415

        offset = 0 if gt is None else gt + 1
        remaining, last = limit, lte
        page = FIRST_FETCH_PAGE
        while remaining != 0 and (last is None or offset <= last):
            count = page if remaining is None else min(page, remaining)
            page = min(FETCH_PAGE, page * 4)
            if last is not None:
                count = min(count, last - offset + 1)
            try:
                entries, end = self._fetch(offset, count, FOLLOW_WAIT_MS if follow else 0)
            except RemoteError as exc:
                if exc.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                if not follow:
                    return  # starts past the log's end: nothing, as on the data directory
                self._wait_for_end(offset)
                continue
            if not follow:
                last = end - 1 if last is None else min(last, end - 1)
                if not entries:
                    return
            for entry in entries:
                yield entry
                if remaining is not None:
                    remaining -= 1
            if entries:
                offset = entries[-1].offset + 1

    def wait_past(self, gt: int, wait_ms: int) -> int:
        """The committed log's last offset, once past `gt` or after `wait_ms`.

        FetchLog's long poll, as `entries(follow=True)`; a `gt` past the node's end (a new
        leader not caught up yet) answers the node's end at once.
        """
        from api.client import RemoteError  # noqa: PLC0415

        try:
            _, end = self._fetch(max(gt + 1, 0), 1, wait_ms)
        except RemoteError as exc:
            if exc.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            # Past this node's committed end (a new leader not yet caught up): ask its end.
            _, end = self._fetch(0, 1, 0)
        return end - 1

    def reconnect(self) -> None:
        """Connect again after the server was lost: the leader, else another known node."""
        self._wait(self.client.reconnect)

    def _wait_for_end(self, offset: int) -> None:
        """Long-poll until the log's end reaches `offset` (a follower that starts past it)."""
        _, end = self._fetch(0, 1, 0)
        while end < offset:
            _, end = self._fetch(end, 1, FOLLOW_WAIT_MS)

    def close(self) -> None:
        """Close the connection and the loop."""
        _close_loop(self._loop, self.client)


def _quiet_about_interrupts(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's error report, but none for a task that an interrupt (Ctrl-C) ended.

    A Ctrl-C lands in whichever task runs at that moment, often one the client made inside a
    call (a task the client started); mlog reports the interrupt in one line, and that task's
    "exception was never retrieved" would print its traceback again when it is collected.
    """
    from asyncio import Task  # noqa: PLC0415

    from api.client.connection import ConnectionLost  # noqa: PLC0415

    exception = context.get("exception")
    if isinstance(exception, KeyboardInterrupt):
        return
    if isinstance(exception, ConnectionLost) and not isinstance(context.get("future"), Task):
        # The answer to a request that an interrupt stopped waiting for, failed as mlog
        # closed the connection on the way out: nothing waits for it (a task's failure is
        # still reported).
        return
    loop.default_exception_handler(context)


def _close_loop(loop: asyncio.AbstractEventLoop, client: AdminClient | None = None) -> None:
    """Cancel what still runs on `loop`, close `client`'s connection, then the loop."""
    import asyncio  # noqa: PLC0415

    try:
        # After an interrupt (Ctrl-C while following or connecting) a call is still pending:
        # cancel it and collect its outcome, so nothing is reported as never retrieved.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        if client is not None:
            with contextlib.suppress(Exception):  # the connection may be half-closed by now
                loop.run_until_complete(client.close())
        # The login's key derivation ran on the loop's thread pool: end its thread too.
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


Target = LocalTarget | RemoteTarget
"""What a CLI command or a `Metadata` handle runs against."""
