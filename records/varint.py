"""Avro's zig-zag variable-length longs, for the block framing that fastavro does not expose."""

from __future__ import annotations


def encode_long(value: int) -> bytes:
    """Encode `value` as an Avro long (zig-zag, then 7 bits a byte, low bits first)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_long(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode the Avro long at `buf[pos:]`; returns (value, position after it).

    Raises IndexError when the buffer ends inside the number and ValueError when it is longer
    than ten bytes (more than 64 bits), which only damaged data produces.
    """
    shift = 0
    n = 0
    while True:
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("variable-length integer longer than 10 bytes")
    return (n >> 1) ^ -(n & 1), pos
