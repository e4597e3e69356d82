"""`mlog serve`'s metrics in Prometheus form: KRaft's controller and raft metrics under `mlog_`.

One `CollectorRegistry` per server (several servers in one process never clash). The request
path pays plain integer increments per request (`RequestMetrics`); everything read
from the image, the quorum, the log and the snapshots is computed when scraped
(`ServerCollector`), the image's counts once per committed image. Names and meanings:
docs/operating.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from api.protocol import private
from api.protocol.codec import API_NAMES, Answer, ProtocolError, decode_response, peek_header
from api.server.health import health
from metadata_log.timings import LatencyCounts
from records.model import NO_LEADER, Mode
from replay.controller.errors import ErrorCode
from replay.image import MetadataImage

if TYPE_CHECKING:
    from api.raft.node import QuorumNode
    from api.service.archiving import LogArchiving
    from api.service.service import MetadataService

_ERROR_NAMES = {int(code): code.name for code in ErrorCode}

Labels = tuple[str, str]
"""A request's `api` and `error` labels."""


def answer_error(body: Any) -> str:
    """The error an answer carries: its top-level code, else its first item's; NONE if none.

    Items are the answer's lists of objects (topics, results, ...): a CreateTopics refused
    for one topic of many counts as that error, once.
    """
    if type(body) is not Answer:
        return "NONE"
    values = body.values
    code = values.get("error_code") or 0
    if not code:
        for value in values.values():
            if type(value) is list and value and type(value[0]) is dict:
                for item in value:
                    code = item.get("error_code") or 0
                    if code:
                        break
                if code:
                    break
    if not code:
        return "NONE"
    return _ERROR_NAMES.get(code, str(code))


FORWARDED_UNKNOWN = "Envelope"
"""The `api` label of a forwarded request whose inner API cannot be read (a malformed one)."""


def _entity_error(body: Any) -> int:
    """`answer_error`'s rule on a decoded response entity: top-level code, else first item's."""
    code = int(getattr(body, "error_code", 0) or 0)
    if code or not dataclasses.is_dataclass(body):
        return code
    for field in dataclasses.fields(body):
        value = getattr(body, field.name)
        if type(value) is tuple and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                code = int(getattr(item, "error_code", 0) or 0)
                if code:
                    return code
    return 0


def forwarded_labels(request_frame: bytes, response_frame: bytes | None, error: int) -> Labels:
    """The `api` and `error` labels of a forwarded write (issue #54, finding 7).

    Counted by the request inside the Envelope, on the node that forwarded it and on the
    leader that answered it: its Kafka (or private) API name, and the error its own answer
    carries (`response_frame`, without the size), or `error` where there is no inner answer
    (the Envelope refused, or no answer came). The names are those of the served APIs, so the
    label set stays bounded; a request that cannot be read is `Envelope`.
    """
    try:
        api_key, version, _ = peek_header(request_frame)
    except ProtocolError:
        return FORWARDED_UNKNOWN, _ERROR_NAMES.get(error, str(error))
    private_api = private.PRIVATE_APIS.get(api_key)
    name = API_NAMES.get(api_key) if private_api is None else private_api.name
    if name is None:
        return FORWARDED_UNKNOWN, _ERROR_NAMES.get(error, str(error))
    if response_frame is not None and not error:
        try:
            if private_api is not None:
                _, status, _ = private.decode_response(private_api, response_frame, version)
                error = int(status.error_code)
            else:
                error = _entity_error(decode_response(api_key, version, response_frame)[1])
        except Exception:
            error = int(ErrorCode.UNKNOWN_SERVER_ERROR)
    return name, "NONE" if not error else _ERROR_NAMES.get(error, str(error))


def envelope_labels(envelope: Any, answer: Any) -> Labels:
    """`forwarded_labels` of an Envelope request's body and the leader's EnvelopeResponse."""
    values = answer.values if type(answer) is Answer else {}
    data = values.get("response_data")
    return forwarded_labels(
        bytes(envelope.request_data),
        None if data is None else bytes(data),
        int(values.get("error_code") or 0),
    )


