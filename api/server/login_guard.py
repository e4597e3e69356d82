"""Bounds on what logins cost before authentication: their threads, per source, and their log.

- `LoginPool`: a PLAIN login derives a key (PBKDF2); it runs on a small pool of its own
  (`LOGIN_THREADS`), never on the default executor that FetchLog and ImageAt use, and one
  client address has at most `LOGINS_PER_IP` derivations queued or running at a time (its
  other logins wait their turn, their connections unread meanwhile). A crowd of guessers from
  one address then costs others a couple of derivations' time, not a queue of thousands.
- `SourceSlots`: a count per client address against a bound (logins, TLS handshakes).
- `FailedLogins`: failed logins logged with the user name given (made printable) and the
  client address, the first of an interval at once and the rest as one summary line at the
  interval's end, never one WARNING per failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

LOGIN_THREADS = 2
"""Threads for key derivations of logins (the machine's other work keeps its own executor)."""

LOGINS_PER_IP = 2
"""Key derivations one client address may have queued or running at once."""

SUMMARY_INTERVAL = 10.0
"""Seconds between two summary lines of failed logins."""

SUMMARY_SOURCES = 5
"""(listener, address, user) entries named in a summary line; the rest are counted."""

T = TypeVar("T")


class SourceSlots:
    """Slots taken per client address, at most `per_source` each."""

    def __init__(self, per_source: int) -> None:
        self.per_source = per_source
        self._taken: Counter[str] = Counter()

    def take(self, source: str) -> bool:
        """Take a slot for `source`; False (nothing taken) when it has all of its slots."""
        if self._taken[source] >= self.per_source:
            return False
        self._taken[source] += 1
        return True

    def give_back(self, source: str) -> None:
        """Return a slot `take` gave."""
        left = self._taken[source] - 1
        if left > 0:
            self._taken[source] = left
        else:
            del self._taken[source]

    def taken(self, source: str) -> int:
        """Slots `source` holds."""
        return self._taken.get(source, 0)


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
