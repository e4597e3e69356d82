"""The content checksum's ways of counting rows give one checksum.

`counted` (a table's rows hashed in one loop as they stream by) must count what `add` counts
row by row, also when the rows stop early; `item_digest` is the item digest both sum.
"""

from __future__ import annotations

import hashlib
import marshal

from replay.sql.checksum import PENDING, TOPICS, ContentChecksum, item_digest

ROWS = [(f"{i:022d}", "org" if i % 3 else "", f"topic-{i}") for i in range(500)]


def test_counted_rows_give_the_checksum_of_rows_added_one_by_one() -> None:
    added, counted = ContentChecksum(), ContentChecksum()
    for row in ROWS:
        added.add(TOPICS, row)
    assert list(counted.counted(TOPICS, ROWS)) == ROWS
    assert counted.hexdigest() == added.hexdigest()


def test_rows_left_unread_are_not_counted() -> None:
    added, counted = ContentChecksum(), ContentChecksum()
    for row in ROWS[:10]:
        added.add(PENDING, row)
    rows = counted.counted(PENDING, ROWS)
    for _ in range(10):
        next(rows)
    rows.close()
    assert counted.hexdigest() == added.hexdigest()


def test_an_item_digest_is_blake2b_of_16_bytes_read_big_endian() -> None:
    data = marshal.dumps(ROWS[0], 0)
    digest = hashlib.blake2b(data, digest_size=16).digest()
    assert item_digest(data) == int.from_bytes(digest, "big")
