"""Building an image from the log: replay of the entries after a base image, up to an offset."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence

from metadata_log.stored_log import StoredLog
from records.codec import RecordBlock
from records.model import Record
from replay.delta import MetadataDelta
from replay.errors import ReplayError, TrimmedLogError
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance

PROGRESS_EVERY = 65_536
"""Entries between two progress callbacks."""

REPAIR_COMMAND = "mlog log truncate --after-offset"
"""The explicit repair of a log that does not replay: drop its entries after an offset."""


def load_image(
    log: StoredLog,
    *,
    lte: int | None = None,
    base: MetadataImage = EMPTY_IMAGE,
    progress: Callable[[int], None] | None = None,
) -> MetadataImage:
    """The image after replaying the entries of `log` that follow `base`, up to offset `lte`.

    `base` is the image of a prefix of this log (empty, or a snapshot); entries after its
    provenance are replayed in one delta. `progress(n)` is called with the number of entries
    replayed since the last call. The cyclic garbage collector is paused meanwhile: replay
    creates millions of long-lived objects and no cycles, and each full collection would
    traverse them all again.

    A record that does not replay stops the load (as KRaft's controller stops on a committed
    record it cannot replay) with its `ReplayError`, located: offset, record, rule, and the
    command that drops the batch holding it. The batch rules are checked at the end of every
    block (a block holds whole batches), except a last block cut short by `lte`.
    """
    gt = base.provenance.offset if base.provenance.offset >= 0 else None
    if base.provenance.offset + 1 < log.log_start_offset and (
        lte is None or lte > base.provenance.offset
    ):
        # A trimmed log: what lies between `base` and the start is gone, never skipped.
        raise TrimmedLogError(log.log_start_offset, base.provenance.offset + 1)
    if lte is not None and gt is not None and lte <= gt:
        return base
    return replay_blocks(base, log.read_records(gt=gt, lte=lte), lte=lte, progress=progress)


def replay_in_slices(
    base: MetadataImage, blocks: Sequence[RecordBlock], *, lte: int, entries: int
) -> Iterator[MetadataImage]:
    """`replay_blocks(base, blocks, lte=lte)` a slice at a time, for a caller that pauses between.

    Yields the image after each slice: whole blocks of `entries` entries or more (a block is
    never split), the next slice replayed onto the image yielded before it. Every block but
    the last is a finished batch, as in one `replay_blocks` call; the last image yielded is
    that call's (`base` if there are no blocks).
    """
    if not blocks:
        yield base
        return
    image = base
    start = 0
    while start < len(blocks):
        end = start
        taken = 0
        while end < len(blocks) and taken < entries:
            taken += len(blocks[end].records)
            end += 1
        final = end == len(blocks)
        image = replay_blocks(image, blocks[start:end], lte=lte if final else None)
        start = end
        yield image


def replay_blocks(
    base: MetadataImage,
    blocks: Iterable[RecordBlock],
    *,
    lte: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> MetadataImage:
    """The image after replaying `blocks` onto `base`: `load_image`'s replay, its blocks given.

    `blocks` are the log's, in order, from the entry after `base` (a quorum follower's are
    the blocks it checked and wrote, decoded once); `lte` is where they were cut (a last
    block ending at `lte` is a whole one, and its batch rules are checked).
    """
    delta = MetadataDelta(base)
    replay_all = delta.replay_all
    finish_batch = delta.finish_batch
    last = None
    pending = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for block in blocks:
            replayed = delta.records
            try:
                replay_all(block.records)
                if lte is None or block.last_offset < lte:
                    finish_batch()
            except ReplayError as exc:
                locate(
                    exc,
                    block.records,
                    first_offset=block.first_offset,
                    index=delta.records - replayed,
                    hint=(
                        "the log holds a record no controller writes (edited by hand, or "
                        "damaged); drop the batch holding it and everything after it with "
                        f"`{REPAIR_COMMAND} {block.first_offset - 1} --force` (its bytes are "
                        "sound, so the cut needs --force)"
                    ),
                )
                raise
            last = block
            if progress is not None:
                pending += len(block.records)
                if pending >= PROGRESS_EVERY:
                    progress(pending)
                    pending = 0
        if last is None:
            return base
        image = delta.apply(
            Provenance(
                offset=last.last_offset, epoch=last.last_epoch, timestamp=last.last_timestamp
            )
        )
    finally:
        if was_enabled:
            gc.enable()
    if progress is not None and pending:
        progress(pending)
    return image


def locate(
    exc: ReplayError, records: Sequence[Record], *, first_offset: int, index: int, hint: str
) -> None:
    """Give `exc` the offset of the record that broke its rule, among `records`.

    `index` is how many records replayed before the error; an error of a batch rule (raised
    after the whole batch replayed) names its record itself, found here by identity.
    """
    if index >= len(records) and exc.record is not None:
        index = next((i for i, r in enumerate(records) if r is exc.record), len(records) - 1)
    index = min(index, len(records) - 1)
    exc.locate(first_offset + index, records[index], hint)
