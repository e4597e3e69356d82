"""`api.raft.snapshot_bytes`: a snapshot's image as FetchSnapshot bytes, and each refusal of them.

`tests/api/raft/test_quorum_snapshot_catch_up.py` sends these bytes between real processes;
these pin the form (its header, the records, the CRC32) and every way a decode says no, by its
message.
"""

from __future__ import annotations

import json
import zlib

import pytest

from api.raft.snapshot_bytes import (
    FORMAT,
    VERSION,
    SnapshotBytesError,
    SnapshotHeader,
    decode_snapshot,
    encode_snapshot,
)
from metadata_log.start_snapshot import CarriedChain
from records.model import PartitionRecord, RegisterBrokerRecord, TopicRecord
from records.uuids import Uuid
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance

TOPIC = Uuid(bytes(range(1, 17)))
INCARNATION = Uuid(bytes(range(2, 18)))
AT = Provenance(offset=41, epoch=3, timestamp=1_700_000_000_123)
SUM = "ab" * 32


def image() -> MetadataImage:
    records = [
        RegisterBrokerRecord(broker_id=1, incarnation_id=INCARNATION, broker_epoch=7, fenced=False),
        TopicRecord(name="orders", topic_id=TOPIC),
        *(
            PartitionRecord(partition_id=p, topic_id=TOPIC, replicas=(1,), isr=(1,), leader=1)
            for p in range(3)
        ),
    ]
    return replay_records(EMPTY_IMAGE, records, AT)


def crc(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def split(data: bytes) -> tuple[dict[str, object], bytes]:
    line, _, body = data[:-4].partition(b"\n")
    return json.loads(line), body


def test_an_image_round_trips_with_its_header() -> None:
    original = image()
    data = encode_snapshot(original, checksum=SUM)
    assert zlib.crc32(data[:-4]).to_bytes(4, "big") == data[-4:]
    header, body = split(data)
    count = len(list(original.write()))
    assert header == {
        "format": FORMAT,
        "version": VERSION,
        "offset": 41,
        "epoch": 3,
        "timestamp": 1_700_000_000_123,
        "checksum": SUM,
        "count": count,
    }
    assert data.startswith(json.dumps(header, separators=(",", ":"), sort_keys=True).encode())
    assert body
    decoded, got = decode_snapshot(data)
    assert got == SnapshotHeader(provenance=AT, checksum=SUM, count=count)
    assert decoded.provenance == AT
    assert list(decoded.write()) == list(original.write())
    assert encode_snapshot(decoded, checksum=SUM) == data  # deterministic


def test_the_empty_image_round_trips() -> None:
    empty = replay_records(EMPTY_IMAGE, [], AT)
    decoded, header = decode_snapshot(encode_snapshot(empty, checksum="0"))
    assert header.count == len(list(empty.write()))
    assert list(decoded.write()) == list(empty.write())


@pytest.mark.parametrize("cut", [0, 1, 3, 4, 5])
def test_bytes_that_fail_their_crc32_are_refused(cut: int) -> None:
    data = encode_snapshot(image(), checksum=SUM)
    with pytest.raises(SnapshotBytesError, match="fail their CRC32"):
        decode_snapshot(data[:cut] if cut < 5 else data[:-1] + bytes([data[-1] ^ 1]))


@pytest.mark.parametrize(
    "front",
    [
        b"",  # nothing but the CRC32
        b'{"format": "mlog-snapshot-records", "version": 1}',  # a header without its newline
        b"not json\n",
        b'["mlog-snapshot-records"]\n',  # JSON, not an object
        b'{"format": "other", "version": 1}\n',
        b'{"version": 1}\n',
    ],
)
def test_bytes_without_a_snapshot_header_are_refused(front: bytes) -> None:
    with pytest.raises(SnapshotBytesError, match="do not start with a snapshot header"):
        decode_snapshot(crc(front))


def header_bytes(**fields: object) -> bytes:
    header = {
        "format": FORMAT,
        "version": VERSION,
        "offset": 1,
        "epoch": 1,
        "timestamp": 1,
        "checksum": SUM,
        "count": 0,
        **fields,
    }
    return crc(json.dumps({k: v for k, v in header.items() if v is not None}).encode() + b"\n")


def test_another_version_is_refused_by_name() -> None:
    with pytest.raises(SnapshotBytesError) as caught:
        decode_snapshot(header_bytes(version=2))
    assert str(caught.value) == "snapshot format version 2; this code reads 1"


@pytest.mark.parametrize(
    "fields",
    [{"offset": None}, {"epoch": None}, {"timestamp": None}, {"count": None},
     {"checksum": None}, {"offset": "x"}, {"count": [1]}],
)  # fmt: skip
def test_a_header_without_a_field_is_incomplete(fields: dict[str, object]) -> None:
    with pytest.raises(SnapshotBytesError, match="the snapshot header is incomplete"):
        decode_snapshot(header_bytes(**fields))


def test_a_header_of_no_records_gives_the_empty_image_at_its_provenance() -> None:
    decoded, header = decode_snapshot(header_bytes(offset=9, epoch=2, timestamp=5, checksum="c"))
    assert header == SnapshotHeader(
        provenance=Provenance(offset=9, epoch=2, timestamp=5), checksum="c", count=0
    )
    assert decoded.provenance == header.provenance
    assert list(decoded.write()) == list(replay_records(EMPTY_IMAGE, [], AT).write())


def test_the_hash_chain_state_travels_with_the_snapshot_and_is_optional() -> None:
    chain = CarriedChain(origin=0, value=bytes(range(32)))
    data = encode_snapshot(image(), checksum=SUM, chain=chain)
    header, _ = split(data)
    assert header["chain"] == {"origin": 0, "value": bytes(range(32)).hex()}
    _, got = decode_snapshot(data)
    assert got.chain == chain
    # Bytes of a leader without the chain (or an older one) have no such field.
    _, plain = decode_snapshot(encode_snapshot(image(), checksum=SUM))
    assert plain.chain is None


@pytest.mark.parametrize(
    "chain",
    [{"origin": -1, "value": "00" * 32}, {"origin": 0, "value": "0" * 63},
     {"origin": 0, "value": "XY" * 32}, {"origin": True, "value": "00" * 32}, [0, "00"],
     {"origin": 3, "value": "00" * 32}],
)  # fmt: skip
def test_a_malformed_chain_field_is_refused(chain: object) -> None:
    with pytest.raises(SnapshotBytesError, match="chain"):
        decode_snapshot(header_bytes(offset=1, chain=chain))
