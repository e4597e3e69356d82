"""The server's side of the time-travel APIs: replay's values into their wire forms and back.

The wire codec (`api.protocol.private`) carries records and plain values only; this module
turns an image into the records that rebuild it, replay's changes and history entries into
their wire forms, and a requested entity into replay's (whose checks it then runs). No
credential leaves in clear: the records of FetchLog and ImageAt carry them `redacted`
(`replay.timetravel.security`), mechanism and iterations only.

Broker epochs and incarnation ids (what a forged BrokerHeartbeat needs besides the right) go
only to principals that may DESCRIBE the cluster. For the others (`hide_brokers`) the same path
hides them: records carry epoch -1 and the zero incarnation id (`without_broker_keys`; a copy
replays, but for a broker's re-registration, which needs a larger epoch), Diff shows them
"(hidden)", History's registration lines say `epoch (hidden)`. The entry offsets FetchLog and
History show stay: a registration's epoch is the offset it was written at, so a log reader
that also may not DESCRIBE learns it from there (docs/security.md).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

from api.protocol import private
from records.codec import RecordCodec
from records.model import (
    BrokerRegistrationChangeRecord,
    Record,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.changes import Change
from replay.image import MetadataImage
from replay.timetravel import Entity, HistoryEntry
from replay.timetravel.security import HIDDEN, SECRET_RECORD_TYPES, redacted

HIDDEN_BROKER_EPOCH = -1
"""The broker epoch a hidden one is shown as (Kafka's "no epoch")."""

BROKER_RECORD_TYPES = frozenset(
    {
        RegisterBrokerRecord.RECORD_TYPE,
        UnregisterBrokerRecord.RECORD_TYPE,
        BrokerRegistrationChangeRecord.RECORD_TYPE,
    }
)
"""The record types that carry a broker epoch (and a registration its incarnation id)."""

_BROKER_KEY_FIELDS = frozenset({"epoch", "incarnation_id"})
"""A broker's fields in a Diff that `hide_brokers` hides."""

_REGISTERED_EPOCH = re.compile(r"^(registered broker \d+ \(epoch )-?\d+")


def without_broker_keys(record: Record) -> Record:
    """`record` with its broker epoch and incarnation id hidden; any other record as is."""
    if isinstance(record, RegisterBrokerRecord):
        return dataclasses.replace(
            record, broker_epoch=HIDDEN_BROKER_EPOCH, incarnation_id=Uuid.ZERO
        )
    if isinstance(record, UnregisterBrokerRecord | BrokerRegistrationChangeRecord):
        return dataclasses.replace(record, broker_epoch=HIDDEN_BROKER_EPOCH)
    return record


def _shown(record: Record) -> Record:
    """A record as a principal that may not DESCRIBE the cluster gets it."""
    return without_broker_keys(redacted(record))


def _redaction(hide_brokers: bool) -> tuple[Callable[[Record], Record], frozenset[int]]:
    """The redaction of records that leave, and the record types it changes."""
    if hide_brokers:
        return _shown, SECRET_RECORD_TYPES | BROKER_RECORD_TYPES
    return redacted, SECRET_RECORD_TYPES


def image_response(
    image: MetadataImage,
    codec: RecordCodec,
    known: str | None,
    records: Iterable[Record] | None = None,
    *,
    hide_brokers: bool = False,
) -> private.ImageResponse:
    """An image as the records that rebuild it (numbered from 0, no principal), redacted.

    `records` is the part of the image to send (`api.server.image_views`); all of it if None.
    `hide_brokers`: without broker epochs and incarnation ids (see the module docstring).
    """
    shown = image.write() if records is None else records
    redact, _ = _redaction(hide_brokers)
    entries = ((i, 0, 0, None, redact(r)) for i, r in enumerate(shown))
    p = image.provenance
    return private.ImageResponse(
        offset=p.offset,
        epoch=p.epoch,
        timestamp=p.timestamp,
        records=private.entry_block(codec, entries, known),
    )


def log_block(
    codec: RecordCodec,
    schema: str,
    count: int,
    body: bytes,
    known: str | None,
    *,
    hide_brokers: bool = False,
) -> private.EntryBlock:
    """Stored block bodies as FetchLog sends them: as stored, unless they hold a credential.

    The bodies are walked for the kinds of records they hold (no records made); a block
    that holds a credential is decoded and re-encoded, in the codec's schema, with every
    credential `redacted` (and with `hide_brokers`, likewise a block holding a broker's
    epoch: see the module docstring).
    """
    if count == 0 and not body:
        return private.block_of(schema, count, body, known)
    array_schema = codec.reader_array_schema(schema)
    redact, changed_types = _redaction(hide_brokers)
    if changed_types.isdisjoint(codec.record_types_in(count, body, array_schema)):
        return private.block_of(schema, count, body, known)
    block = codec.decode_block(count, body, array_schema)
    entries = zip(
        block.offsets,
        block.epochs,
        block.timestamps,
        block.principals,
        map(redact, block.records),
        strict=True,
    )
    return private.entry_block(codec, entries, known)


def wire_change(change: Change, *, hide_brokers: bool = False) -> private.Change:
    """A change as the Diff API carries it (`hide_brokers`: a broker's epoch "(hidden)")."""
    fields = change.fields
    if hide_brokers and change.kind == "broker":
        fields = tuple(
            (name, HIDDEN, HIDDEN) if name in _BROKER_KEY_FIELDS else (name, before, after)
            for name, before, after in fields
        )
    return private.Change(
        op=change.op, kind=change.kind, name=change.name, id=change.id, fields=fields
    )


def wire_history_entry(entry: HistoryEntry, *, hide_brokers: bool = False) -> private.HistoryEntry:
    """A history entry as the History API carries it (`hide_brokers`: without epochs)."""
    description = entry.description
    if hide_brokers and entry.record_type == RegisterBrokerRecord.__name__:
        description = _REGISTERED_EPOCH.sub(rf"\g<1>{HIDDEN}", description)
    return private.HistoryEntry(
        offset=entry.offset,
        timestamp=entry.timestamp,
        principal=entry.principal,
        record_type=entry.record_type,
        description=description,
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
