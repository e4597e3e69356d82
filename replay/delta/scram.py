"""ScramDelta: users' SCRAM credentials set and removed, per (user, mechanism)."""

from __future__ import annotations

from records.model import (
    RemoveUserScramCredentialRecord,
    ScramMechanism,
    UserScramCredentialRecord,
)
from replay.delta.maps import updated
from replay.errors import ScramReplayError
from replay.image import ScramImage, ScramKey
from replay.rules import scram_problem


class ScramDelta:
    """SCRAM credentials set (the record) and removed (None) since the base image."""

    __slots__ = ("_scram", "image")

    def __init__(self, image: ScramImage) -> None:
        self.image = image
        self._scram: dict[ScramKey, UserScramCredentialRecord | None] = {}

    def credential(self, name: str, mechanism: ScramMechanism) -> UserScramCredentialRecord | None:
        """A user's SCRAM credential as of the records replayed so far, or None."""
        key = (name, mechanism)
        if key in self._scram:
            return self._scram[key]
        return self.image.get(name, mechanism)

    def replay_scram(self, record: UserScramCredentialRecord) -> None:
        """Set (create or replace) a user's credential for a mechanism."""
        problem = scram_problem(record)
        if problem is not None:
            raise ScramReplayError(*problem, record=record)
        self._scram[(record.name, record.mechanism)] = record

    def replay_remove_scram(self, record: RemoveUserScramCredentialRecord) -> None:
        """Remove a user's existing credential for a mechanism."""
        if self.credential(record.name, record.mechanism) is None:
            raise ScramReplayError(
                "scram.exists",
                f"user {record.name!r} has no {record.mechanism.mechanism_name} credential to "
                "remove",
                record=record,
            )
        self._scram[(record.name, record.mechanism)] = None

    def apply(self) -> ScramImage:
        """The SCRAM image with the changes applied (the base itself if none)."""
        if not self._scram:
            return self.image
        return ScramImage(credentials=updated(self.image.credentials, self._scram))
