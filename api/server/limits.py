"""The server's limits on connections, with Kafka's names, and the bookkeeping that enforces them.

- `queued.max.request.bytes`: request bytes all logged-in connections together may hold while
  reading. A frame counts by the bytes that have arrived, not by the size it claims (a claim
  alone costs nothing: six sockets sending only a size hold nothing). A connection that would
  take the pool past its capacity stops being read and waits until memory is released, as
  Kafka mutes a channel its memory pool cannot serve; it pushes no other connection out. A
  frame claiming more than the whole pool could never be read: its connection is closed.
- Before a SASL login ends a connection's bytes count against its listener's own pre-login
  pool (`PRELOGIN_BYTES`, frames at most `sasl.server.max.receive.size`), never against the
  pool of logged-in connections: anonymous claims cannot starve authenticated clients.
- `connections.max.idle.ms`: a connection that completes no request (and has no answer taken by
  its client) for this long is closed; bytes of a frame that never completes do not count, so
  a slowloris connection trickling a request is closed too.
- `max.connections`, `max.connections.per.ip`: a new connection over either is closed at once.
- `sasl.server.max.receive.size` (Kafka's): the largest frame a connection sends before its SASL
  login ends. `sasl.server.authentication.timeout.ms` (ours; Kafka has no server-side bound):
  a connection of a SASL listener whose login has not ended this long after it arrived (after
  its TLS handshake on SASL_SSL) is closed, unless a request of it is being answered.

A connection over a connection limit is closed; what was closed is logged as one summary line per
`SUMMARY_INTERVAL`, never one line per connection (a flood of them must not flood the log).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from records.errors import MetadataLogError
from records.fields import INT32_MAX

DEFAULT_QUEUED_MAX_REQUEST_BYTES = 512 * 1024 * 1024
"""Kafka leaves it unbounded (-1); 512 MiB keeps a handful of 100 MiB frames possible at once."""

DEFAULT_CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000
"""Kafka's default: 10 minutes."""

DEFAULT_MAX_CONNECTIONS_PER_IP = INT32_MAX
"""Kafka's default: no limit per address."""

FD_RESERVE = 256
"""Open files kept back from connections for the log's segments, indexes and the database."""

DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE = 524288
"""Kafka's default `sasl.server.max.receive.size`: 512 KiB."""

DEFAULT_SASL_SERVER_AUTHENTICATION_TIMEOUT_MS = 10_000
"""Milliseconds a connection has to end its SASL login (a login takes a few round trips)."""

PRELOGIN_BYTES = 32 * 1024 * 1024
"""Request bytes the connections of one SASL listener may hold together before their logins end
(64 frames of Kafka's `sasl.server.max.receive.size`); capped at `queued.max.request.bytes`.
When full, the oldest idle connection of the address holding most gives way (login_guard.py)."""

WAKE_SHARE = 64 * 1024
"""Bytes of headroom each waiting connection woken by a release is counted on (one read's worth):
a release wakes as many waiters as the free memory can take, at least one."""

SUMMARY_INTERVAL = 10.0
"""Seconds between two summary lines of connections closed over a limit."""


