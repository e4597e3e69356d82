"""The server's side of the time-travel APIs: replay's values into their wire forms and back.

The wire codec (`api.protocol.private`) carries records and plain values only; this module
turns an image into the records that rebuild it, replay's changes and history entries into
their wire forms, and a requested entity into replay's (whose checks it then runs). No
credential leaves in clear: the records of FetchLog and ImageAt carry them `redacted`
(`replay.timetravel_security`), mechanism and iterations only.
"""

from __future__ import annotations

from collections.abc import Iterable

from api.protocol import private
from records.codec import RecordCodec
from records.model import Record
from replay.changes import Change
from replay.image import MetadataImage
from replay.timetravel import Entity, HistoryEntry
from replay.timetravel_security import SECRET_RECORD_TYPES, redacted


def image_response(
    image: MetadataImage,
    codec: RecordCodec,
    known: str | None,
    records: Iterable[Record] | None = None,
) -> private.ImageResponse:
    """An image as the records that rebuild it (numbered from 0, no principal), redacted.

    `records` is the part of the image to send (`api.server.image_views`); all of it if None.
    """
    shown = image.write() if records is None else records
    entries = ((i, 0, 0, None, redacted(r)) for i, r in enumerate(shown))
    p = image.provenance
    return private.ImageResponse(
        offset=p.offset,
        epoch=p.epoch,
        timestamp=p.timestamp,
        records=private.entry_block(codec, entries, known),
    )


def log_block(
    codec: RecordCodec, schema: str, count: int, body: bytes, known: str | None
) -> private.EntryBlock:
    """Stored block bodies as FetchLog sends them: as stored, unless they hold a credential.

    The bodies are walked for the kinds of records they hold (no records made); a block
    that holds a credential is decoded and re-encoded, in the codec's schema, with every
    credential `redacted`.
    """
    if count == 0 and not body:
        return private.block_of(schema, count, body, known)
    array_schema = codec.reader_array_schema(schema)
    if SECRET_RECORD_TYPES.isdisjoint(codec.record_types_in(count, body, array_schema)):
        return private.block_of(schema, count, body, known)
    block = codec.decode_block(count, body, array_schema)
    entries = zip(
        block.offsets,
        block.epochs,
        block.timestamps,
        block.principals,
        map(redacted, block.records),
        strict=True,
    )
    return private.entry_block(codec, entries, known)


def wire_change(change: Change) -> private.Change:
    """A change as the Diff API carries it."""
    return private.Change(
        op=change.op, kind=change.kind, name=change.name, id=change.id, fields=change.fields
    )


def wire_history_entry(entry: HistoryEntry) -> private.HistoryEntry:
    """A history entry as the History API carries it."""
    return private.HistoryEntry(
        offset=entry.offset,
        timestamp=entry.timestamp,
        principal=entry.principal,
        record_type=entry.record_type,
        description=entry.description,
        topic_id=entry.topic_id,
    )


def entity_of(wire: private.Entity) -> Entity:
    """The entity a History request follows; a `TimeTravelError` unless exactly one is named."""
    return Entity(
        topic=wire.topic,
        topic_id=wire.topic_id,
        namespace=wire.namespace,
        broker=wire.broker,
        user=wire.user,
    )
