"""Request and response frames read as kio reads them, without letting kio abort the process.

`read_request` reads a frame with the readers `generated_reader_codegen` generates per kio entity
class, and gives a frame they refuse to kio, so the result or the error is kio's. They are the
server's decoding path for a check kio lacks, not for speed: kio 0.6 reads with native (Rust)
code, and these readers take 1.6 to 2.5 times its time (`bench/decode_bench.py`), but kio
reserves memory for an array's claimed count before reading its items, and a count of about
2**31 or more (five bytes of a 17-byte frame) makes the reservation fail, which aborts the
whole process. The generated readers refuse such a count (`ImpossibleCount`) before kio ever
sees the frame. Tests compare the two readers on random, damaged and truncated frames.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.serial import entity_reader

from api.protocol.generated_reader_codegen import Unsupported, compiled_reader
from api.protocol.generated_reader_runtime import ImpossibleCount, Reader


@cache
def reader_for(entity_class: type[Any]) -> Reader:
    """The generated reader of a class, or kio's reader if a type is unsupported."""
    try:
        return compiled_reader(entity_class)  # type: ignore[arg-type]  # classes are hashable
    except Unsupported:
        return entity_reader(entity_class)


def read_request(
    frame: bytes | memoryview, header_class: type[Any], body_class: type[Any]
) -> tuple[Any, Any]:
    """A request frame's header and body entities, as kio reads them (`codec._read`).

    The generated readers read the frame; where they refuse it, kio reads it, so a refused frame
    gets kio's result or kio's error, except a frame with an array count larger than the
    frame could hold: that raises `ImpossibleCount` and never reaches kio, whose native reader
    reserves memory for the count before reading and aborts the process when it cannot. The
    body's bytes read are not returned: bytes after the body are ignored, as Kafka's own
    parser ignores them.
    """
    if type(frame) is not bytes:
        frame = bytes(frame)
    try:
        header, used = reader_for(header_class)(frame, 0)  # type: ignore[arg-type]
        body, _ = reader_for(body_class)(frame, used)  # type: ignore[arg-type]
    except ImpossibleCount:
        raise  # never for kio: it would reserve memory for the count first
    except Exception:  # any other refusal: kio decides, with its own result or error
        header, used = entity_reader(header_class)(frame, 0)
        body, _ = entity_reader(body_class)(frame, used)
    return header, body


def read_response(frame: bytes | memoryview, body_class: type[Any]) -> tuple[Any, Any]:
    """A response frame's header and body entities, as `read_request` reads a request's.

    A client must not abort on what a server sends either.
    """
    return read_request(frame, body_class.__header_schema__, body_class)
