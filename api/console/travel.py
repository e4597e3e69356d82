"""Time travel in the console: the cluster at a point, and what changed between two points.

A point is what `mlog image show` and `image diff` take: an integer is an offset (-1 the
empty image), anything else an ISO-8601 time (or epoch milliseconds written as a time, never
as a bare integer). The image comes from `Metadata.image` (a snapshot plus the log after it,
or the server's ImageAt) and the diff from `Metadata.diff` (the `image diff` changes); this
module only picks what a page shows, and bounds it: a page lists at most `MAX_TOPICS` topics
(narrowed by a name filter) and the partitions of one topic at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from api.console.errors import BadInput
from api.python_api import Metadata
from records.model import (
    NO_LEADER,
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    PatternType,
    ResourceType,
    mode_name,
)
from replay.changes import Change
from replay.image import MetadataImage
from replay.timetravel import TimeTravelError, parse_time

MAX_TOPICS = 500
"""Topics listed on one page (a name filter narrows a bigger cluster)."""

MAX_POINT = 100
"""The longest text a point may be (characters)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """A point of the log: an offset, a time, or the end of the log (neither)."""

    offset: int | None = None
    time: str | None = None

    @property
    def text(self) -> str:
        """The point as a URL carries it ("" for the end of the log)."""
        if self.offset is not None:
            return str(self.offset)
        return self.time or ""

    def diff_arg(self) -> str | None:
        """The point as `Metadata.diff` takes it (None: the end of the log)."""
        return None if self.offset is None and self.time is None else self.text


def parse_point(text: str | None, name: str) -> Point:
    """The point of a URL parameter; `BadInput` says what a point may be."""
    stripped = (text or "").strip()
    if not stripped:
        return Point()
    if len(stripped) > MAX_POINT:
        raise BadInput(f"{name} is {len(stripped)} characters long: a point is an offset or a time")
    if stripped.lstrip("-").isdigit():
        offset = int(stripped)
        if not -1 <= offset <= 2**63 - 1:
            raise BadInput(f"{name}={offset} is not an offset: give -1 (empty) or more")
        return Point(offset=offset)
    try:
        parse_time(stripped)
    except TimeTravelError:
        raise BadInput(
            f"{name}={stripped[:40]!r} is neither an offset (an integer) nor an ISO-8601 time "
            "(2026-11-22T08:30:00Z)"
        ) from None
    except (OverflowError, ValueError):
        raise BadInput(f"{name}={stripped[:40]!r} is not a time this console can read") from None
    return Point(time=stripped)


def image_at(metadata: Metadata, point: Point) -> MetadataImage:
    """The image at `point` (blocking); a point past the end or before the start raises."""
    try:
        return metadata.image(at_offset=point.offset, at_time=point.time)
    except TimeTravelError as exc:
        raise BadInput(str(exc)) from None


