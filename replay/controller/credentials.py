"""SCRAM credentials: alter and describe them as Kafka's KRaft controller does.

`alter_credentials` follows `ScramControlManager.alterCredentials`: a user named twice in one
request (in deletions, upsertions or both) gets DUPLICATE_RESOURCE and nothing of it is
written; each other user's deletion or upsertion is checked alone (empty name, a reserved
name (ANONYMOUS, `*`), too few or too many iterations: UNACCEPTABLE_CREDENTIAL; an unknown
mechanism: UNSUPPORTED_SASL_MECHANISM; deleting what does not exist: RESOURCE_NOT_FOUND). An
upsertion carries the salted password, from which the stored and server keys are derived
here; the salted password itself is never stored or shown. `describe_credentials` answers
mechanisms and iterations only.
"""

from __future__ import annotations

from collections.abc import Sequence

from records.model import (
    Record,
    RemoveUserScramCredentialRecord,
    ScramMechanism,
    UserScramCredentialRecord,
)
from replay.controller.commands import (
    AlterScramResult,
    ControllerResult,
    DescribeScramResult,
    Outcome,
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import check_label
from replay.image import MetadataImage
from replay.security.scram_rules import MAX_ITERATIONS, MIN_ITERATIONS, key_size

MAX_USER_NAME_LENGTH = 995
"""Characters of a SCRAM user name: `User:` and the name fit an ACL's principal (1000)."""

RESERVED_USER_NAMES = frozenset({"ANONYMOUS", "*"})
"""Names no credential may be created for: the unauthenticated principal and the ACL wildcard."""

MAX_SALT_BYTES = 1024
"""Bytes of a salt: far above the 16 to 64 bytes clients draw."""


def _unacceptable(message: str) -> ApiError:
    return ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, message)


def _mechanism(name: str, code: int) -> ScramMechanism:
    """Kafka's `validateScramUsernameAndMechanism`: the mechanism of a valid name and code."""
    if not name:
        raise _unacceptable("Username must not be empty")
    check_label(
        name,
        what="user name",
        max_length=MAX_USER_NAME_LENGTH,
        code=ErrorCode.UNACCEPTABLE_CREDENTIAL,
    )
    try:
        mechanism = ScramMechanism(code)
    except ValueError:
        mechanism = ScramMechanism.UNKNOWN
    if mechanism == ScramMechanism.UNKNOWN:
        raise ApiError(
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"Unknown SCRAM mechanism {code}; use 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)",
        )
    return mechanism


def _upsertion_record(upsertion: ScramUpsertion) -> UserScramCredentialRecord:
    # Imported here: hashlib costs every local command's start-up (the controller is
    # imported by all of them) and only this step needs it.
    from replay.security.scram_keys import credential_from_salted  # noqa: PLC0415

    mechanism = _mechanism(upsertion.name, upsertion.mechanism)
    if upsertion.name in RESERVED_USER_NAMES:
        # `User:ANONYMOUS` is every unauthenticated client and `User:*` every principal in an
        # ACL: a login as either would take what is granted to all of them.
        raise _unacceptable(f"The user name {upsertion.name} is reserved; choose another")
    if upsertion.iterations < MIN_ITERATIONS:
        raise _unacceptable(f"Too few iterations: at least {MIN_ITERATIONS}")
    if upsertion.iterations > MAX_ITERATIONS:
        raise _unacceptable(f"Too many iterations: at most {MAX_ITERATIONS}")
    if not 0 < len(upsertion.salt) <= MAX_SALT_BYTES:
        raise _unacceptable(f"The salt must be 1 to {MAX_SALT_BYTES} bytes")
    size = key_size(mechanism)
    if len(upsertion.salted_password) != size:
        raise _unacceptable(
            f"The salted password of {mechanism.mechanism_name} is {size} bytes (the hash's "
            f"size), not {len(upsertion.salted_password)}"
        )
    credential = credential_from_salted(
        mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
    )
    return UserScramCredentialRecord(
        name=upsertion.name,
        mechanism=mechanism,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


def _deletion_record(
    image: MetadataImage, deletion: ScramDeletion
) -> RemoveUserScramCredentialRecord:
    mechanism = _mechanism(deletion.name, deletion.mechanism)
    if image.scram.get(deletion.name, mechanism) is None:
        raise ApiError(
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        )
    return RemoveUserScramCredentialRecord(name=deletion.name, mechanism=mechanism)


_TWICE = "A user credential cannot be altered twice in the same request"


def alter_credentials(
    image: MetadataImage,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> ControllerResult[list[AlterScramResult]]:
    """Delete and set SCRAM credentials; one result per user named, in the order first named."""
    errors: dict[str, ApiError | None] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    for deletion in deletions:
        errors.setdefault(deletion.name, None)
        if errors[deletion.name] is not None:
            continue
        if to_delete.pop(deletion.name, None) is not None:
            errors[deletion.name] = ApiError(ErrorCode.DUPLICATE_RESOURCE, _TWICE)
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        errors.setdefault(upsertion.name, None)
        if errors[upsertion.name] is not None:
            continue
        if (
            to_delete.pop(upsertion.name, None) is not None
            or to_upsert.pop(upsertion.name, None) is not None
        ):
            errors[upsertion.name] = ApiError(ErrorCode.DUPLICATE_RESOURCE, _TWICE)
        else:
            to_upsert[upsertion.name] = upsertion
    records: list[Record] = []
    for name, deletion in to_delete.items():
        try:
            records.append(_deletion_record(image, deletion))
        except ApiError as exc:
            errors[name] = exc
    for name, upsertion in to_upsert.items():
        try:
            records.append(_upsertion_record(upsertion))
        except ApiError as exc:
            errors[name] = exc
    results = [
        AlterScramResult(
            user=name, outcome=Outcome() if error is None else Outcome.from_error(error)
        )
        for name, error in errors.items()
    ]
    return ControllerResult(records=tuple(records), response=results)


def _infos(image: MetadataImage, name: str) -> tuple[ScramCredentialInfo, ...]:
    found = (
        image.scram.get(name, m)
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    )
    return tuple(
        ScramCredentialInfo(mechanism=c.mechanism, iterations=c.iterations)
        for c in found
        if c is not None
    )


def describe_credentials(
    image: MetadataImage, users: Sequence[str] | None
) -> list[DescribeScramResult]:
    """Each user's mechanisms and iterations, as Kafka's `ScramImage.describe`.

    Every user with a credential when `users` is None or empty, else the named ones
    (RESOURCE_NOT_FOUND without one, DUPLICATE_RESOURCE for a name given twice).
    """
    if not users:
        return [
            DescribeScramResult(user=u, credentials=_infos(image, u)) for u in image.scram.users()
        ]
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    results = []
    for user, count in counts.items():
        if count > 1:
            error = ApiError(
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}",
            )
        else:
            infos = _infos(image, user)
            if infos:
                results.append(DescribeScramResult(user=user, credentials=infos))
                continue
            error = ApiError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {user}",
            )
        results.append(DescribeScramResult(user=user, outcome=Outcome.from_error(error)))
    return results
