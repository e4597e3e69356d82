"""The generated readers read what kio's reader reads, and refuse what it refuses."""

import dataclasses
import datetime
import io
import struct
import subprocess
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32

from api.protocol import codec
from api.protocol.generated_reader import read_request, reader_for
from api.protocol.generated_reader_codegen import Unsupported, compiled_reader
from api.protocol.generated_reader_runtime import ImpossibleCount
from tests.support.kio_entities import (
    SUPPORTED_REQUESTS,
    damaged_requests,
    entities,
    request_frames,
    same,
)
from tests.support.paths import REPO
from tests.support.protocol_frames import API_VERSIONS, SEEDS, metadata_frame

# ----------------------------------------------------------------------------- comparing


Outcome = tuple[bool, Any]
"""(True, what was read) or (False, the exception)."""


def _attempt(read: Callable[[], Any]) -> Outcome:
    try:
        return True, read()
    except Exception as exc:  # every refusal counts the same: the caller falls back to kio
        return False, exc


def _kio_after(fast: Outcome, read: Callable[[], Any]) -> Outcome:
    """kio's outcome, unless the generated reader found an array count kio must not see.

    For a count beyond the end of the bytes kio reserves memory for that many items before it
    fails: a large one aborts the test process. It is given the small ones (and must fail).
    """
    if not fast[0] and isinstance(fast[1], ImpossibleCount) and fast[1].args[0] >= 2**20:
        return False, fast[1]
    return _attempt(read)


def _frame_read(header: Any, body: Any, frame: bytes) -> Any:
    """Header at 0, body after it, as `codec.decode_request` reads a frame."""
    head = header(frame, 0)
    return head, body(frame, head[1])


def _compare(body_class: Any, frame: bytes) -> str:
    """How the two readers did: 'both read', 'both refused' or 'fast refused'.

    Fails the test where the generated reader reads what kio refuses or reads it differently.
    """
    header_class = body_class.__header_schema__
    kio_header, kio_body = entity_reader(header_class), entity_reader(body_class)
    fast_header, fast_body = compiled_reader(header_class), compiled_reader(body_class)
    fast = _attempt(lambda: _frame_read(fast_header, fast_body, frame))
    kio = _kio_after(fast, lambda: _frame_read(kio_header, kio_body, frame))
    if fast[0]:
        assert kio[0], f"the generated reader reads what kio refuses: {frame.hex()} -> {fast[1]}"
        assert same(fast[1], kio[1]), f"{frame.hex()}: fast {fast[1]} != kio {kio[1]}"
        return "both read"
    return "fast refused" if kio[0] else "both refused"


def _compare_body(entity_class: Any, data: bytes) -> bool:
    """Whether kio reads the data; fails where the generated reader does differently."""
    kio_reader, generated_reader = entity_reader(entity_class), compiled_reader(entity_class)
    fast = _attempt(lambda: generated_reader(data, 0))
    kio = _kio_after(fast, lambda: kio_reader(data, 0))
    assert fast[0] == kio[0], f"{entity_class.__name__} {data.hex()}: fast {fast} kio {kio}"
    if fast[0]:
        assert same(fast[1], kio[1]), f"{data.hex()}: fast {fast[1]} != kio {kio[1]}"
    return kio[0]


