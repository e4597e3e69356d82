"""Each area of `diff` and the Diff API's points (`replay/timetravel/image_diff.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    FeatureLevelRecord,
    NamespaceRecord,
    Record,
    RemoveNamespaceRecord,
    ResourceType,
    ScramMechanism,
    UserScramCredentialRecord,
)
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.timetravel import (
    diff,
    diff_points,
)
from replay.timetravel.image_cache import ImageCache
from tests.support.timetravel_logs import (
    ACL,
    NS,
    T1,
    T3,
    acl_on,
    broker_of,
    known_log,
)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


def _image(records: list[Record], base: MetadataImage = EMPTY_IMAGE) -> MetadataImage:
    offset = base.provenance.offset + len(records)
    return replay_records(base, records, Provenance(offset=offset, epoch=1, timestamp=0))


def test_diff_of_features_brokers_namespaces_and_security() -> None:
    base = _image(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            FeatureLevelRecord(name="kraft.version", feature_level=1),
            broker_of(1),
            broker_of(2),
            NamespaceRecord(namespace_id=NS, name="team"),
        ]
    )
    credential = UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"salt",
        stored_key=bytes(32),
        server_key=bytes(32),
        iterations=4096,
    )
    later = _image(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=2),
            FeatureLevelRecord(name="group.version", feature_level=1),
            broker_of(3),
            RemoveNamespaceRecord(namespace_id=NS),
            credential,
            acl_on(ResourceType.GROUP, "g"),
        ],
        base,
    )
    lines = [c.text() for c in diff(base, later)]
    assert lines[:5] == [
        "+ feature group.version: level 1",
        "~ feature metadata.version: level 1 -> 2",
        "+ broker 3",
        f"- namespace team (id {NS})",
        "+ credential alice SCRAM-SHA-256: iterations 4096",
    ]
    assert lines[5].startswith(f"+ acl group g (id {ACL}): permission ALLOW; principal User:bob")
    assert len(lines) == 6
    back = [c.text() for c in diff(later, base)]
    assert back[:4] == [
        "- feature group.version: level 1",
        "~ feature metadata.version: level 2 -> 1",
        "- broker 3",
        f"+ namespace team (id {NS})",
    ]
    assert diff(base, base) == [] and diff(later, later) == []


def test_diff_points_with_kept_images_answer_as_without(log: MetadataLog) -> None:
    """The earlier point may be built from a kept image; the changes are the same."""
    cache = ImageCache()
    end = log.end_offset - 1
    pairs = [(a, b) for a in range(0, end + 1, 3) for b in (a + 2, end) if b <= end]
    for a, b in pairs:
        assert diff_points(log, None, str(a), str(b), cache=cache) == diff_points(
            log, None, str(a), str(b)
        ), (a, b)
    assert len(cache) > 0  # the earlier points' replays kept images for the later ones


def test_diff_points_in_either_order_and_to_the_end(log: MetadataLog) -> None:
    start, end, forward = diff_points(log, None, "6", "15")
    assert (start, end) == (6, 15)
    assert f"- topic orders (id {T1})" in [c.text() for c in forward]
    start, end, backward = diff_points(log, None, "15", "6")
    assert (start, end) == (15, 6)
    assert f"+ topic orders (id {T1}): partitions 2" in [c.text() for c in backward]
    start, end, to_end = diff_points(log, None, "22", None)
    assert (start, end) == (22, log.end_offset - 1) == (22, 23)
    assert [c.text() for c in to_end] == ["~ broker 2: fenced false -> true"]
    assert diff_points(log, None, "23", None) == (23, 23, [])
    # A pending deletion that appears, and (the other way) one that goes.
    _, _, added = diff_points(log, None, "19", "20")
    _, _, gone = diff_points(log, None, "20", "19")
    assert [c.text() for c in added if c.kind == "pending_deletion"] == [
        f"+ pending_deletion team:audit (id {T3}): keep_partitions 1"
    ]
    assert [c.text() for c in gone if c.kind == "pending_deletion"] == [
        f"- pending_deletion team:audit (id {T3}): keep_partitions 1"
    ]