class RequestMetrics(Collector):
    """Requests answered per API and error, and their latency per API (the request path).

    Plain counts in dicts, bumped on the event loop's thread (no lock, no label lookup),
    exported as a counter and a histogram when scraped.
    """

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.latency: dict[str, LatencyCounts] = {}

    def observe(self, api: str, error: str, seconds: float) -> None:
        """Count one request of `api` answered with `error` in `seconds`."""
        key = (api, error)
        self.counts[key] = self.counts.get(key, 0) + 1
        latency = self.latency.get(api)
        if latency is None:
            latency = self.latency[api] = LatencyCounts()
        latency.observe(seconds)

    def collect(self) -> Iterator[Metric]:
        """The counter and the histogram, read now."""
        requests = CounterMetricFamily(
            "mlog_server_requests",
            "Requests answered, by API and the error the answer carries (NONE: success).",
            labels=["api", "error"],
        )
        for (api, error), count in sorted(self.counts.items()):
            requests.add_metric([api, error], count)
        yield requests
        latency = HistogramMetricFamily(
            "mlog_server_request_duration_seconds",
            "Time from a whole request read to its answer written, by API.",
            labels=["api"],
        )
        for api, counts in sorted(self.latency.items()):
            latency.add_metric([api], counts.cumulative(), counts.total_seconds)
        yield latency


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageCounts:
    """What the controller metrics count in one image (computed once per image)."""

    topics: int
    partitions: int
    offline_partitions: int
    modes: dict[str, int]
    fenced_brokers: int
    active_brokers: int
    namespaces: int

    @classmethod
    def of(cls, image: MetadataImage) -> ImageCounts:
        """The counts of `image`."""
        modes = {mode.name.lower(): 0 for mode in Mode}
        partitions = offline = 0
        for topic in image.topics.by_id.values():
            for partition in topic.partitions:
                partitions += 1
                if partition.leader == NO_LEADER:
                    offline += 1
                name = _MODE_NAMES.get(partition.mode)
                if name is not None:
                    modes[name] += 1
        brokers = list(image.cluster.brokers.values())
        fenced = sum(1 for b in brokers if b.fenced)
        return cls(
            topics=len(image.topics),
            partitions=partitions,
            offline_partitions=offline,
            modes=modes,
            fenced_brokers=fenced,
            active_brokers=len(brokers) - fenced,
            namespaces=len(image.namespaces.by_name),
        )


_MODE_NAMES = {int(mode): mode.name.lower() for mode in Mode}


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(name: str, doc: str, counts: LatencyCounts) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        name, doc, buckets=counts.cumulative(), sum_value=counts.total_seconds
    )