class LimitsError(MetadataLogError):
    """A server limit (flag or environment variable) has an invalid value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """The limits a `MetadataServer` enforces on its connections."""

    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_connections: int | None = None
    """None: as many as the open-file limit allows, less `FD_RESERVE`."""
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    sasl_server_max_receive_size: int = DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
    sasl_server_authentication_timeout_ms: int = DEFAULT_SASL_SERVER_AUTHENTICATION_TIMEOUT_MS

    @property
    def prelogin_bytes(self) -> int:
        """A SASL listener's pre-login pool: `PRELOGIN_BYTES`, one frame at least, capped."""
        wanted = max(PRELOGIN_BYTES, self.sasl_server_max_receive_size)
        return min(wanted, self.queued_max_request_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitSpec:
    """How one limit is named and which values it takes."""

    key: str
    """Kafka's name."""
    low: int
    high: int = INT32_MAX
    unit: str = ""

    @property
    def flag(self) -> str:
        """The `mlog serve` flag: the key with dashes."""
        return "--" + self.key.replace(".", "-")

    @property
    def env(self) -> str:
        """The environment variable: `MLOG_` and the key in capitals with underscores."""
        return "MLOG_" + self.key.replace(".", "_").upper()

    def parse(self, text: str) -> int:
        """The value of `text`, or ValueError saying what is wrong (without the flag's name)."""
        try:
            value = int(text)
        except ValueError:
            unit = f" ({self.unit})" if self.unit else ""
            raise ValueError(f"{text!r} is not an integer{unit}") from None
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is outside {self.low}..{self.high}")
        return value


QUEUED_MAX_REQUEST_BYTES = LimitSpec(key="queued.max.request.bytes", low=1024, unit="bytes")
CONNECTIONS_MAX_IDLE_MS = LimitSpec(key="connections.max.idle.ms", low=1, unit="milliseconds")
MAX_CONNECTIONS = LimitSpec(key="max.connections", low=1)
MAX_CONNECTIONS_PER_IP = LimitSpec(key="max.connections.per.ip", low=1)

SASL_SERVER_MAX_RECEIVE_SIZE = LimitSpec(key="sasl.server.max.receive.size", low=1024, unit="bytes")
SASL_SERVER_AUTHENTICATION_TIMEOUT_MS = LimitSpec(
    key="sasl.server.authentication.timeout.ms", low=1, unit="milliseconds"
)

SPECS = (
    QUEUED_MAX_REQUEST_BYTES,
    CONNECTIONS_MAX_IDLE_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    SASL_SERVER_MAX_RECEIVE_SIZE,
    SASL_SERVER_AUTHENTICATION_TIMEOUT_MS,
)


def resolve_limits(
    flags: Mapping[str, int | None], env: Mapping[str, str], *, max_request_bytes: int
) -> ServerLimits:
    """The limits from flags (by key; None = not given), then `MLOG_*` variables, then defaults.

    `queued.max.request.bytes` below `max_request_bytes` (socket.request.max.bytes) is refused:
    a request of the largest size taken could never be read.
    """
    values: dict[str, int] = {}
    for spec in SPECS:
        given = flags.get(spec.key)
        if given is not None:
            values[spec.key] = given
            continue
        raw = env.get(spec.env, "")
        if raw:
            try:
                values[spec.key] = spec.parse(raw)
            except ValueError as exc:
                raise LimitsError(f"{spec.env} ({spec.key}): {exc}; fix or unset it") from None
    queued = values.get(QUEUED_MAX_REQUEST_BYTES.key, DEFAULT_QUEUED_MAX_REQUEST_BYTES)
    if queued < max_request_bytes:
        raise LimitsError(
            f"{QUEUED_MAX_REQUEST_BYTES.key}={queued} is below "
            f"socket.request.max.bytes={max_request_bytes}: a request of the largest size taken "
            f"could never be read; raise {QUEUED_MAX_REQUEST_BYTES.flag} or lower "
            "--socket-request-max-bytes"
        )
    return ServerLimits(
        queued_max_request_bytes=queued,
        connections_max_idle_ms=values.get(
            CONNECTIONS_MAX_IDLE_MS.key, DEFAULT_CONNECTIONS_MAX_IDLE_MS
        ),
        max_connections=values.get(MAX_CONNECTIONS.key),
        max_connections_per_ip=values.get(
            MAX_CONNECTIONS_PER_IP.key, DEFAULT_MAX_CONNECTIONS_PER_IP
        ),
        sasl_server_max_receive_size=values.get(
            SASL_SERVER_MAX_RECEIVE_SIZE.key, DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
        ),
        sasl_server_authentication_timeout_ms=values.get(
            SASL_SERVER_AUTHENTICATION_TIMEOUT_MS.key,
            DEFAULT_SASL_SERVER_AUTHENTICATION_TIMEOUT_MS,
        ),
    )


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (as far as allowed); the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # some systems cap below the hard limit (macOS: OPEN_MAX); keep what we have
    return soft


def connection_capacity(limits: ServerLimits) -> int:
    """`max.connections`, or what the open-file limit allows when it is not set (or lower)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    by_files = max(1, soft - FD_RESERVE) if soft != resource.RLIM_INFINITY else INT32_MAX
    if limits.max_connections is None:
        return by_files
    return min(limits.max_connections, by_files)


class RequestMemory:
    """The bytes connections hold of requests being read, against a capacity.

    Received bytes are always counted (`hold`): they are in memory already. A connection that
    takes the pool past its capacity is told so and waits (`wait`) with reading stopped; a
    release wakes waiting connections in the order they came, as many as the free memory can
    take (`WAKE_SHARE` each, at least one).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiting: dict[Callable[[], None], None] = {}  # an ordered set of wake-ups

    def change(self, held: int, wanted: int) -> bool:
        """Move a connection's share from `held` to `wanted`; False if that exceeds the cap.

        A refused growth changes nothing. Shrinking always succeeds.
        """
        grown = self.used + wanted - held
        if wanted > held and grown > self.capacity:
            return False
        self.used = grown
        if self._waiting and grown < self.capacity:
            self._wake()
        return True

    def hold(self, held: int, wanted: int, holder: object = None) -> bool:
        """Move a connection's share from `held` to `wanted` (always); False if now over the cap.

        `holder` is the connection (a pool that makes room by closing one keeps track of them).
        """
        used = self.used = self.used + wanted - held
        if used < self.capacity:
            if self._waiting:
                self._wake()
            return True
        return used == self.capacity

    @property
    def waiting(self) -> int:
        """Connections waiting for memory."""
        return len(self._waiting)

    def wait(self, wake: Callable[[], None]) -> None:
        """Call `wake` once memory is released (a connection that stopped reading)."""
        self._waiting[wake] = None

    def forget(self, wake: Callable[[], None]) -> None:
        """No longer wake `wake` (its connection went, or moved to another pool)."""
        self._waiting.pop(wake, None)

    def _wake(self) -> None:
        free = self.capacity - self.used
        while self._waiting:
            wake = next(iter(self._waiting))
            del self._waiting[wake]
            wake()
            free -= WAKE_SHARE
            if free <= 0:
                break


class ConnectionCounts:
    """Open connections in all and per client address, against the two connection limits."""

    def __init__(self, *, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self._per_ip: Counter[str] = Counter()

    def admit(self, ip: str) -> str | None:
        """Count a new connection from `ip`, or return the key of the limit it would exceed."""
        if self.total >= self.max_connections:
            return MAX_CONNECTIONS.key
        if self._per_ip[ip] >= self.max_per_ip:
            return MAX_CONNECTIONS_PER_IP.key
        self.total += 1
        self._per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        """Forget a connection `admit` counted."""
        self.total -= 1
        left = self._per_ip[ip] - 1
        if left:
            self._per_ip[ip] = left
        else:
            del self._per_ip[ip]


class CloseSummary:
    """Logs connections closed over a limit as one line per interval, with counts per limit."""

    def __init__(
        self,
        logger: logging.Logger,
        limits: Mapping[str, int],
        *,
        interval: float = SUMMARY_INTERVAL,
    ) -> None:
        self._logger = logger
        self._limits = dict(limits)
        self._interval = interval
        self._counts: Counter[str] = Counter()
        self._last_line = float("-inf")
        self._flush: asyncio.TimerHandle | None = None
        self.closed_total: Counter[str] = Counter()
        """Every close counted, per limit key, since the server started (for tests and stats)."""

    def count(self, key: str) -> None:
        """Count one connection closed over limit `key`; log now or at the interval's end."""
        self._counts[key] += 1
        self.closed_total[key] += 1
        if self._flush is not None:
            return
        loop = asyncio.get_running_loop()
        due = self._last_line + self._interval
        if loop.time() >= due:
            self.flush()
        else:
            self._flush = loop.call_at(due, self.flush)

    def flush(self) -> None:
        """Log the line of what was counted since the last one (nothing if none)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if not self._counts:
            return
        parts = [
            f"{count} over {key}={self._limits[key]}" for key, count in sorted(self._counts.items())
        ]
        total = sum(self._counts.values())
        self._logger.warning(
            "closed %d connection%s over limits: %s",
            total,
            "" if total == 1 else "s",
            ", ".join(parts),
        )
        self._counts.clear()
        self._last_line = asyncio.get_running_loop().time()
