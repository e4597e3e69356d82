"""An admin change's log line is the line `logger.info` would write, however it is made.

`api.server.kafka.base.log_info` makes the line without a record where the server log's
handler is the logger's only way out (`mlog serve`), and is `logger.info` itself anywhere else.
"""

from __future__ import annotations

import io
import logging
import time

from api.server.kafka.base import CHANGE_LINE, HandlerGroup, log_info, logger
from api.server.server_log import LineFormatter, server_log


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _both(args: tuple[str, str, str, str]) -> tuple[logging.LogRecord, logging.LogRecord]:
    """The record of `log_info` and of `logger.info` for the same line, under `server_log`."""
    keep = _Keep()
    with server_log(logger, io.StringIO()):
        logger.addHandler(keep)
        try:
            log_info(CHANGE_LINE, args)
            logger.info(CHANGE_LINE, *args)
        finally:
            logger.removeHandler(keep)
    fast, plain = keep.records
    return fast, plain


def test_with_another_handler_the_record_is_logger_infos_but_for_its_time() -> None:
    fast, plain = _both(("User:alice", "create topic", "payments", "ok"))
    assert fast.__dict__.keys() == plain.__dict__.keys()
    timed = {"created", "msecs", "relativeCreated", "asctime"}  # asctime: set by the writer
    assert {k: v for k, v in fast.__dict__.items() if k not in timed} == {
        k: v for k, v in plain.__dict__.items() if k not in timed
    }
    assert abs(fast.created - plain.created) < 60
    assert abs(fast.relativeCreated - plain.relativeCreated) < 60_000
    formatter = LineFormatter()
    assert (
        formatter.formatMessage(_with_message(fast)).split(" ", 2)[2]
        == (formatter.formatMessage(_with_message(plain)).split(" ", 2)[2])
    )


def test_each_record_has_its_own_time_and_message() -> None:
    first, _ = _both(("User:a", "delete topic", "one", "ok"))
    time.sleep(0.01)
    second, _ = _both(("User:b", "create topic", "two\nforged", "TOPIC_ALREADY_EXISTS"))
    assert first.getMessage() == "User:a delete topic one: ok"
    assert second.getMessage() == "User:b create topic two\nforged: TOPIC_ALREADY_EXISTS"
    assert second.created > first.created
    assert first.__dict__ is not second.__dict__


def test_the_server_log_writes_one_escaped_line_per_change() -> None:
    stream = io.StringIO()
    with server_log(logger, stream):
        HandlerGroup._log_change(
            None,  # type: ignore[arg-type]  # the method uses nothing of its group
            "User:x",
            "create topic",
            [("a\nb", 0), ("c", 36)],
        )
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO User:x create topic a\\nb: ok",
        "INFO User:x create topic c: TOPIC_ALREADY_EXISTS",
    ]


def test_outside_the_server_the_line_goes_through_logger_info() -> None:
    """Where the caller is looked up (pytest's logging), the record names this test's caller."""
    keep = _Keep()
    logger.addHandler(keep)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        log_info(CHANGE_LINE, ("User:x", "create topic", "t", "ok"))
    finally:
        logger.setLevel(level)
        logger.removeHandler(keep)
    (record,) = keep.records
    assert record.getMessage() == "User:x create topic t: ok"
    assert record.filename == "base.py"  # made by logger.info, which looked up its caller


def _with_message(record: logging.LogRecord) -> logging.LogRecord:
    record.message = record.getMessage()
    record.asctime = "-"
    return record


def test_only_control_characters_and_line_breaks_are_escaped() -> None:
    record = logging.LogRecord(logger.name, logging.INFO, "", 0, CHANGE_LINE, None, None)
    names = {
        "plain": "plain",
        "nbsp\xa0zero-width\u200bé": "nbsp\xa0zero-width\u200bé",  # unprintable, not control
        "nel\x85del\x7fnul\x00": "nel\\x85del\\x7fnul\\x00",
        "ls\u2028ps\u2029cr\r": "ls\\u2028ps\\u2029cr\\r",
    }
    formatter = LineFormatter()
    for name, written in names.items():
        record.args = ("User:x", "create topic", name, "ok")
        line = formatter.format(record)
        assert line.split(" ", 3)[3] == f"User:x create topic {written}: ok"


def test_the_line_made_without_a_record_is_logger_infos_line() -> None:
    stream = io.StringIO()
    names = ["payments", "tab\there", "nel\x85", "ls\u2028"]
    with server_log(logger, stream):
        for name in names:
            args = ("User:alice", "create topic", name, "ok")
            log_info(CHANGE_LINE, args)  # the only handler: no record made
            logger.info(CHANGE_LINE, *args)  # a record, formatted by the handler
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 * len(names)
    for made, logged in zip(lines[::2], lines[1::2], strict=True):
        assert made.split(" ", 2)[2] == logged.split(" ", 2)[2]
        assert time.strptime(made.split(",", 1)[0], "%Y-%m-%d %H:%M:%S")
        assert len(made.split(" ", 2)[1].split(",")[1]) == 3  # milliseconds, as logging's
    assert lines[2].split(" ", 2)[2] == "INFO User:alice create topic tab\\there: ok"
