"""The server's log lines (`mlog serve`): one per start, stop and admin change, on a stream.

A line is formatted where it is logged (the event loop, for an admin change) and queued as
text; a writer thread wakes on the first of a burst, lets the burst queue up for
`BATCH_WAIT`, and writes it with one call: a slow stream never stalls the loop, and a burst of
admin changes costs one wake-up and one write, not one per line (lines appear up to
`BATCH_WAIT` late). The writer shares the interpreter lock with the loop, so it only joins
text: formatting there held the lock ~3% of a busy server's run, on top of the hand-offs
(`server_bench`: 5% more admin writes/s without the change lines). The timestamp text is made
once per second; records carry no caller, thread or process lookups (the logging HOWTO's
optimisations, for what the format never shows), and an admin change's line is made with no
record at all where this handler is the logger's only way out (`QueueingHandler.emit_info`).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(message)s"

BATCH_WAIT = 0.02
"""Seconds the writer waits after the first of a burst of lines before writing them all."""

_LOGGING_FLAGS: dict[str, object] = {
    "_srcfile": None,
    "logThreads": False,
    "logProcesses": False,
    "logMultiprocessing": False,
}


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Characters that could end a line or rewrite the terminal: escaped in messages."""


def _escaped(char: re.Match[str]) -> str:
    return char.group().encode("unicode_escape").decode("ascii")


class LineFormatter(logging.Formatter):
    r"""`FORMAT` with `logging`'s own timestamp text, made once per second, not per line.

    A message holds names clients sent (a refused topic name, a principal): its control
    characters are escaped (as `\n` and `\x00`), so one change is one line and a client cannot
    forge a line of its own.
    """

    def __init__(self) -> None:
        super().__init__(FORMAT)
        self._second: tuple[int, str] = (-1, "")
        """The last second formatted and its text, one tuple: threads format lines at once."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """`logging.Formatter.formatTime`'s text (`datefmt` is not used by `FORMAT`)."""
        return f"{self._second_text(int(record.created))},{int(record.msecs):03d}"  # "%s,%03d"

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        """The line before any exception text, with control characters escaped."""
        return _escaped_line(f"{record.asctime} {record.levelname} {record.message}")

    def info_line(self, message: str, created: float) -> str:
        """The line `format` gives an INFO record of `message` made at `created`.

        Only the message is looked at for characters to escape: the time and level before it
        are printable, and a scan costs by the character (an admin change's line, every write).
        """
        second = int(created)
        cached = self._second
        text = cached[1] if cached[0] == second else self._second_text(second)
        return f"{text},{_MILLIS[int((created - second) * 1000)]} INFO {_escaped_line(message)}"

    def _second_text(self, second: int) -> str:
        """`logging`'s text of a second since the epoch, made once per second."""
        cached = self._second
        if cached[0] != second:
            # Replaced whole: a thread reading meanwhile sees a second and its own text.
            cached = (second, time.strftime(self.default_time_format, self.converter(second)))
            self._second = cached
        return cached[1]

    def format(self, record: logging.LogRecord) -> str:
        """`logging.Formatter.format` for `FORMAT`, without its per-line generic steps.

        The same text: the message, the time, the line (escaped), then any exception and
        stack text on the lines after it. The base class asks the format whether it shows
        the time and formats through a `%` mapping of every attribute, each line: about
        half of a line's formatting.
        """
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        line = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line = f"{line}\n{record.exc_text}"
        if record.stack_info:
            line = f"{line}\n{self.formatStack(record.stack_info)}"
        return line


_MILLIS = tuple(f"{n:03d}" for n in range(1001))
"""The milliseconds of a line's time, as `%03d` writes them (1000: a time a rounding short of
the next second, as `logging` computes it)."""


