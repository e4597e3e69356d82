"""`AdminClient`'s log and time-travel APIs (ours): FetchLog, ImageAt, Diff, History, digests.

The answers carry records and plain values (`api.protocol.private`); `time_travel` turns them
into replay's image, changes and history entries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from api.client.apis import ClientApis
from api.client.time_travel import change_of, history_entry_of, image_from_response, wire_entity
from api.protocol import private
from api.protocol.private import EntryDecoder
from records.entry import LogEntry
from replay.image import MetadataImage
from replay.timetravel import Change, Entity, HistoryEntry


class LogApis(ClientApis):
    """Read the log, follow it, and travel in time through it."""

    def _start_area(self) -> None:
        super()._start_area()
        self._entries = EntryDecoder()

    async def fetch_log(
        self, offset: int, *, max_entries: int = 10_000, max_wait_ms: int = 0
    ) -> tuple[list[LogEntry], int]:
        """(entries from `offset`, the log's next offset); waits up to `max_wait_ms` for one."""
        response = await self.call(
            private.FETCH_LOG,
            private.FetchLog(
                offset=offset,
                max_entries=max_entries,
                max_wait_ms=max_wait_ms,
                schema_id=self._entries.known,
            ),
            timeout_ms=max_wait_ms + self.timeout_ms,
        )
        end = int(response.end_offset)
        entries = self._entries.decode(response.entries, lo=offset, hi=end - 1)
        return entries[:max_entries], end

    async def follow(
        self, offset: int = 0, *, max_wait_ms: int = 10_000
    ) -> AsyncIterator[LogEntry]:
        """Every entry from `offset` on, then each new one as it is committed (forever)."""
        while True:
            entries, end = await self.fetch_log(offset, max_wait_ms=max_wait_ms)
            for entry in entries:
                yield entry
            offset = entries[-1].offset + 1 if entries else min(offset, end)

    async def image_at(
        self, *, at_offset: int | None = None, at_time: str | None = None
    ) -> MetadataImage:
        """The image now, or after an offset, or at a time (ISO-8601 or epoch ms)."""
        request = private.ImageAt(
            at_offset=at_offset, at_time=at_time, schema_id=self._entries.known
        )
        response = await self.call(private.IMAGE_AT, request)
        return image_from_response(response, self._entries)

    async def diff(
        self, from_point: str, to_point: str | None = None
    ) -> tuple[int, int, list[Change]]:
        """(from offset, to offset, changes) between two points of the log."""
        response = await self.call(
            private.DIFF, private.Diff(from_point=from_point, to_point=to_point)
        )
        changes = [change_of(change) for change in response.changes]
        return int(response.from_offset), int(response.to_offset), changes

    async def log_digest(self, offset: int = -1) -> private.LogDigestResponse:
        """The hash chain's digest at `offset` (-1: at the node's committed offset)."""
        response: private.LogDigestResponse = await self.call(
            private.DESCRIBE_LOG_DIGEST, private.DescribeLogDigest(offset=offset)
        )
        return response

    async def history(
        self,
        entity: Entity,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
    ) -> list[HistoryEntry]:
        """Every entry that touched `entity`, oldest first."""
        response = await self.call(
            private.HISTORY,
            private.History(entity=wire_entity(entity), gt=gt, lte=lte, limit=limit),
        )
        return [history_entry_of(entry) for entry in response.entries]
