"""Points in time: an offset from an offset, an epoch-ms or ISO-8601 time, or a CLI argument."""

from __future__ import annotations

from datetime import UTC, datetime

from metadata_log.stored_log import StoredLog
from replay.timetravel.errors import TimeTravelError


def _iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC, for messages."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ISO-8601 (naive = UTC) or an integer of epoch ms."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise TimeTravelError(
            f"{text!r} is not a time: give ISO-8601 (2026-11-22T08:30:00Z) or milliseconds "
            "since the epoch"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def offset_at_time(log: StoredLog, at_time: int) -> int:
    """Offset of the last entry appended at or before `at_time` (ms); -1 if none was."""
    first_after = log.offset_for_time(at_time + 1)
    return log.end_offset - 1 if first_after is None else first_after - 1


def batch_end(log: StoredLog, offset: int) -> int:
    """The last offset of the atomic batch (block) that holds `offset`; `offset` if it ends one.

    Time travel answers only states that existed: a state inside a batch (a topic before its
    partitions) was never committed, so a point inside one means the batch's end.
    """
    if offset < log.log_start_offset or offset >= log.end_offset:
        return offset  # nothing of it here: the caller says why (trimmed, or past the end)
    blocks = log.read_records(gt=offset - 1)
    try:
        for block in blocks:
            return block.last_offset  # trimmed at its start only: its end is the block's
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
    return offset


def resolve_offset(
    log: StoredLog, *, at_offset: int | None = None, at_time: int | str | None = None
) -> int:
    """The offset a point in time names (the last entry when neither is given)."""
    if at_offset is not None and at_time is not None:
        raise TimeTravelError("give at_offset or at_time, not both")
    last = log.end_offset - 1
    if at_time is not None:
        moment = parse_time(at_time) if isinstance(at_time, str) else at_time
        found = offset_at_time(log, moment)
        if found < 0 and log.end_offset > 0 and log.log_start_offset == 0:
            first = next(iter(log.read(lte=0)), None)
            when = "" if first is None else f" (appended at {_iso(first.timestamp)})"
            raise TimeTravelError(
                f"time {at_time!r} is before the log's first entry{when}: nothing was recorded "
                "yet; `--at-offset -1` shows the empty image if that is what you want"
            )
        return found
    if at_offset is None:
        return last
    if at_offset < -1:
        raise TimeTravelError(f"offset {at_offset} is not an offset (must be >= -1)")
    if at_offset > last:
        raise TimeTravelError(
            f"offset {at_offset} is past the end of the log (last offset {last}); "
            "`mlog log segments` shows the offsets"
        )
    return at_offset


def point_offset(log: StoredLog, text: str) -> int:
    """An offset from an argument: an integer is an offset, anything else an ISO-8601 time.

    An offset inside an atomic batch is the batch's end (`batch_end`).
    """
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return batch_end(log, resolve_offset(log, at_offset=int(stripped)))
    try:
        at_time = parse_time(stripped)
    except TimeTravelError:
        # Not parse_time's message: it offers epoch milliseconds, which here read as an offset.
        raise TimeTravelError(
            f"{text!r} is neither an offset (an integer) nor an ISO-8601 time "
            "(2026-11-22T08:30:00Z); an integer here is always an offset, not milliseconds"
        ) from None
    return resolve_offset(log, at_time=at_time)
