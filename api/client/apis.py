"""What every area of `AdminClient` builds on: a write sent once, Metadata, field bounds.

The areas (`topics`, `configs`, `security_apis`, `brokers`, `features`, `log_apis`,
`quorum_apis`) each subclass `ClientApis` and call `self.write` for a Kafka write API;
`AdminClient` puts `writes.IdempotentWrites` in front of them, which makes every write
idempotent (one write id, retried at the controller). The retry pacing is defined here
because the voter changes (`quorum_apis`) pace theirs the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Self

from api.client.connection import (
    DEFAULT_TIMEOUT_MS,
    ClientConnection,
    ClientError,
    RemoteError,
    known_error_code,
)
from records.fields import INT32_MAX, INT32_MIN
from records.uuids import Uuid
from replay.controller.commands import Outcome, TopicRef
from replay.controller.limits import INT16_MAX

WRITE_ATTEMPTS = 12
"""How many times a write is sent at most: a first attempt and eleven retries (same write id)."""

RETRY_BACKOFF_S = 0.05
"""The pause before a write's first retry; it doubles for each next one, up to
`RETRY_BACKOFF_MAX_S` (Kafka's `retry.backoff.ms` and `retry.backoff.max.ms`, KIP-580)."""

RETRY_BACKOFF_MAX_S = 0.25
"""The longest pause between two attempts of a write. An election takes about the fetch
timeout (2 s); a longer pause would add most of itself to a failover (pauses of 0.8 and 1.6 s
made a kill -9 of the leader cost 3.2 s instead of 2.1 s, `bench/quorum_bench.py`)."""

INT16_RANGE = (-INT16_MAX - 1, INT16_MAX)
"""What an int16 field of a request holds."""

INT32_RANGE = (INT32_MIN, INT32_MAX)
"""What an int32 field of a request holds."""


def fits(values: Any, bounds: tuple[int, int], what: str) -> None:
    """Refuse locally a value the request's field cannot carry (else `struct.error` later)."""
    low, high = bounds
    for value in values if isinstance(values, list | tuple) else (values,):
        if not low <= value <= high:
            raise ClientError(
                f"{what} {value} cannot be sent: the protocol field holds {low}..{high}"
            )


def outcome(code: Any, message: str | None) -> Outcome:
    """An answer's code and message as an `Outcome` (a code unknown here: UNKNOWN_SERVER_ERROR)."""
    error = known_error_code(int(code))
    return Outcome(error_code=error, error_message=message if error else None)


def uuid_of(value: Any) -> Uuid:
    """A kio UUID field (None for the zero id) as our Uuid."""
    return Uuid.ZERO if value is None else Uuid(value.bytes)


class ClientApis(ClientConnection):
    """The base of each `AdminClient` area: a write sent once, Metadata, topic names."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        super().__init__(reader, writer, client_id=client_id, timeout_ms=timeout_ms)
        self._start_area()

    def _start_area(self) -> None:
        """Set up an area's own state: an area that has some extends this (calling super())."""

    async def _connect_alike(self, address: str, wait: float) -> Self:
        """A new client to `address` with this one's id, timeout and security, within `wait` s."""
        async with asyncio.timeout(wait):
            return await type(self).connect(
                address,
                client_id=self.client_id,
                timeout_ms=self.timeout_ms,
                security=self.security,
            )

    async def write(self, api_key: int, **values: Any) -> Any:
        """A Kafka write API, sent once; `AdminClient.write` makes it idempotent (retried)."""
        return await self.request(api_key, **values)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """Every API the server answers, with its version range (from the connect)."""
        return dict(self._versions)

    async def metadata(
        self, topics: Sequence[str] | None = None, *, topic_ids: Sequence[Uuid] = ()
    ) -> Any:
        """Brokers, controller and topics (all, or by name, or by id)."""
        wanted: list[dict[str, Any]] | None = None
        if topics is not None or topic_ids:
            wanted = [{"name": n, "topic_id": Uuid.ZERO.bytes} for n in topics or ()]
            wanted += [{"name": None, "topic_id": i.bytes} for i in topic_ids]
        return await self.request(
            3,
            topics=wanted,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    async def topic_name(self, ref: TopicRef) -> str:
        """The name of a topic given by name or id (Metadata by id)."""
        if ref.name is not None:
            return ref.name
        assert ref.topic_id is not None
        (topic,) = (await self.metadata(topic_ids=[ref.topic_id])).topics
        if int(topic.error_code) != 0 or topic.name is None:
            raise RemoteError(
                int(topic.error_code),
                f"UNKNOWN_TOPIC_ID ({int(topic.error_code)}): no topic has id {ref.topic_id}",
            )
        return str(topic.name)
