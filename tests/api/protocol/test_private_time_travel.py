"""The time-travel APIs' wire forms: replay's values cross the wire as the same bytes as before.

The codec (`api.protocol.private`) carries plain forms of replay's `Change`, `Entity` and
`HistoryEntry`; the server and the client convert. Their Avro encodings must be the bytes the
codec wrote when it bound replay's classes directly, and a malformed entity is still an
invalid request, answered before authorization.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from api.client.time_travel import change_of, history_entry_of, image_from_response, wire_entity
from api.protocol import private
from api.protocol.avro_bind import binding
from api.server.kafka.base import Session
from api.server.private_apis import PrivateApis
from api.server.time_travel import entity_of, image_response, wire_change, wire_history_entry
from api.service.service import MetadataService
from records.codec import DEFAULT_CODEC
from records.model import FeatureLevelRecord, TopicRecord
from records.uuids import Uuid
from replay.changes import Change
from replay.controller.authorizer import Authorizer, AuthorizerConfig
from replay.controller.errors import ErrorCode
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, Provenance
from replay.timetravel import Entity, HistoryEntry

TOPIC_ID = Uuid(bytes(range(1, 17)))


def test_a_change_crosses_the_wire_as_the_bytes_of_replay_change() -> None:
    change = Change(op="~", kind="partition", name="t-0", id="x", fields=(("isr", [1, 2], [1]),))
    wire = wire_change(change)
    assert binding(private.Change).encode(wire) == binding(Change).encode(change)
    assert binding(private.Change).schema == binding(Change).schema
    assert change_of(binding(private.Change).decode(binding(Change).encode(change))) == change


def test_an_entity_crosses_the_wire_as_the_bytes_of_replay_entity() -> None:
    for entity in (
        Entity(topic="t"),
        Entity(topic_id=TOPIC_ID),
        Entity(namespace="org:a"),
        Entity(broker=3),
        Entity(user="alice"),
    ):
        wire = wire_entity(entity)
        assert binding(private.Entity).encode(wire) == binding(Entity).encode(entity)
        assert entity_of(wire) == entity
    assert binding(private.Entity).schema == binding(Entity).schema


def test_a_history_entry_crosses_the_wire_as_the_bytes_of_replay_history_entry() -> None:
    entry = HistoryEntry(
        offset=4,
        timestamp=1_700_000_000_000,
        principal="User:alice",
        record_type="TopicRecord",
        description="created topic t",
        topic_id=str(TOPIC_ID),
    )
    wire = wire_history_entry(entry)
    assert binding(private.HistoryEntry).encode(wire) == binding(HistoryEntry).encode(entry)
    assert binding(private.HistoryEntry).schema == binding(HistoryEntry).schema
    assert history_entry_of(wire) == entry


def test_an_image_crosses_the_wire_as_its_records() -> None:
    image = replay_records(
        EMPTY_IMAGE,
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            TopicRecord(name="t", topic_id=TOPIC_ID),
        ],
        Provenance(offset=7, epoch=2, timestamp=1234),
    )
    response = image_response(image, DEFAULT_CODEC, None)
    decoded = binding(private.ImageResponse).decode(binding(private.ImageResponse).encode(response))
    rebuilt = image_from_response(decoded, private.EntryDecoder())
    assert rebuilt.provenance == image.provenance
    assert rebuilt.same_state(image)


def test_an_entity_naming_nothing_is_an_invalid_request_whoever_asks(tmp_path: Path) -> None:
    service = MetadataService.open(tmp_path / "log")
    try:
        apis = PrivateApis(service, Authorizer(AuthorizerConfig(super_users=frozenset())))
        request = private.History(entity=private.Entity())
        frame = private.encode_request(private.HISTORY, request, correlation_id=3)
        header, body = private.private_header(frame[4:], private.HISTORY.key, 1, 3)
        stranger = Session(principal="User:nobody", host="10.0.0.1")
        answer = asyncio.run(apis.handle(header, body, stranger))
        _, status, body = private.decode_response(private.HISTORY, answer[4:], version=1)
        assert body is None
        assert status.error_code == ErrorCode.INVALID_REQUEST
        assert "history follows one entity" in (status.error_message or "")
    finally:
        service.close()