def _escaped_line(line: str) -> str:
    """`line` (a whole line, or the message of one) with its control characters escaped."""
    # A printable line holds none of `_CONTROL` (all are unprintable): one C pass over it,
    # where the search runs the pattern's character class at every position.
    if line.isprintable() or not _CONTROL.search(line):
        return line
    return _CONTROL.sub(_escaped, line)


def direct_handler(logger: logging.Logger) -> QueueingHandler | None:
    """The writer's handler if it is `logger`'s only way out, or None.

    Then a record may be given to it directly (`emit`), skipping `Logger.handle`'s walk of
    filters, handlers and locks, with the same result: no filter, no other handler, no parent
    (`server_log` turns propagation off), a queue that needs no lock.
    """
    handlers = logger.handlers
    if len(handlers) != 1 or logger.propagate or logger.filters or logger.disabled:
        return None
    handler = handlers[0]
    if type(handler) is not QueueingHandler or handler.filters or handler.level > logging.INFO:
        return None
    return handler


class QueueingHandler(logging.Handler):
    """Formats each record where it is logged and puts its text on the writer's queue."""

    def __init__(self, lines: queue.SimpleQueue[str | None]) -> None:
        super().__init__()
        self._lines = lines
        self._formatter = LineFormatter()

    def emit(self, record: logging.LogRecord) -> None:
        """Queue the record's line (and its exception's text, formatted while current)."""
        self._lines.put(self._formatter.format(record))

    def emit_info(self, message: str) -> None:
        """Queue the line of an INFO record of `message` made now, without the record."""
        self._lines.put(self._formatter.info_line(message, time.time()))


class _Writer(threading.Thread):
    """Writes queued lines in batches until it takes the end marker (None)."""

    def __init__(self, lines: queue.SimpleQueue[str | None], stream: TextIO) -> None:
        super().__init__(name="mlog-log-writer", daemon=True)
        self._queued = lines
        self._stream = stream

    def run(self) -> None:
        queued = self._queued
        while True:
            batch = [queued.get()]
            if batch[0] is not None:
                # Let a burst queue up: one wake-up per burst, not one per line (every wake-up
                # takes the interpreter lock from the event loop).
                time.sleep(BATCH_WAIT)
            while True:
                try:
                    batch.append(queued.get_nowait())
                except queue.Empty:
                    break
            lines = [line for line in batch if line is not None]
            if lines:
                try:
                    self._stream.write("\n".join(lines) + "\n")
                    self._stream.flush()
                except (OSError, ValueError):  # a closed stream: the lines are lost, not the server
                    pass
            if batch[-1] is None:  # put last, after the handler is gone
                return


@contextmanager
def server_log(
    logger: logging.Logger, stream: TextIO, *, also: Sequence[logging.Logger] = ()
) -> Iterator[None]:
    """Send the INFO and higher lines of `logger` (and of `also`) to `stream` through the writer.

    `also`: the other loggers of a serving process (the service's snapshots, retention and
    broker sessions, the log's segments and recovery), whose lines are the server's too:
    the same timestamped form, in the same stream, INFO included. Each gets the one handler
    and stops propagating (no second copy through the root's handler).

    On exit every queued line is written, and the loggers and `logging`'s module flags are
    restored.
    """
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    handler = QueueingHandler(lines)
    writer = _Writer(lines, stream)
    saved = {name: getattr(logging, name) for name in _LOGGING_FLAGS}
    for name, value in _LOGGING_FLAGS.items():
        setattr(logging, name, value)
    loggers = [logger, *(other for other in also if other is not logger)]
    before = [(each.level, each.propagate) for each in loggers]
    for each in loggers:
        each.setLevel(logging.INFO)
        each.addHandler(handler)
        each.propagate = False
    writer.start()
    try:
        yield
    finally:
        for each, (level, propagate) in zip(loggers, before, strict=True):
            each.removeHandler(handler)
            each.setLevel(level)
            each.propagate = propagate
        lines.put(None)
        writer.join()
        for name, value in saved.items():
            setattr(logging, name, value)
