"""The client's side of the time-travel APIs: wire forms into replay's values and back.

The wire codec (`api.protocol.private`) carries records and plain values only; this module
replays an ImageAt answer's records into an image, and turns the Diff and History answers'
plain values into replay's `Change` and `HistoryEntry`.
"""

from __future__ import annotations

from api.protocol import private
from replay.changes import Change
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.timetravel import Entity, HistoryEntry


def image_from_response(
    response: private.ImageResponse, decoder: private.EntryDecoder
) -> MetadataImage:
    """The image an `ImageResponse` carries, rebuilt by replaying its records."""
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(e.record for e in decoder.decode(response.records))
    return delta.apply(
        Provenance(offset=response.offset, epoch=response.epoch, timestamp=response.timestamp)
    )


def change_of(wire: private.Change) -> Change:
    """A change the Diff API answered."""
    return Change(op=wire.op, kind=wire.kind, name=wire.name, id=wire.id, fields=wire.fields)


def history_entry_of(wire: private.HistoryEntry) -> HistoryEntry:
    """A history entry the History API answered."""
    return HistoryEntry(
        offset=wire.offset,
        timestamp=wire.timestamp,
        principal=wire.principal,
        record_type=wire.record_type,
        description=wire.description,
        topic_id=wire.topic_id,
    )


def wire_entity(entity: Entity) -> private.Entity:
    """An entity as a History request carries it."""
    return private.Entity(
        topic=entity.topic,
        topic_id=entity.topic_id,
        namespace=entity.namespace,
        broker=entity.broker,
        user=entity.user,
    )
