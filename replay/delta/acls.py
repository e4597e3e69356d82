"""AclsDelta: ACLs created and removed, by id."""

from __future__ import annotations

from records.model import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from records.uuids import Uuid
from replay.delta.maps import updated
from replay.errors import AclReplayError
from replay.image import AclsImage
from replay.rules import acl_problem


class AclsDelta:
    """ACLs created (the record) and removed (None) since the base image."""

    __slots__ = ("_acls", "image")

    def __init__(self, image: AclsImage) -> None:
        self.image = image
        self._acls: dict[Uuid, AccessControlEntryRecord | None] = {}

    def acl(self, acl_id: Uuid) -> AccessControlEntryRecord | None:
        """An ACL as of the records replayed so far, or None."""
        if acl_id in self._acls:
            return self._acls[acl_id]
        return self.image.get(acl_id)

    def replay_acl(self, record: AccessControlEntryRecord) -> None:
        """Create an ACL under a new id."""
        problem = acl_problem(record)
        if problem is not None:
            raise AclReplayError(*problem, record=record)
        if self.acl(record.id) is not None:
            raise AclReplayError(
                "acl.id-unique",
                f"ACL id {record.id} is already in use; an ACL is created once and removed by id",
                record=record,
            )
        self._acls[record.id] = record

    def replay_remove_acl(self, record: RemoveAccessControlEntryRecord) -> None:
        """Remove an existing ACL by id."""
        if self.acl(record.id) is None:
            raise AclReplayError(
                "acl.exists",
                f"ACL {record.id} does not exist, so it cannot be removed",
                record=record,
            )
        self._acls[record.id] = None

    def apply(self) -> AclsImage:
        """The ACLs image with the changes applied (the base itself if none)."""
        if not self._acls:
            return self.image
        return AclsImage(by_id=updated(self.image.by_id, self._acls))