class ServerCollector(Collector):
    """The gauges read from the server's state when scraped: controller, raft, log, snapshots."""

    def __init__(
        self,
        service: MetadataService,
        node: QuorumNode | None,
        *,
        node_id: int,
        connections: Callable[[], int],
        closed: Callable[[], dict[str, int]],
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        archiving: LogArchiving | None = None,
    ) -> None:
        self.service = service
        self.node = node
        self.archiving = archiving
        self.node_id = node_id
        self._connections = connections
        self._closed = closed
        self._clock_ms = clock_ms
        self._counted: tuple[MetadataImage, ImageCounts] | None = None

    def _counts(self, image: MetadataImage) -> ImageCounts:
        counted = self._counted
        if counted is None or counted[0] is not image:
            counted = self._counted = (image, ImageCounts.of(image))
        return counted[1]

    def collect(self) -> Iterator[Metric]:
        """Every gauge, read now."""
        yield from self._controller()
        yield from self._raft()
        yield from self._log()
        yield from self._snapshots()
        yield from self._archive()
        yield from self._server()

    def _controller(self) -> Iterator[Metric]:
        service, node = self.service, self.node
        image = service.image
        counts = self._counts(image)
        state = health(service, node, node_id=self.node_id)
        active = 1 if node is None or node.leading else 0
        p = image.provenance
        prefix = "mlog_controller_"
        yield _gauge(
            prefix + "active_controller_count",
            "1 on the controller that takes writes (the quorum's leader), else 0.",
            active,
        )
        yield _gauge(prefix + "global_topic_count", "Topics in the image.", counts.topics)
        yield _gauge(
            prefix + "global_partition_count", "Partitions in the image.", counts.partitions
        )
        yield _gauge(
            prefix + "offline_partitions_count",
            "Partitions without a leader.",
            counts.offline_partitions,
        )
        yield _gauge(prefix + "fenced_broker_count", "Fenced brokers.", counts.fenced_brokers)
        yield _gauge(
            prefix + "active_broker_count", "Registered unfenced brokers.", counts.active_brokers
        )
        yield _gauge(
            prefix + "last_applied_record_offset",
            "Offset of the last record in the image answers come from.",
            p.offset,
        )
        yield _gauge(
            prefix + "last_committed_record_offset",
            "Offset of the last committed record (durable; on a quorum, on a majority).",
            state.committed_offset,
        )
        yield _gauge(
            prefix + "last_applied_record_timestamp_ms",
            "Append time (ms since the epoch) of the last applied record.",
            p.timestamp,
        )
        yield _gauge(
            prefix + "last_applied_record_lag_ms",
            "Now less the last applied record's append time (ms).",
            max(0, self._clock_ms() - p.timestamp) if p.offset >= 0 else 0,
        )
        errors = service.storage_failures + (0 if node is None or node.failed is None else 1)
        yield _gauge(
            prefix + "metadata_error_count",
            "Storage failures of the log and quorum-node stops since the start.",
            errors,
        )
        yield _gauge(prefix + "namespace_count", "Namespaces in the image.", counts.namespaces)
        modes = GaugeMetricFamily(
            prefix + "partitions_by_mode",
            "Partitions by mode (read_write, read_only, none: being deleted).",
            labels=["mode"],
        )
        for mode, count in sorted(counts.modes.items()):
            modes.add_metric([mode], count)
        yield modes
        yield _gauge("mlog_server_ready", "1 when /readyz answers 200.", 1 if state.ready else 0)
        yield _gauge(
            "mlog_server_writes_possible",
            "1 when this node takes writes.",
            1 if state.writes else 0,
        )

    def _raft(self) -> Iterator[Metric]:
        node = self.node
        if node is None:
            return
        core = node.core
        prefix = "mlog_raft_"
        yield _gauge(prefix + "current_leader", "The leader's id (-1: none known).", node.leader_id)
        yield _gauge(prefix + "current_epoch", "The current epoch.", node.epoch)
        yield _gauge(prefix + "current_vote", "The voter this node voted for (-1).", core.voted_id)
        yield _gauge(
            prefix + "high_watermark", "Offsets below it are committed.", core.high_watermark
        )
        yield _gauge(
            prefix + "log_end_offset", "One past the log's last entry.", core.log.end_offset
        )
        yield _gauge(prefix + "log_start_offset", "The log's first offset.", core.log.start_offset)
        state = GaugeMetricFamily(
            prefix + "current_state", "1 for this node's role now.", labels=["state"]
        )
        state.add_metric([node.role.name.lower()], 1)
        yield state
        yield _histogram(
            prefix + "commit_latency_seconds",
            "On the leader: from a write proposed to committed by the quorum.",
            node.commit_latency,
        )
        yield CounterMetricFamily(
            prefix + "poll_idle_seconds",
            "Time the quorum loop waited with nothing to do (its rate: the idle ratio).",
            value=node.idle_seconds,
        )
        yield CounterMetricFamily(
            prefix + "snapshot_transfers",
            "Snapshot transfers this node's core started (FetchSnapshot).",
            value=core.snapshot_transfers,
        )

    def _log(self) -> Iterator[Metric]:
        log = self.service.log
        segments = log.segments()
        prefix = "mlog_log_"
        yield _gauge(
            prefix + "size_bytes",
            "Bytes of the log's segments.",
            sum(s.size_bytes for s in segments),
        )
        yield _gauge(prefix + "segments", "Segments in the log.", len(segments))
        yield _gauge(prefix + "start_offset", "The log's first offset.", log.log_start_offset)
        yield _gauge(prefix + "end_offset", "One past the log's last entry.", log.end_offset)
        digest = self.service.committed_digest()
        if digest is not None:
            # The digest at the committed offset (DescribeLogDigest answers the whole token):
            # its offset, and the chain value's first 48 bits as a number a float holds
            # exactly, so nodes at the same offset can be compared on a dashboard.
            yield _gauge(
                prefix + "digest_offset",
                "Last offset of the committed digest (the hash chain's value there).",
                digest.offset,
            )
            yield _gauge(
                prefix + "digest_chain_prefix",
                "The committed digest's chain value, first 48 bits as an integer.",
                int.from_bytes(digest.chain[:6], "big"),
            )
        retention = self.service.retention
        yield CounterMetricFamily(
            prefix + "trimmed_segments",
            "Segments removed by online retention since the start.",
            value=0 if retention is None else retention.trimmed_segments,
        )
        yield CounterMetricFamily(
            prefix + "trims_held_back",
            "Retention trims held back: the Merkle index could not be extended over the cut.",
            value=0 if retention is None else retention.held_back,
        )
        yield CounterMetricFamily(
            prefix + "merkle_index_failures",
            "Failed extensions of the Merkle index below a snapshot (retried at the next).",
            value=0 if retention is None else retention.index_failures,
        )
        yield CounterMetricFamily(
            prefix + "trims_held_by_archive",
            "Retention checks that kept segments because the archive does not hold them yet.",
            value=0 if retention is None else retention.archive_held_back,
        )
        yield _gauge(
            prefix + "retention_held_by_archive_segments",
            "Segments retention would remove now but keeps: the archive does not hold them.",
            0 if retention is None else retention.archive_held_segments,
        )
        timings = getattr(log, "timings", None)
        if timings is not None:
            yield _histogram(
                prefix + "append_duration_seconds",
                "Each block written at the log's end (with its fsync when durable).",
                timings.append,
            )
            yield _histogram(
                prefix + "fsync_duration_seconds",
                "Each fdatasync of the newest segment.",
                timings.fsync,
            )

    def _snapshots(self) -> Iterator[Metric]:
        snapshotter = self.service.snapshots
        if snapshotter is None:
            return
        info = snapshotter.written or snapshotter.started_from
        prefix = "mlog_snapshot_"
        if info is not None:
            yield _gauge(prefix + "last_offset", "Offset of the newest snapshot.", info.offset)
            yield _gauge(prefix + "records", "Records in the newest snapshot.", info.record_count)
            age = time.time() - info.created_at.timestamp()
            yield _gauge(prefix + "age_seconds", "Age of the newest snapshot.", max(0.0, age))
        yield CounterMetricFamily(
            prefix + "deleted",
            "Snapshots deleted by retention since the start.",
            value=snapshotter.deleted_total,
        )
        yield _gauge(
            prefix + "failing",
            "1 while the last snapshot attempt failed (database down, schema behind).",
            0 if snapshotter.last_error is None else 1,
        )

    def _archive(self) -> Iterator[Metric]:
        archiving = self.archiving
        if archiving is None:
            return
        prefix = "mlog_archive_"
        yield CounterMetricFamily(
            prefix + "uploaded_segments",
            "Segments this node uploaded to the archive (as the active controller).",
            value=archiving.uploaded_segments,
        )
        yield CounterMetricFamily(
            prefix + "uploaded_bytes",
            "Bytes of the objects this node uploaded to the archive.",
            value=archiving.uploaded_bytes,
        )
        yield CounterMetricFamily(
            prefix + "upload_failures",
            "Rounds that failed: an upload, or a read of the archive's manifest.",
            value=archiving.failures,
        )
        yield _gauge(
            prefix + "failing",
            "1 while the archive cannot be used (the last round failed, or one hangs).",
            1 if archiving.failing else 0,
        )
        end = archiving.archived_end
        if end is not None:
            yield _gauge(prefix + "end_offset", "One past the archive's last offset.", end)
        yield _gauge(
            prefix + "behind_segments",
            "Sealed committed segments of this node's log the archive does not hold yet.",
            archiving.behind_segments,
        )

    def _server(self) -> Iterator[Metric]:
        yield _gauge("mlog_server_connections", "Connections open now.", self._connections())
        closed = CounterMetricFamily(
            "mlog_server_connections_closed_over_limit",
            "Connections closed over a limit, by the limit's key.",
            labels=["limit"],
        )
        for key, count in sorted(self._closed().items()):
            closed.add_metric([key], count)
        yield closed


class ServerMetrics:
    """A server's own registry: the request metrics and the collector of its state."""

    def __init__(
        self,
        service: MetadataService,
        node: QuorumNode | None,
        *,
        node_id: int,
        connections: Callable[[], int],
        closed: Callable[[], dict[str, int]],
        archiving: LogArchiving | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = RequestMetrics()
        self.registry.register(self.requests)
        self.registry.register(
            ServerCollector(
                service,
                node,
                node_id=node_id,
                connections=connections,
                closed=closed,
                archiving=archiving,
            )
        )
