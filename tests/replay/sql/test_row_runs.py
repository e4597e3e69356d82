"""The compiled run builder's own C: the checksum's digest and the topic id decoder.

A run's digest must be the one `checksum.item_digest` gives (a wrong one fails every compiled
load's checksum, which the store tests would show as damage); here it is held to hashlib's
BLAKE2b at every length around its 128-byte blocks and with every bit of a block flipped. The id
decoder must give the bytes `ids.parse_id` gives, and leave to it any text that is not an id's
own (a character outside the URL-safe alphabet, spare bits set), which it names.
"""

from __future__ import annotations

import base64
import random
import string
from typing import Any

import pytest

from replay.sql.checksum import item_digest
from replay.sql.errors import SnapshotContentError
from replay.sql.ids import parse_id
from tests.support.sweeps import swept

compiled: Any = pytest.importorskip("replay.sql._row_runs")

URL_SAFE = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


@pytest.mark.parametrize("size", swept(range(0, 520)))
def test_the_digest_is_blake2b_of_16_bytes_at_every_length(size: int) -> None:
    data = random.Random(size).randbytes(size)
    assert compiled.blake2b_128(data) == item_digest(data)


def test_every_flipped_bit_of_two_blocks_changes_the_digest_as_hashlib_does() -> None:
    data = bytearray(random.Random(7).randbytes(256))
    seen = set()
    for bit in swept(range(len(data) * 8)):
        data[bit // 8] ^= 1 << (bit % 8)
        digest = compiled.blake2b_128(bytes(data))
        assert digest == item_digest(bytes(data))
        seen.add(digest)
        data[bit // 8] ^= 1 << (bit % 8)
    assert len(seen) == len(swept(range(len(data) * 8)))


def test_an_id_decodes_to_the_bytes_parse_id_gives() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        raw = rng.randbytes(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        assert compiled.decode_id(text) == raw == parse_id(text, "topic id").bytes


@pytest.mark.parametrize("last", URL_SAFE)
def test_every_last_character_is_taken_or_refused_as_parse_id_does(last: str) -> None:
    # Its low four bits are past the id's 128: set, the text is not an id's own (another text
    # of the same 16 bytes), and both refuse it; clear, both decode the same bytes.
    text = "AbCdEfGhIjKlMnOpQrStU" + last
    if URL_SAFE.index(last) & 0xF:
        assert compiled.decode_id(text) is None
        with pytest.raises(SnapshotContentError, match="is not a 22-character id"):
            parse_id(text, "topic id")
    else:
        assert compiled.decode_id(text) == parse_id(text, "topic id").bytes


@pytest.mark.parametrize("odd", ["+", "/", "=", "!", " ", ".", "\x7f"])
def test_a_character_outside_the_url_safe_alphabet_is_left_to_parse_id(odd: str) -> None:
    assert compiled.decode_id("A" * 10 + odd + "A" * 11) is None
