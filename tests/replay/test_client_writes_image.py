"""`ClientWritesImage`'s equality and its bound: the same clients in the same order, 1,000 kept.

`tests/api/service/test_client_writes.py` replays and answers client writes; these pin that two
tables are equal only with the same clients in the same order, and the default bound of 1,000
clients.
"""

from __future__ import annotations

from records.model import ClientWriteRecord
from records.uuids import Uuid
from replay.image import MAX_CLIENT_WRITES, ClientWritesImage


def write(client: int, sequence: int = 0) -> ClientWriteRecord:
    return ClientWriteRecord(
        client_id=Uuid(client.to_bytes(16, "big")),
        sequence=sequence,
        principal="User:a",
        api_key=19,
        response=b"",
    )


def test_tables_are_equal_only_with_the_same_writes_in_the_same_order() -> None:
    empty = ClientWritesImage()
    one = empty.with_writes([write(1), write(2)])
    assert one == empty.with_writes([write(1), write(2)])
    assert one != empty.with_writes([write(2), write(1)])  # same clients, other order
    assert one != empty.with_writes([write(1)])  # fewer clients
    assert one != empty.with_writes([write(1), write(2, sequence=1)])
    assert one != empty
    assert (one == 3) is False and one != "table"  # not a table: not equal


def test_the_default_bound_is_1000_clients_and_the_oldest_go_first() -> None:
    assert MAX_CLIENT_WRITES == 1000
    table = ClientWritesImage().with_writes([write(i) for i in range(1001)])
    assert len(table) == 1000
    assert table.get(write(0).client_id) is None
    assert table.ordered()[0] == write(1)