def _written(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


# ----------------------------------------------------------------------------- requests


def test_every_supported_request_and_header_has_a_generated_reader() -> None:
    for key, version in SUPPORTED_REQUESTS:
        body_class = codec.request_class(key, version)
        for entity_class in (body_class, body_class.__header_schema__):
            assert reader_for(entity_class) is compiled_reader(entity_class)  # type: ignore[arg-type]  # classes are hashable


@pytest.mark.parametrize(("key", "version"), SUPPORTED_REQUESTS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_requests_read_as_kio_reads_them(
    key: int, version: int, data: st.DataObject
) -> None:
    frame = data.draw(request_frames(key, version))
    assert _compare(codec.request_class(key, version), frame) == "both read"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_requests())
def test_damaged_requests_are_refused_or_read_as_kio_reads_them(case: tuple[Any, bytes]) -> None:
    body_class, frame = case
    # Where kio reads a frame the generated reader must read it too: its refusals only cost time.
    assert _compare(body_class, frame) != "fast refused"


def _request(key: int, version: int, client_id: str | None = "c", **values: Any) -> bytes:
    body = codec.build(codec.request_class(key, version), **values)
    return codec.encode_request(body, correlation_id=7, client_id=client_id)[4:]


def topic_records(**values: Any) -> dict[str, Any]:
    return {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} | values


METADATA_V1 = _request(3, 1, topics=[{"name": "a"}, {"name": "bc"}])
METADATA_V12 = _request(
    3,
    12,
    topics=[{"name": "topic-1", "topic_id": None}],
    allow_auto_topic_creation=False,
    include_topic_authorized_operations=False,
)

SEED_FRAMES = [
    # The server benchmark's three requests (bench/server_bench.py).
    _request(19, 7, topics=[topic_records(name="topic-1")], timeout=30_000, validate_only=False),
    METADATA_V12,
    _request(20, 6, topics=[{"name": None, "topic_id": bytes(range(16))}], timeout=30_000),
    _request(20, 6, topics=[{"name": "t", "topic_id": bytes(16)}], timeout=30_000),
    _request(
        19,
        4,
        client_id=None,
        topics=[
            topic_records(
                name="t",
                num_partitions=-1,
                assignments=[{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                configs=[{"name": "k", "value": None}],
            )
        ],
        timeout=500,
        validate_only=True,
    ),
    METADATA_V1,
    API_VERSIONS[4:],
    *(seed[4:] for seed in SEEDS),
    metadata_frame(),
]


@pytest.mark.parametrize("frame", SEED_FRAMES, ids=lambda frame: frame[:4].hex())
def test_every_byte_changed_and_every_cut_is_refused_or_read_as_kio_reads_it(frame: bytes) -> None:
    key, version, _ = codec.peek_header(frame)
    body_class = codec.request_class(key, version)
    outcomes = {_compare(body_class, frame[:cut]) for cut in range(len(frame) + 1)}
    for position, original in enumerate(frame):
        for byte in {0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF, original ^ 1, original + 1 & 0xFF}:
            changed = frame[:position] + bytes([byte]) + frame[position + 1 :]
            outcomes.add(_compare(body_class, changed))
    assert "fast refused" not in outcomes
    assert {"both read", "both refused"} <= outcomes


@pytest.mark.parametrize(
    ("frame", "count"),
    [
        (METADATA_V1, struct.pack(">i", 2**31 - 1)),
        (METADATA_V12, bytes.fromhex("ffffffff0f")),
    ],
)
def test_an_array_count_beyond_the_frame_is_refused_before_its_items(
    frame: bytes, count: bytes
) -> None:
    # kio reserves memory for that many items first: these frames abort it (not run here).
    key, version, _ = codec.peek_header(frame)
    body_class = codec.request_class(key, version)
    _, used = compiled_reader(body_class.__header_schema__)(frame, 0)
    with pytest.raises(ImpossibleCount):
        # The topics come first in the body.
        compiled_reader(body_class)(frame[:used] + count, used)  # type: ignore[arg-type]  # classes are hashable


@pytest.mark.process
def test_a_17_byte_frame_with_a_huge_count_closes_only_its_connection() -> None:
    # Through the whole decoding path, in a child process whose address space is capped, so a
    # regression (kio reserving 2**32 items) fails this test instead of the test run.
    script = """
import resource, struct
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from api.protocol.connection import Close, Connection
frame = struct.pack(">hhih", 3, 12, 1, -1) + b"\\0" + bytes.fromhex("ffffffff0f")
(event,) = Connection().receive(struct.pack(">i", len(frame)) + frame)
assert isinstance(event, Close), event
print(event.reason)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "malformed Metadata v12 request" in done.stdout


def test_only_bytes_and_offsets_within_them_are_read() -> None:
    frame = METADATA_V12
    header_class = codec.request_class(3, 12).__header_schema__
    reader = compiled_reader(header_class)
    assert reader(frame, 0) == entity_reader(header_class)(frame, 0)
    for buffer, offset in [(memoryview(frame), 0), (bytearray(frame), 0), (frame, -1)]:
        with pytest.raises(ValueError, match="bytes and an offset"):
            reader(buffer, offset)  # type: ignore[arg-type]  # what the test is about
    with pytest.raises(ValueError, match="bytes and an offset"):
        reader(frame, len(frame) + 1)


# ----------------------------------------------------------------------------- decode_request

_PROTOCOL_FRAMES = [
    *SEED_FRAMES,
    struct.pack(">hhihi", 3, 1, 1, -1, 5),  # a null client id and a truncated body
    bytes.fromhex("00130007000000070008746573740002026600000000010001010100000000ea600100"),
    metadata_frame()[:-1] + bytes([1, 5, 40, 0]),  # a tagged section past the end
    *(
        metadata_frame()[:index] + bytes([2, 5, 1, 0, 99, 2, 1, 1]) + metadata_frame()[rest:]
        for index, rest in [(22, 23), (len(metadata_frame()) - 4, -3)]
    ),
    metadata_frame()[:-1] + bytes([2, 5, 1, 0, 99, 2, 1, 1]),  # unknown tags: kio strips them
]


def _decoded(frame: bytes) -> Any:
    try:
        return codec.decode_request(frame)
    except codec.ProtocolError as exc:
        return str(exc)


@pytest.mark.parametrize("frame", _PROTOCOL_FRAMES, ids=lambda frame: frame[:4].hex())
def test_decode_request_through_the_generated_reader_answers_as_through_kio(
    frame: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    through_kio = _decoded(frame)
    monkeypatch.setattr(codec, "_read", read_request)
    through_fast = _decoded(frame)
    if isinstance(through_kio, str):
        assert through_fast == through_kio
    else:
        assert same(through_fast.header, through_kio.header)
        assert same(through_fast.body, through_kio.body)


# ----------------------------------------------------------------------------- other entities

RESPONSES = [codec.response_class(key, version) for key, version in SUPPORTED_REQUESTS]


@pytest.mark.parametrize("entity_class", RESPONSES, ids=[f"{k}v{v}" for k, v in SUPPORTED_REQUESTS])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_responses_read_as_kio_reads_them(entity_class: Any, data: st.DataObject) -> None:
    # Responses have the types requests lack: error codes, non-null UUIDs, int64s, tags.
    written = _written(data.draw(entities(entity_class)))
    assert _compare_body(entity_class, written)
    cut = data.draw(st.integers(0, len(written)))
    _compare_body(entity_class, written[:cut])


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Inner:
    __flexible__: ClassVar[bool] = True
    a: i8 = dataclasses.field(metadata={"kafka_type": "int8"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Tagged:
    __flexible__: ClassVar[bool] = True
    xs: tuple[str, ...] = dataclasses.field(metadata={"kafka_type": "string"})
    inner: _Inner | None = dataclasses.field(metadata={"kafka_type": "entity"})
    t: i32 = dataclasses.field(metadata={"kafka_type": "int32", "tag": 3}, default=i32(7))
    s: str | None = dataclasses.field(metadata={"kafka_type": "string", "tag": 5}, default=None)
    e: _Inner | None = dataclasses.field(metadata={"kafka_type": "entity", "tag": 6}, default=None)


@pytest.mark.parametrize(
    ("hex_data", "read"),
    [
        ("00ff00", True),  # a null array, a null entity, no tags
        ("010105000000", True),  # an entity after marker 1 (the last byte is not read)
        ("01fe050000", True),  # any marker but -1 is followed by an entity
        ("0302610262ff00", True),  # two strings
        ("0201ff00", True),  # an empty string
        ("0200ff00", False),  # a null string in a non-nullable array
        ("028180808000ff00", True),  # an empty string's length in 5 bytes
        ("02808080808000ff00", False),  # a varint of 6 bytes
        ("01ff0103040000000900", True),  # tag 3
        ("01ff01036300000009", True),  # its size is not checked
        ("01ff0203040000000903040000000a", True),  # a repeated tag: the last value
        ("01ff01050100", False),  # a tagged string is not nullable
        ("01ff01050201", True),
        ("01ff010601ff", True),  # a tagged entity has a marker
        ("01ff010603010400", True),
        ("01ff0106030400", False),
        ("01ff010900", False),  # an unknown tag
        ("01ff8000", True),  # no tags, counted in two bytes
        ("01ff", False),
        ("020361ff00", False),  # a string past the end
        ("0203ffff00ff00", False),  # not UTF-8
        ("0205eda080ff00", False),  # a surrogate: not UTF-8 for Rust or Python
    ],
)
def test_tagged_fields_markers_and_lengths_read_as_kio_reads_them(
    hex_data: str, read: bool
) -> None:
    assert _compare_body(_Tagged, bytes.fromhex(hex_data)) is read


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=24))
def test_any_bytes_are_refused_or_read_as_kio_reads_them(data: bytes) -> None:
    _compare_body(_Tagged, data)


def test_a_class_with_an_unsupported_type_is_read_by_kio() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Dated:
        __flexible__: ClassVar[bool] = False
        at: datetime.datetime = dataclasses.field(metadata={"kafka_type": "datetime_i64"})

    with pytest.raises(Unsupported):
        compiled_reader(Dated)
    assert reader_for(Dated) is entity_reader(Dated)  # type: ignore[type-var]  # no kio entity
