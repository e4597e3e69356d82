"""Settings of the segmented log, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from metadata_log.errors import LogConfigError

MIN_SEGMENT_BYTES = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """How the log rolls segments and how densely it indexes them."""

    segment_bytes: int = 64 * 1024 * 1024
    """`segment.bytes`: a new segment starts once the active one would grow past this size."""
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    """`segment.ms`: a new segment starts once the active one's first entry is this old."""
    index_interval_bytes: int = 4096
    """`index.interval.bytes`: bytes between two entries of the sparse indexes."""
    checkpoint_interval_ms: int = 60_000
    """`log.flush.offset.checkpoint.interval.ms`: how often an appending writer rewrites the
    checkpoints (recovery point) besides on every roll and close."""

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise LogConfigError(
                f"segment.bytes must be at least {MIN_SEGMENT_BYTES}, got {self.segment_bytes}"
            )
        if self.segment_ms < 1:
            raise LogConfigError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.checkpoint_interval_ms < 1:
            raise LogConfigError(
                f"log.flush.offset.checkpoint.interval.ms must be at least 1, got "
                f"{self.checkpoint_interval_ms}"
            )
        if self.index_interval_bytes < 0:
            raise LogConfigError(
                f"index.interval.bytes must be 0 or more, got {self.index_interval_bytes}"
            )