def image_and_last(metadata: Metadata, point: Point) -> tuple[MetadataImage, int]:
    """The image at `point` and the log's last offset (blocking), building one image only.

    At the end of the log they are the image's own offset; at a past point the last offset
    is asked without building the image at the end (`wait_past` with no wait answers it).
    """
    image = image_at(metadata, point)
    if point.diff_arg() is None:
        return image, image.provenance.offset
    return image, metadata.wait_past(-1, wait_ms=0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicRow:
    """A topic as the cluster page lists it."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    pending_deletion: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRow:
    """A partition of the topic the cluster page details."""

    partition: int
    leader: str
    isr: str
    replicas: str
    adding: str
    removing: str
    mode: str
    leader_epoch: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """What the cluster page shows of an image."""

    offset: int
    timestamp: int
    brokers: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    topics: list[TopicRow]
    topic_count: int
    partition_count: int
    topics_cut: bool
    """More topics matched than a page lists."""
    detail: str | None
    detail_partitions: list[PartitionRow]
    detail_configs: list[tuple[str, str]]
    configs: list[tuple[str, str, str, str]]
    """(resource type, resource, key, value) of every override."""
    acls: list[dict[str, str]]
    users: list[tuple[str, str, int]]
    features: list[tuple[str, int]]


def _ints(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values) or "-"


def cluster_view(image: MetadataImage, *, q: str = "", topic: str = "") -> ClusterView:
    """The page's view of `image`: topics whose name holds `q`, and `topic`'s partitions."""
    needle = q.casefold()
    names = sorted(n for n in image.topics.by_name if needle in n.casefold())
    topics = []
    for name in names[:MAX_TOPICS]:
        t = image.topics.by_id[image.topics.by_name[name]]
        topics.append(
            TopicRow(
                name=name,
                topic_id=str(t.topic_id),
                partitions=len(t.partitions),
                replication_factor=t.replication_factor,
                under_replicated=sum(1 for p in t.partitions if len(p.isr) < len(p.replicas)),
                offline=sum(1 for p in t.partitions if p.leader == NO_LEADER),
                pending_deletion=t.pending_deletion is not None,
            )
        )
    detail = image.topics.get_by_name(topic) if topic else None
    if topic and detail is None:
        raise BadInput(f"topic={topic[:80]!r} does not exist at offset {image.provenance.offset}")
    partitions = []
    detail_configs: list[tuple[str, str]] = []
    if detail is not None:
        for p in detail.partitions:
            partitions.append(
                PartitionRow(
                    partition=p.partition_id,
                    leader="none" if p.leader == NO_LEADER else str(p.leader),
                    isr=_ints(p.isr),
                    replicas=_ints(p.replicas),
                    adding=_ints(p.adding_replicas),
                    removing=_ints(p.removing_replicas),
                    mode=mode_name(p.mode),
                    leader_epoch=p.leader_epoch,
                )
            )
        values = image.configs.get(ConfigResourceType.TOPIC, detail.qualified_name)
        detail_configs = sorted(values.items())
    return ClusterView(
        offset=image.provenance.offset,
        timestamp=image.provenance.timestamp,
        brokers=[
            {
                "id": b.broker_id,
                "epoch": b.broker_epoch,
                "rack": b.rack or "-",
                "state": "fenced" if b.fenced else "unfenced",
                "shutdown": b.in_controlled_shutdown,
                "endpoints": ", ".join(f"{e.host}:{e.port}" for e in b.end_points),
            }
            for b in image.cluster.sorted()
        ],
        namespaces=[
            {
                "name": n.name,
                "id": str(n.namespace_id),
                "topics": image.namespaces.topic_counts.get(n.name, 0),
            }
            for n in (image.namespaces.by_name[k] for k in sorted(image.namespaces.by_name))
        ],
        topics=topics,
        topic_count=len(image.topics),
        partition_count=image.topics.partition_count(),
        topics_cut=len(names) > MAX_TOPICS,
        detail=None if detail is None else detail.qualified_name,
        detail_partitions=partitions,
        detail_configs=detail_configs,
        configs=[
            (ConfigResourceType(kind).name.lower(), name or "<cluster>", key, value)
            for (kind, name), values in sorted(image.configs.resources.items())
            for key, value in sorted(values.items())
        ],
        acls=[
            {
                "resource": f"{ResourceType(a.resource_type).name.lower()} {a.resource_name}",
                "pattern": PatternType(a.pattern_type).name,
                "principal": a.principal,
                "host": a.host,
                "operation": AclOperation(a.operation).name,
                "permission": AclPermissionType(a.permission_type).name,
            }
            for a in image.acls.sorted()
        ],
        users=sorted(
            (name, mechanism.mechanism_name, record.iterations)
            for (name, mechanism), record in image.scram.credentials.items()
        ),
        features=sorted(image.features.levels.items()),
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DiffView:
    """What the compare page shows: the two offsets and the changes between them."""

    start: int
    end: int
    changes: list[Change]


def diff_view(metadata: Metadata, start: Point, end: Point) -> DiffView:
    """The changes from `start` to `end` (blocking); points the log lacks raise `BadInput`."""
    begin = start.diff_arg()
    if begin is None:
        raise BadInput("from is missing: give the offset or time to compare from")
    try:
        first, last, changes = metadata.diff(begin, end.diff_arg())
    except TimeTravelError as exc:
        raise BadInput(str(exc)) from None
    return DiffView(start=first, end=last, changes=changes)


def shown(value: Any) -> str:
    """A field's value in a diff, as `image diff` prints it."""
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def query_of(params: Mapping[str, str], **changed: str) -> dict[str, str]:
    """A URL's parameters with some replaced, empty ones left out."""
    merged = {**params, **changed}
    return {k: v for k, v in merged.items() if v}
