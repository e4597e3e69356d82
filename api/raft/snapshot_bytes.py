"""A snapshot's image as bytes for another node (FetchSnapshot): deterministic and checksummed.

The form: one JSON header line (`format`, `version`, the provenance `offset`, `epoch`,
`timestamp`, the SQL snapshot's content `checksum` and the record `count`), then the image
written back out as records (`image.write()`, KRaft's snapshot-as-records) in one block body of
the log's entry encoding (each record an entry at the snapshot's offset, epoch and timestamp),
then a big-endian CRC32 of everything before it (`api.raft.core.snapshot_fetch`, checked
by the fetching core). The same image always gives the same bytes. The receiver replays the
records onto the empty image and, once it has stored the result as its own SQL snapshot,
compares that snapshot's content checksum with the header's: equal rows, equal state.

A leader that keeps the hash chain adds `chain` to the header: `{"origin": N, "value": "<64
hex digits>"}`, its chain's origin and value after the snapshot's offset, which the receiver's
new log goes on from (metadata_log.start_snapshot). The field is optional: bytes without it
(an older leader, or one without the chain) are read as before, and older readers ignore it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from api.raft.core.transfer import snapshot_checksum_ok, with_checksum
from api.raft.core.voters import VoterSet
from metadata_log.start_snapshot import CarriedChain
from records.codec import DEFAULT_CODEC, RecordCodec
from records.errors import MetadataLogError
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance

FORMAT = "mlog-snapshot-records"
VERSION = 1


class SnapshotBytesError(MetadataLogError):
    """Bytes that are not a snapshot this code can read (the message says what is wrong)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotHeader:
    """What the bytes say about the snapshot they hold."""

    provenance: Provenance
    checksum: str
    """The SQL snapshot's content checksum on the node that served it."""
    count: int
    chain: CarriedChain | None = None
    """The serving node's hash chain state after the snapshot's offset, if it keeps one."""


def encode_snapshot(
    image: MetadataImage,
    *,
    checksum: str,
    chain: CarriedChain | None = None,
    codec: RecordCodec = DEFAULT_CODEC,
    voters: VoterSet | None = None,
) -> bytes:
    """The bytes of `image` (whose SQL snapshot has content checksum `checksum`).

    With `chain`, the header carries the hash chain's state after the image's offset.
    `voters`: a dynamic quorum's voter set at the snapshot's end, as the header's `voters`
    (`api.raft.core.voters.snapshot_voters` reads it back).
    """
    p = image.provenance
    count, body = codec.encode_entries(
        (p.offset, p.epoch, p.timestamp, None, record) for record in image.write()
    )
    header: dict[str, object] = {
        "format": FORMAT,
        "version": VERSION,
        "offset": p.offset,
        "epoch": p.epoch,
        "timestamp": p.timestamp,
        "checksum": checksum,
        "count": count,
    }
    if chain is not None:
        header["chain"] = {"origin": chain.origin, "value": chain.value.hex()}
    if voters is not None:
        header["voters"] = voters.to_json()
    line = json.dumps(header, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    return with_checksum(line + body)


def decode_snapshot(
    data: bytes, *, codec: RecordCodec = DEFAULT_CODEC
) -> tuple[MetadataImage, SnapshotHeader]:
    """The image the bytes hold and their header; `SnapshotBytesError` if they are not one."""
    if not snapshot_checksum_ok(data):
        raise SnapshotBytesError("the snapshot's bytes fail their CRC32")
    line, newline, body = data[:-4].partition(b"\n")
    try:
        header = json.loads(line) if newline else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SnapshotBytesError("the bytes do not start with a snapshot header")
    if header.get("version") != VERSION:
        raise SnapshotBytesError(
            f"snapshot format version {header.get('version')!r}; this code reads {VERSION}"
        )
    try:
        provenance = Provenance(
            offset=int(header["offset"]),
            epoch=int(header["epoch"]),
            timestamp=int(header["timestamp"]),
        )
        count = int(header["count"])
        checksum = str(header["checksum"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotBytesError(f"the snapshot header is incomplete: {exc}") from None
    chain = _carried_chain(header.get("chain"))
    if chain is not None and chain.origin > provenance.offset + 1:
        raise SnapshotBytesError(
            f"the snapshot header's chain starts at offset {chain.origin}, after the "
            f"snapshot's offset {provenance.offset}"
        )
    array = codec.reader_array_schema(codec.entry_schema_json)
    entries = codec.decode_entries(count, body, array)
    delta = MetadataDelta(EMPTY_IMAGE)
    for entry in entries:
        delta.replay(entry.record)
    image = delta.apply(provenance)
    return image, SnapshotHeader(provenance=provenance, checksum=checksum, count=count, chain=chain)


def _carried_chain(value: object) -> CarriedChain | None:
    """The header's optional `chain` field; SnapshotBytesError if it is not one."""
    if value is None:
        return None
    if isinstance(value, dict):
        origin, text = value.get("origin"), value.get("value")
        if (
            isinstance(origin, int)
            and not isinstance(origin, bool)
            and origin >= 0
            and isinstance(text, str)
            and len(text) == 64
            and all(c in "0123456789abcdef" for c in text)
        ):
            return CarriedChain(origin=origin, value=bytes.fromhex(text))
    raise SnapshotBytesError(
        "the snapshot header's chain is not {origin: offset, value: 64 hex digits}"
    )
