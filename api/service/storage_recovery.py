"""The service's recovery from a failed log: writes refused, the log re-opened until it works.

Only I/O can fail an append (every value is checked before it reaches the log). Then the
service's working image may hold records the log does not, so `StorageRecovery` refuses every
write with KAFKA_STORAGE_ERROR (56) from then on, reads go on from the committed image over a
read-only log, and (in a server, where an event loop runs) the failed log is closed and
re-opened every `interval_s` seconds: the re-opened log recovers its tail from disk and the
image is replayed from it, because records that were never acknowledged may or may not be on
disk. Writes resume once that succeeds. The failed file is never fsynced again (PostgreSQL's
fsync lesson: a failed fsync may have dropped the dirty pages, so a later successful fsync
proves nothing). One line is logged when the storage fails and one when it heals.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from typing import TYPE_CHECKING, Protocol

from metadata_log.log import MetadataLog
from metadata_log.reader import LogReader
from metadata_log.stored_log import StoredLog
from records.errors import MetadataLogError
from replay.controller.errors import StorageError
from replay.image import MetadataImage

if TYPE_CHECKING:
    # Imported when the first failure is handled: the embedded CLI starts without asyncio.
    import asyncio

logger = logging.getLogger(__name__)

REOPEN_INTERVAL_S = 3.0
"""Seconds between two attempts to re-open a log whose storage failed."""


class RecoveringLog(Protocol):
    """What recovery needs of its service: the log it reads, a re-open, and the new state."""

    log: StoredLog
    """The service's log: the failed one, then a reader over it until re-opened."""

    def open_again(self, old: StoredLog) -> tuple[MetadataLog, MetadataImage]:
        """Open `old`'s directory for writing and replay it (a worker thread)."""
        ...

    def reopened(self, log: MetadataLog, image: MetadataImage) -> None:
        """Take the re-opened log and its replayed image as the service's state."""
        ...


class StorageRecovery:
    """Refuses writes once the log's storage failed, and re-opens the log until it works."""

    def __init__(self, service: RecoveringLog, *, interval_s: float = REOPEN_INTERVAL_S) -> None:
        self._service = service
        self.interval_s = interval_s
        """Seconds between two re-open attempts."""
        self.failure: str | None = None
        """Why writes are refused now (one line), None while they are taken. Read-only here:
        a plain attribute, as every write reads it."""
        self.failures = 0
        """How often the log's storage failed since the start (a metric)."""
        self._reopener: asyncio.Task[None] | None = None
        self._closing = False

    def check(self) -> None:
        """Raise the refusal (`StorageError`) while writes are refused."""
        if self.failure is not None:
            raise self.refusal(self.failure)

    def refusal(self, failure: str) -> StorageError:
        """The error a write is answered with while the storage has failed with `failure`."""
        return StorageError(
            f"the metadata log cannot be written ({failure}); reads still work. "
            f"The service re-opens the log every {self.interval_s:g} s and takes "
            "writes again once that succeeds: retry later, and free space or fix the disk"
        )

    def failed(self, exc: BaseException) -> StorageError:
        """Refuse writes from now on and, in a server, start re-opening the log."""
        import asyncio

        failure = self.failure
        if failure is None:
            self.failure = failure = one_line(exc)
            self.failures += 1
            logger.error(
                "the metadata log cannot be written (%s); writes answer KAFKA_STORAGE_ERROR, "
                "reads go on, re-opening the log every %g s",
                self.failure,
                self.interval_s,
            )
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # embedded mode: one command, nobody to heal for
                loop = None
            if loop is not None and not self._closing:
                self._reopener = loop.create_task(self._reopen_loop())
        return self.refusal(failure)

    async def _reopen_loop(self) -> None:
        import asyncio

        last_error: str | None = None
        try:
            while self.failure is not None and not self._closing:
                await asyncio.sleep(self.interval_s)
                if self._closing:
                    return
                try:
                    await self.reopen()
                except Exception as exc:  # any failure: keep refusing writes, and retry
                    text = one_line(exc)
                    if not isinstance(exc, MetadataLogError | OSError):
                        text = f"{type(exc).__name__}: {text}"
                    if text != last_error:  # one line per state change, not per attempt
                        logger.warning("re-opening the metadata log failed, will retry: %s", text)
                        last_error = text
        finally:
            self._reopener = None

    async def reopen(self) -> None:
        """Close the failed log, open it again (recovering its tail) and replay the image.

        Raises `MetadataLogError` or `OSError` if the storage is still failing; the service
        then keeps refusing writes.
        """
        import asyncio

        service = self._service
        current = service.log
        if not isinstance(current, LogReader):
            await current.aclose()
            service.log = _reader(current)
        log, image = await asyncio.to_thread(service.open_again, service.log)
        service.reopened(log, image)
        self.failure = None
        # WARNING, as the failure's line is an ERROR: an operator who saw one must see the
        # other (a server shows this logger's lines from WARNING up).
        logger.warning(
            "the metadata log was re-opened at end offset %d; writes resume", log.end_offset
        )

    def close(self) -> None:
        """Stop re-opening (the service closes)."""
        self._closing = True
        if self._reopener is not None:
            self._reopener.cancel()

    async def aclose(self) -> None:
        """Stop re-opening and wait for an attempt under way to end."""
        import asyncio

        self._closing = True
        reopener = self._reopener
        if reopener is not None:
            reopener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reopener


def _reader(failed: StoredLog) -> StoredLog:
    """A read-only log over the failed one's directory, so reads of the log go on.

    It holds no lock and stops before a torn tail; the failed writer is closed already.
    """
    try:
        return LogReader.open(failed.directory, config=failed.config, codec=failed.codec)
    except (MetadataLogError, OSError) as exc:
        logger.warning("the metadata log cannot be read either: %s", one_line(exc))
        return failed


def one_line(exc: BaseException) -> str:
    """An I/O failure as one line: the OSError's text and errno name when there is one."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    if isinstance(cause, OSError):
        name = errno.errorcode.get(cause.errno or 0, str(cause.errno))
        return f"{cause.strerror or cause} [{name}]"
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
