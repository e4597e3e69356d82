"""How long the log's writes and fsyncs take, kept as plain bucket counts (no metrics library).

The writing end (`ActiveSegment`) times each block write and each fdatasync; a metrics
exporter (api/server/metrics.py) reads the counts when scraped. Counting costs two clock reads
and a bisect per write, next to a write system call and usually an fsync.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
"""Upper bounds in seconds (a last bucket, +Inf, takes the rest): 100 µs to 2.5 s."""


@dataclass(slots=True)
class LatencyCounts:
    """A histogram of durations: counts per bucket of `LATENCY_BUCKETS` (+Inf last), and the sum.

    Written by one thread (the log's writer, under its write lock) and read by a scrape: a
    scrape may see one observation half counted, never a wrong total later.
    """

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total_seconds: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one duration of `seconds`."""
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total_seconds += seconds

    @property
    def count(self) -> int:
        """How many durations were counted."""
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, count at or below it) per bucket, Prometheus's `le` form, +Inf last."""
        running = 0
        buckets: list[tuple[str, int]] = []
        for bound, count in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self.counts, strict=True):
            running += count
            buckets.append((bound, running))
        return buckets


@dataclass(slots=True)
class LogTimings:
    """The durations of a log's block writes (with their fsync when durable) and fsyncs."""

    append: LatencyCounts = field(default_factory=LatencyCounts)
    """Each block written at the end: the write, and its fdatasync for a durable append."""
    fsync: LatencyCounts = field(default_factory=LatencyCounts)
    """Each fdatasync of the newest segment."""
