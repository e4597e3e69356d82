"""`Metadata`: the public Python API, one import away (`from api import Metadata`).

The four uses of the CLI from Python, with its conventions: `Metadata.open(data_dir)` takes
the data directory as `mlog --data-dir` does (the log is `<data_dir>/log`, the snapshots
`<data_dir>/snapshots.db` unless `database_url` names another), and `Metadata.connect(
"h1:9092,h2:9092")` a server as `--bootstrap-server` does. Both answer the same calls with
the same values the CLI prints from, because both go through the two targets the CLI uses
(`api.targets`): a controller command is written only if the controller accepts it, a
refusal raises `ApiError` with Kafka's error code and writes nothing.

    with Metadata.open("mlog-data") as md:
        md.register_broker(1)
        md.create_topic("orders", partitions=3)
        image = md.image(at_offset=2)          # time travel: whole batches only
        start, end, changes = md.diff(0)

`Metadata.open(data_dir, archive_url=URL)` reads the history below the local log start from
the archive, as `--archive-url` does (api/history_dir.py).

What needs the data directory's files (appending raw records, snapshots, audits) raises
`MetadataApiError` on a connected handle, as the CLI refuses `--bootstrap-server` there.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from api.service.settings import Settings, load_settings
from api.targets import LocalTarget, RemoteTarget, Target
from records.errors import MetadataLogError
from records.model import ConfigResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    AlterConfigsResult,
    BrokerResult,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    Outcome,
    RegisterBroker,
    TopicRef,
)
from replay.controller.errors import ApiError
from replay.timetravel import Change, Entity, HistoryEntry

if TYPE_CHECKING:
    from api.history_checks import VerifyOutcome
    from api.protocol.private import BrokerLivenessItem
    from api.protocol.quorum.messages import DescribeQuorumResponse
    from metadata_log.digest import LogDigest
    from records.entry import LogEntry
    from records.model import Record
    from replay.image import MetadataImage
    from replay.sql.store import SnapshotInfo


logger = logging.getLogger(__name__)


class MetadataApiError(MetadataLogError):
    """A call the handle cannot make as opened (a data-directory call on a connected one)."""


def _checked(outcome: Outcome) -> None:
    """Raise the controller's refusal (Kafka's error code and message) as `ApiError`."""
    if not outcome.ok:
        raise ApiError(outcome.error_code, outcome.error_message or outcome.error_code.name)


def _archive_note(text: str) -> None:
    """Why the archive could not be joined to the local log yet: a warning, once per view."""
    logger.warning("%s", text)


class Metadata:
    """A data directory or a server, with the CLI's calls as typed methods (module docstring)."""

    def __init__(self, target: Target, settings: Settings) -> None:
        self._target = target
        self.settings = settings
        """The settings the handle runs with (as the CLI loads them: arguments, MLOG_*)."""

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        principal: str | None = None,
        database_url: str | None = None,
        archive_url: str | None = None,
        archive_cache: str | os.PathLike[str] | None = None,
    ) -> Self:
        """The data directory `data_dir` (the log in `<data_dir>/log`), as `--data-dir` does.

        Writes record `principal` (default `User:<login>`). Nothing is opened until the first
        call; a write creates the directory, a refused one does not. With `archive_url` (as
        `--archive-url`), `read`, `history`, `image(at_offset=...)` and `diff` read the
        archive below the local log start (its objects cached in `archive_cache`, default
        `<data_dir>/archive-cache`): a bad URL raises `ArchiveError` here, a changed or
        missing archived object `ArchiveDamage` when read.
        """
        from api.history_dir import ArchiveSource, default_cache_dir

        settings = load_settings(data_dir=os.fspath(data_dir), database_url=database_url)
        settings = dataclasses.replace(settings, bootstrap_server=None)
        archive = None
        if archive_url is not None:
            cache = default_cache_dir(settings) if archive_cache is None else Path(archive_cache)
            archive = ArchiveSource.open(archive_url, cache)
        elif archive_cache is not None:
            raise MetadataApiError("archive_cache is where an archive is cached: give archive_url")
        target = LocalTarget(settings, principal, archive=archive, note=_archive_note)
        return cls(target, settings)

    @classmethod
    def connect(cls, bootstrap_server: str, *, command_config: str | None = None) -> Self:
        """The `mlog serve` of `bootstrap_server` (`h1:p,h2:p`: the first that answers).

        `command_config` is a client properties file (TLS, SASL) as `--command-config` takes.
        The server records the principal its connection logs in as.
        """
        security = None
        if command_config is not None:
            from api.security.client_config import load_client_security

            security = load_client_security(command_config)
        settings = load_settings(bootstrap_server=bootstrap_server)
        return cls(RemoteTarget(bootstrap_server, security=security), settings)

    def close(self) -> None:
        """Close the service or the connection; the handle is not used after."""
        self._target.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def remote(self) -> bool:
        """Whether this handle talks to a server (else to a data directory)."""
        return isinstance(self._target, RemoteTarget)

    def _local(self, what: str) -> LocalTarget:
        if not isinstance(self._target, LocalTarget):
            raise MetadataApiError(
                f"{what} works on a data directory only (its files): use Metadata.open(DIR)"
            )
        return self._target

    # ------------------------------------------------------------------ controller commands

    def register_broker(self, broker_id: int, *, rack: str | None = None) -> BrokerResult:
        """Register a broker (a new incarnation), as `mlog brokers register` does."""
        result = self._target.register_broker(RegisterBroker(broker_id=broker_id, rack=rack))
        _checked(result.outcome)
        return result

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> CreateTopicResult:
        """Create a topic (`ns:name` in a namespace); -1 takes the cluster's default."""
        topic = CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            configs=tuple((configs or {}).items()),
        )
        (result,) = self._target.create_topics([topic], validate_only=validate_only)
        _checked(result.outcome)
        return result

    def delete_topic(self, name: str) -> DeleteTopicResult:
        """Delete a topic by its qualified name."""
        (result,) = self._target.delete_topics([TopicRef(name=name)])
        _checked(result.outcome)
        return result

    def add_partitions(self, name: str, *, partitions: int) -> CreatePartitionsResult:
        """Raise a topic's partition count to `partitions`."""
        request = CreatePartitionsTopic(topic=TopicRef(name=name), count=partitions)
        (result,) = self._target.create_partitions([request], validate_only=False)
        _checked(result.outcome)
        return result

    def alter_configs(
        self,
        resource_type: ConfigResourceType,
        name: str,
        *,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> AlterConfigsResult:
        """Incrementally alter one resource's configs (a topic, a broker, the cluster "")."""
        ops = [
            AlterConfig(name=k, op=AlterConfigOp.SET, value=v) for k, v in (set or {}).items()
        ] + [AlterConfig(name=k, op=AlterConfigOp.DELETE) for k in delete]
        resource = ConfigResource(type=resource_type, name=name)
        result = self._target.alter_configs(resource, ops, validate_only=validate_only)
        _checked(result.outcome)
        return result

    def create_namespace(self, name: str) -> CreateNamespaceResult:
        """Create a namespace (and its missing parents)."""
        return self._target.create_namespace(CreateNamespace(name=name))

    # ------------------------------------------------------------------ the log

    def append(self, records: Sequence[Record], *, principal: str | None = None) -> tuple[int, int]:
        """Append records as one atomic block if they replay onto the log (`mlog log append`).

        Replay's rules are checked (not the controller's: no placement, no defaults); a
        refusal raises with the offending record and appends nothing. (first, last) offset.
        """
        from api.targets import QUORUM_STATE
        from metadata_log.log import MetadataLog
        from replay.append import append_replayed_batches

        target = self._local("append")
        if (self.settings.data_dir / QUORUM_STATE).exists():
            raise MetadataApiError("a quorum node's log takes writes through its leader only")
        target.close()  # the service (if open) holds the writer lock
        with MetadataLog.open(self.settings.log_dir, config=self.settings.log) as log:
            return append_replayed_batches(log, [(records, principal or target.principal)])

    def read(
        self, *, gt: int | None = None, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """The log's entries with `gt < offset <= lte`, at most `limit`, oldest first."""
        return self._target.entries(gt=gt, lte=lte, limit=limit)

    def wait_past(self, gt: int, *, wait_ms: int) -> int:
        """The log's last committed offset, once past `gt` or after `wait_ms` (-1: empty).

        Through a server, FetchLog's long poll (what `mlog log dump --follow` waits on); on a
        data directory, a look at its segment files every half second.
        """
        return self._target.wait_past(gt, wait_ms)

    def reconnect(self) -> None:
        """Connect again after the server was lost (killed): the leader, or another node.

        The client tries the nodes it knows (the bootstrap list, the voters it learned);
        none answering leaves the handle closed, and the next call raises. Nothing to do on
        a data directory.
        """
        if isinstance(self._target, RemoteTarget):
            self._target.reconnect()

    # ------------------------------------------------------------------ the quorum, integrity

    def describe_quorum(self) -> DescribeQuorumResponse:
        """DescribeQuorum, as `mlog quorum describe` asks it: leader, epoch, voters, observers.

        Through a server only (a data directory is no running quorum): `MetadataApiError`.
        """
        if not isinstance(self._target, RemoteTarget):
            raise MetadataApiError("describe_quorum asks a running quorum: use Metadata.connect")
        target = self._target
        return target.wait(target.client.describe_quorum)

    def broker_liveness(self) -> dict[int, BrokerLivenessItem]:
        """The brokers' sessions on the server's active controller (none on a data directory)."""
        return self._target.broker_liveness()

    def digest(self, at_offset: int | None = None) -> LogDigest:
        """The hash chain's digest (`mlog log digest`): at a block's last offset, default the end.

        On a data directory a v2 token (with the Merkle root when the log has its index); on
        a server a v1 token (DescribeLogDigest: the chain value, default the committed
        offset). `DigestError` says why none can be taken.
        """
        from metadata_log.digest import DigestError, LogDigest
        from metadata_log.merkle import MerkleError, root_at

        if isinstance(self._target, RemoteTarget):
            target = self._target
            offset = -1 if at_offset is None else at_offset
            answer = target.wait(lambda: target.client.log_digest(offset))
            if answer.offset < 0:
                raise DigestError("the node has committed nothing yet, or keeps no hash chain")
            return LogDigest(offset=answer.offset, chain=answer.chain)
        with self._target.history_dir.reader() as log:
            taken = log.digest(at_offset)
            try:
                root: bytes | None = root_at(log.directory, log.storage.segments, taken.end_offset)
            except MerkleError:
                root = None  # a log without the Merkle index: a v1 digest (the chain only)
        return LogDigest(offset=taken.offset, chain=taken.chain, root=root)

    def verify(self, digest: LogDigest | None = None) -> VerifyOutcome:
        """`mlog log verify [--digest TOKEN]`: every block, link and checkpoint of the log.

        A data directory's only (it checks the files): `MetadataApiError` on a server.
        """
        from api.history_checks import check_history

        target = self._local("verify")
        return check_history(target.history_dir, digest)

    # ------------------------------------------------------------------ time travel

    def image(self, *, at_offset: int | None = None, at_time: str | None = None) -> MetadataImage:
        """The image now, or at an offset or time (ISO-8601 or epoch ms).

        Only committed states: an offset inside an atomic batch answers the batch's end
        (`image.provenance.offset` says which); a time before the first entry raises.
        """
        return self._target.image(at_offset=at_offset, at_time=at_time)

    def diff(
        self, from_point: int | str, to_point: int | str | None = None
    ) -> tuple[int, int, list[Change]]:
        """What changed between two points (offsets or ISO-8601 times): (from, to, changes)."""
        to = None if to_point is None else str(to_point)
        return self._target.diff(str(from_point), to)

    def history(
        self,
        entity: Entity,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
    ) -> list[HistoryEntry]:
        """The entries that touched an entity (`Entity(topic="orders")`), oldest first."""
        return self._target.history(entity, gt=gt, lte=lte, limit=limit)

    # ------------------------------------------------------------------ snapshots

    def take_snapshot(self) -> SnapshotInfo:
        """Write a snapshot of the image at the end of the log into the snapshot database."""
        from api.service.snapshots import open_store
        from api.targets import open_reader
        from replay.loader import load_image

        self._local("take_snapshot")
        with open_reader(self.settings) as log, open_store(self.settings) as store:
            store.ensure_schema()
            info = store.write(load_image(log))
            store.retain(
                self.settings.snapshot_retention,
                max_bytes=self.settings.snapshot_retention_bytes,
            )
            return info

    def snapshots(self) -> list[SnapshotInfo]:
        """The snapshots in the database, oldest first (none if there is no database)."""
        from api.service.snapshots import existing_store

        self._local("snapshots")
        store = existing_store(self.settings)
        if store is None or store.missing():
            return []
        try:
            return list(store.snapshots())
        finally:
            store.close()

    # ------------------------------------------------------------------ audit

    def audit_sql(self, statement: str, *, master: str | None = None) -> list[dict[str, Any]]:
        """Run Spark SQL over the view `metadata_log` (PySpark imported now); the rows.

        Uses the process's running SparkSession if there is one (left running), else starts
        a local one (`master`, default `local[*]`) for the call and stops it after.
        """
        self._local("audit_sql")
        from pyspark.sql import SparkSession

        from replay.audit.queries import sql
        from replay.audit.session import audit_session, read_log, register

        running = SparkSession.getActiveSession()
        if running is not None:
            register(running)  # the caller's session may not know the source yet
        spark = running or audit_session(master=master, jvm_log=None)
        try:
            frame = sql(spark, read_log(spark, Path(self.settings.log_dir)), statement)
            return [row.asDict(recursive=True) for row in frame.collect()]
        finally:
            if running is None:
                spark.stop()
