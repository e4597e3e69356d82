"""ClientWritesDelta: the clients' idempotent writes, in order."""

from __future__ import annotations

from records.model import ClientWriteRecord
from replay.image import ClientWritesImage


class ClientWritesDelta:
    """Idempotent writes replayed since the base image, oldest first."""

    __slots__ = ("_writes", "image")

    def __init__(self, image: ClientWritesImage) -> None:
        self.image = image
        self._writes: list[ClientWriteRecord] = []

    def replay_client_write(self, record: ClientWriteRecord) -> None:
        """A client's idempotent write was applied: it becomes that client's last write.

        Kept in order; `apply` adds them to the table one by one (with the eviction), so
        replaying them in one delta or in many gives the same table.
        """
        self._writes.append(record)

    def apply(self) -> ClientWritesImage:
        """The table with the writes added (the base itself if none)."""
        if not self._writes:
            return self.image
        return self.image.with_writes(self._writes)
