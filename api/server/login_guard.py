"""Bounds on what logins cost before authentication: their threads, per source, and their log.

- `LoginPool`: a PLAIN login derives a key (PBKDF2); it runs on a small pool of its own
  (`LOGIN_THREADS`), never on the default executor that FetchLog and ImageAt use, and one
  client address has at most `LOGINS_PER_IP` derivations queued or running at a time (its
  other logins wait their turn, their connections unread meanwhile). A crowd of guessers from
  one address then costs others a couple of derivations' time, not a queue of thousands.
- `HandshakeSlots`: TLS handshakes under way per client address, at most a bound at once; the
  address's next connections wait their turn (they are not refused: a crowd of clients behind
  one NAT address all get their handshakes), and a handshake under way for `HANDSHAKE_STALL`
  seconds while others wait gives way (it is closed), so stalled handshakes cannot lock an
  address out until the handshake timeout.
- `PreloginMemory`: a SASL listener's pool of bytes read before logins end. When it is full,
  the connection that needs room is not made to wait: the idlest connection of the address
  holding the most bytes gives way (it is closed), so one address's unfinished frames cannot
  stop another address's logins, and a login from the same address makes that address's oldest
  idle connection go.
- `FailedLogins`: failed logins logged with the user name given (made printable) and the
  client address, the first of an interval at once and the rest as one summary line at the
  interval's end, never one WARNING per failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar, cast

from api.server.limits import RequestMemory

LOGIN_THREADS = 2
"""Threads for key derivations of logins (the machine's other work keeps its own executor)."""

LOGINS_PER_IP = 2
"""Key derivations one client address may have queued or running at once."""

SUMMARY_INTERVAL = 10.0
"""Seconds between two summary lines of failed logins."""

HANDSHAKE_STALL = 2.0
"""Seconds a TLS handshake may be under way before it gives way to one of its address waiting
(a handshake takes milliseconds on a LAN, a few round trips on a WAN)."""

SUMMARY_SOURCES = 5
"""(listener, address, user) entries named in a summary line; the rest are counted."""

T = TypeVar("T")


class HandshakeSlots:
    """TLS handshakes per client address: a bounded number under way, the rest wait in order.

    A connection calls `take` before its handshake and `give_back` after it (done or failed).
    `give_way` (given to `take`) closes the connection: it is called when its handshake has
    been under way for `stall` seconds while another of its address waits; its slot then goes
    to the first waiting one at once.
    """

    def __init__(self, per_source: int, *, stall: float = HANDSHAKE_STALL) -> None:
        self.per_source = per_source
        self.stall = stall
        self._running: dict[str, dict[Callable[[], None], float]] = {}
        """Per address: the handshakes under way (their `give_way`) and when each started."""
        self._waiting: dict[str, deque[tuple[asyncio.Future[None], Callable[[], None]]]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.gave_way = 0
        """Handshakes closed for stalling while others waited, since the start."""

    def running(self, source: str) -> int:
        """Handshakes under way from `source`."""
        return len(self._running.get(source, ()))

    def waiting(self, source: str) -> int:
        """Connections from `source` waiting for a handshake slot."""
        return sum(1 for future, _ in self._waiting.get(source, ()) if not future.done())

    async def take(self, source: str, give_way: Callable[[], None]) -> None:
        """Return once `source` has a slot for the handshake of the connection `give_way` closes."""
        running = self._running.setdefault(source, {})
        if len(running) < self.per_source and not self._waiting.get(source):
            running[give_way] = time.monotonic()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(source, deque()).append((future, give_way))
        self._hand_on(source)  # a slot may be free behind waiters that went away
        self._check(source)
        try:
            await future
        except asyncio.CancelledError:
            if give_way in self._running.get(source, {}):
                self.give_back(source, give_way)  # handed a slot it will not use: pass it on
            self._tidy(source)
            raise

    def give_back(self, source: str, give_way: Callable[[], None]) -> None:
        """The handshake of `give_way`'s connection ended: its slot goes to the next waiting."""
        running = self._running.get(source)
        if running is None or running.pop(give_way, None) is None:
            return  # it gave way: its slot went on already
        self._hand_on(source)
        self._tidy(source)

    def _hand_on(self, source: str) -> None:
        """Give free slots of `source` to its waiting connections, first come first."""
        waiting = self._waiting.get(source)
        running = self._running.setdefault(source, {})
        while waiting and len(running) < self.per_source:
            future, give_way = waiting.popleft()
            if not future.done():  # not cancelled meanwhile
                running[give_way] = time.monotonic()
                future.set_result(None)

    def _check(self, source: str) -> None:
        """While connections wait, close stalled handshakes; look again when the next would be."""
        timer = self._timers.pop(source, None)
        if timer is not None:
            timer.cancel()
        running = self._running.get(source, {})
        now = time.monotonic()
        while self.waiting(source) and running:
            oldest, started = min(running.items(), key=lambda item: item[1])
            if now - started < self.stall:
                loop = asyncio.get_running_loop()
                self._timers[source] = loop.call_later(
                    started + self.stall - now, self._check, source
                )
                return
            del running[oldest]
            self.gave_way += 1
            oldest()
            self._hand_on(source)
        self._tidy(source)

    def _tidy(self, source: str) -> None:
        waiting = self._waiting.get(source)
        while waiting and waiting[0][0].done():
            waiting.popleft()
        if waiting is not None and not waiting:
            del self._waiting[source]
            timer = self._timers.pop(source, None)
            if timer is not None:
                timer.cancel()
        if not self._running.get(source, True):
            del self._running[source]


class PreloginHolder(Protocol):
    """A connection holding bytes in a `PreloginMemory`."""

    @property
    def ip(self) -> str:
        """Its client address."""

    @property
    def idle_since(self) -> float:
        """When it last completed a request (or arrived)."""

    def give_way(self) -> None:
        """Close it at once, its bytes released (`hold(its bytes, 0, it)`) before this returns."""


class PreloginMemory(RequestMemory):
    """A SASL listener's bytes before login, where a full pool makes room instead of waiting.

    The connection giving way is the idlest of the address holding the most (not counting the
    one that needs room); connections holding nothing are never chosen. Only if no other
    connection holds anything does the one that needs room wait, as in `RequestMemory`.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._holders: dict[str, dict[PreloginHolder, int]] = {}
        """Per address: its connections holding bytes, and how many each."""
        self._by_ip: Counter[str] = Counter()
        self.gave_way = 0
        """Connections closed to make room, since the start."""

    def hold(self, held: int, wanted: int, holder: object = None) -> bool:
        """`RequestMemory.hold`, making room when `holder` takes the pool past its capacity."""
        if holder is not None:
            self._track(cast(PreloginHolder, holder), held, wanted)
        if super().hold(held, wanted) or holder is None or wanted <= held:
            return self.used <= self.capacity
        return self._make_room(cast(PreloginHolder, holder))

    def holding(self, ip: str) -> int:
        """Bytes the connections of `ip` hold."""
        return self._by_ip.get(ip, 0)

    def _track(self, holder: PreloginHolder, held: int, wanted: int) -> None:
        ip = holder.ip
        if wanted:
            self._holders.setdefault(ip, {})[holder] = wanted
        else:
            holders = self._holders.get(ip)
            if holders is not None:
                holders.pop(holder, None)
                if not holders:
                    del self._holders[ip]
        left = self._by_ip[ip] + wanted - held
        if left > 0:
            self._by_ip[ip] = left
        else:
            self._by_ip.pop(ip, None)

    def _make_room(self, needs: PreloginHolder) -> bool:
        while self.used > self.capacity:
            victim = self._victim(needs)
            if victim is None:
                return False
            self.gave_way += 1
            victim.give_way()
            if victim in self._holders.get(victim.ip, {}):
                return False  # it kept its bytes: nothing else to do but wait
        return True

    def _victim(self, needs: PreloginHolder) -> PreloginHolder | None:
        """The idlest connection of the address holding the most, other than `needs`."""
        own = self._holders.get(needs.ip, {}).get(needs, 0)
        best_ip = None
        best = 0
        for ip, total in self._by_ip.items():
            others = total - own if ip == needs.ip else total
            if others > best:
                best_ip, best = ip, others
        if best_ip is None:
            return None
        candidates = [h for h in self._holders.get(best_ip, {}) if h is not needs]
        if not candidates:
            return None
        return min(candidates, key=lambda holder: holder.idle_since)


class LoginPool:
    """Runs login work (key derivations) on its own threads, a bounded number per address."""

    def __init__(self, *, threads: int = LOGIN_THREADS, per_ip: int = LOGINS_PER_IP) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mlog-login")
        self._per_ip = per_ip
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._users: Counter[str] = Counter()

    async def run(self, ip: str, work: Callable[[], T]) -> T:
        """`work()` on a login thread, once `ip` has fewer than its bound in flight."""
        slots = self._slots.get(ip)
        if slots is None:
            slots = self._slots[ip] = asyncio.Semaphore(self._per_ip)
        self._users[ip] += 1
        try:
            async with slots:
                return await asyncio.get_running_loop().run_in_executor(self._executor, work)
        finally:
            left = self._users[ip] - 1
            if left:
                self._users[ip] = left
            else:
                del self._users[ip]
                del self._slots[ip]

    def close(self) -> None:
        """Stop the threads (derivations under way finish first)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class SummarizedWarnings:
    """Warnings of one kind: the first of each group per interval at once, the rest summed up.

    A flood (a guesser's failed logins, a crowd of broken TLS handshakes) thus writes a line
    per group and interval, and a summary naming the most frequent sources, never a line each.
    """

    def __init__(
        self, logger: logging.Logger, what: str, *, interval: float = SUMMARY_INTERVAL
    ) -> None:
        self._logger = logger
        self._what = what
        self._interval = interval
        self._logged: set[str] = set()
        self._counts: Counter[str] = Counter()
        self._started = float("-inf")
        self._flush: asyncio.TimerHandle | None = None
        self.total = 0
        """Warnings counted since the start (logged or summed up)."""

    def warn(self, group: str, line: str, source: str) -> None:
        """Log `line` if `group` had none this interval; else count it under `source`."""
        self.total += 1
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now >= self._started + self._interval and self._flush is None:
            self._started = now
            self._logged.clear()
        if group not in self._logged:
            self._logged.add(group)
            self._logger.warning("%s", line)
            return
        self._counts[source] += 1
        if self._flush is None:
            self._flush = loop.call_at(self._started + self._interval, self.flush)

    def flush(self) -> None:
        """Log the summary of what was counted and not logged (nothing if none)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._logged.clear()
        self._started = asyncio.get_running_loop().time()
        if not self._counts:
            return
        total = sum(self._counts.values())
        top = self._counts.most_common(SUMMARY_SOURCES)
        parts = [f"{count} {source}" for source, count in top]
        rest = total - sum(count for _, count in top)
        if rest:
            parts.append(f"{rest} from {len(self._counts) - len(top)} other sources")
        self._logger.warning(
            "%s: %d more in %.0f s: %s", self._what, total, self._interval, "; ".join(parts)
        )
        self._counts.clear()


class FailedLogins:
    """Failed logins, logged with the user name given and the client's address, summed up."""

    def __init__(self, logger: logging.Logger, *, interval: float = SUMMARY_INTERVAL) -> None:
        self._warnings = SummarizedWarnings(logger, "failed authentication", interval=interval)

    @property
    def total(self) -> int:
        """Failed logins since the server started."""
        return self._warnings.total

    def failed(self, *, peer: str, ip: str, listener: str, user: str | None, reason: str) -> None:
        """Count one failed login (`user` printable already, None if none was given)."""
        name = user or "(none given)"
        self._warnings.warn(
            listener,
            f"failed authentication from {peer} on listener {listener}: user {name}: {reason}",
            f"user {name} from {ip} on {listener}",
        )

    def flush(self) -> None:
        """Log the summary of the failures not logged yet."""
        self._warnings.flush()
