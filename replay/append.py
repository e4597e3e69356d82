"""Appending to the log only a batch that replays onto the log's image."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from metadata_log.log import MetadataLog
from records.model import Record
from replay.delta import MetadataDelta
from replay.errors import ReplayError
from replay.image import MetadataImage
from replay.loader import load_image, locate


def check_batch(image: MetadataImage, records: Sequence[Record], *, first_offset: int) -> None:
    """Raise a located `ReplayError` unless `records`, one batch at `first_offset`, replay.

    Every rule is checked, those of a whole batch too; `image` is not changed.
    """
    delta = MetadataDelta(image)
    try:
        delta.replay_all(records)
        delta.finish_batch()
    except ReplayError as exc:
        locate(
            exc,
            records,
            first_offset=first_offset,
            index=delta.records,
            hint="nothing was appended",
        )
        raise


def append_replayed_batches(
    log: MetadataLog,
    batches: Sequence[tuple[Sequence[Record], str | None]],
    *,
    progress: Callable[[int], None] | None = None,
    while_appending: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> tuple[int, int]:
    """Append batches, each with its own principal, as one block if together they replay.

    The log is replayed first (`progress` as in `load_image`): a log that does not replay
    itself takes no appends until it is repaired. The caller holds the log open for writing,
    so no other writer appends between the check and the append. The block is what replay
    checks as a unit (`finish_batch` runs once per block), so the batches are checked
    together; (first offset, last offset) of what was appended. The append itself runs
    inside `while_appending()` (the CLI holds Ctrl-C back there).
    """
    image = load_image(log, progress=progress)
    records = [record for batch, _ in batches for record in batch]
    check_batch(image, records, first_offset=log.end_offset)
    with while_appending():
        results = log.append_batches(batches)
    return results[0][0], results[-1][1]
