"""Building an image from the log: replay of the entries after a base image, up to an offset."""

from __future__ import annotations

import gc
from collections.abc import Callable

from metadata_log.log import MetadataLog
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance

PROGRESS_EVERY = 65_536
"""Entries between two progress callbacks."""


def load_image(
    log: MetadataLog,
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
    """
    gt = base.provenance.offset if base.provenance.offset >= 0 else None
    if lte is not None and gt is not None and lte <= gt:
        return base
    delta = MetadataDelta(base)
    replay_all = delta.replay_all
    last = None
    pending = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for block in log.read_records(gt=gt, lte=lte):
            replay_all(block.records)
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
