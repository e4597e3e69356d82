"""Images of one log kept between time-travel questions, so the next one replays only a gap.

A process that answers many points of the same log (a console, a server's `ImageAt`, a bench)
gives `travel` one `ImageCache`: the image at the end of each replay's last batch but one is
kept (one batch before the point: a point inside the last batch is not a committed state to
build on), so a next point after it replays only the gap instead of loading a snapshot. Images
are immutable and share what did not change between them; the bound is counted
conservatively anyway (every kept image's partitions, as if none were shared) and the least
recently used go first, but never the newest (the one with the greatest offset): the end of
the log is what a console's present views and a follower of new entries ask for again and
again, and at 1M partitions a bound of two images let every page at a past point push it out
(2.3 s to build again from a snapshot, where the end kept costs the entries since).

A kept image is used only while the log still holds the entry it was built up to (same offset,
epoch and timestamp): a log truncated and written again is not answered from the old one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from metadata_log.stored_log import StoredLog
from replay.image import MetadataImage

MAX_IMAGES = 16
"""Images kept by default."""
MAX_PARTITIONS = 4_000_000
"""Partitions kept by default, summed over the kept images (~0.9 GiB at most, unshared)."""


class ImageCache:
    """The least recently used images of one log, at batch ends (see the module docstring)."""

    def __init__(
        self,
        *,
        max_images: int = MAX_IMAGES,
        max_partitions: int = MAX_PARTITIONS,
    ) -> None:
        if max_images < 1 or max_partitions < 1:
            raise ValueError(
                "max_images and max_partitions must be 1 or more, got "
                f"{max_images} and {max_partitions}"
            )
        self.max_images = max_images
        self.max_partitions = max_partitions
        self._images: OrderedDict[int, tuple[MetadataImage, int]] = OrderedDict()
        self._partitions = 0
        self._directory: Path | None = None
        self._lock = threading.Lock()
        """One caller at a time: a server builds its ImageAt answers on several threads."""
        self.hits = 0
        """Points answered from a kept image (replaying only the gap after it)."""

    def __len__(self) -> int:
        return len(self._images)

    @property
    def partitions(self) -> int:
        """Partitions of the kept images, summed (the bound's measure)."""
        return self._partitions

    def clear(self) -> None:
        """Forget every kept image."""
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._images.clear()
        self._partitions = 0

    def nearest(self, log: StoredLog, target: int) -> MetadataImage | None:
        """The kept image of `log` with the greatest offset at or before `target`, if any."""
        with self._lock:
            return self._nearest(log, target)

    def _nearest(self, log: StoredLog, target: int) -> MetadataImage | None:
        self._for(log)
        best = max((o for o in self._images if o <= target), default=None)
        while best is not None:
            image = self._images[best][0]
            if _matches(log, image):
                self._images.move_to_end(best)
                return image
            self._drop(best)  # the log changed under it: never answered from again
            best = max((o for o in self._images if o <= target), default=None)
        return None

    def add(self, log: StoredLog, image: MetadataImage) -> None:
        """Keep `image` (of `log`, at the end of a batch), dropping the least recently used."""
        with self._lock:
            self._add(log, image)

    def _add(self, log: StoredLog, image: MetadataImage) -> None:
        self._for(log)
        offset = image.provenance.offset
        if offset < 0:
            return
        partitions = image.topics.partition_count()
        if partitions > self.max_partitions:
            return
        if offset in self._images:
            self._drop(offset)
        self._images[offset] = (image, partitions)
        self._partitions += partitions
        newest = max(self._images)
        while len(self._images) > self.max_images or self._partitions > self.max_partitions:
            victim = next(o for o in self._images if o != newest)  # never the newest alone
            self._drop(victim)

    def _for(self, log: StoredLog) -> None:
        """Bind to `log`'s directory; another log's images are forgotten."""
        if self._directory != log.directory:
            self._clear()
            self._directory = log.directory

    def _drop(self, offset: int) -> None:
        _, partitions = self._images.pop(offset)
        self._partitions -= partitions


def _matches(log: StoredLog, image: MetadataImage) -> bool:
    """Whether the log still holds the entry `image` was built up to."""
    provenance = image.provenance
    offset = provenance.offset
    if offset >= log.end_offset or offset < log.log_start_offset:
        return False
    for entry in log.read(gt=offset - 1, lte=offset):
        return entry.epoch == provenance.epoch and entry.timestamp == provenance.timestamp
    return False
