"""SCRAM credentials: DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0.

Alterations go through `MetadataService.submit` as the connection's principal; the controller
(`replay.controller.credentials`) checks each user's deletion or upsertion and derives the stored
keys from the salted password. Descriptions answer from the committed image: mechanisms and
iterations, never a salt or a key. Log lines name the user and the outcome only.
A request refused as a whole (the log's storage failed, a cluster check) is answered by
`refusals`, with its code on every user.
"""

from __future__ import annotations

from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.kafka.base import HandlerGroup, Session
from replay.controller.commands import ScramDeletion, ScramUpsertion
from replay.controller.limits import echo


class CredentialApis(HandlerGroup):
    """DescribeUserScramCredentials and AlterUserScramCredentials."""

    async def describe_user_scram_credentials(self, request: KafkaRequest, session: Session) -> Any:
        """Each named user's (or every user's) mechanisms and iterations."""
        users = request.body.users
        names = None if users is None else [u.name for u in users]
        results = self.service.controller.describe_user_scram_credentials(self.service.image, names)
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            results=[
                {
                    "user": r.user,
                    "error_code": int(r.outcome.error_code),
                    "error_message": r.outcome.error_message,
                    "credential_infos": [
                        {"mechanism": int(c.mechanism), "iterations": c.iterations}
                        for c in r.credentials
                    ],
                }
                for r in results
            ],
        )

    async def alter_user_scram_credentials(self, request: KafkaRequest, session: Session) -> Any:
        """Delete and set SCRAM credentials; one result per user."""
        body = request.body
        deletions = [ScramDeletion(name=d.name, mechanism=int(d.mechanism)) for d in body.deletions]
        upsertions = [
            ScramUpsertion(
                name=u.name,
                mechanism=int(u.mechanism),
                iterations=int(u.iterations),
                salt=bytes(u.salt),
                salted_password=bytes(u.salted_password),
            )
            for u in body.upsertions
        ]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.alter_user_scram_credentials(image, deletions, upsertions),
            principal=session.principal,
        )
        answers = [(r.user, r.outcome) for r in results]
        self._log_change(
            session.principal,
            "alter scram credentials of",
            ((echo(user), outcome.error_code) for user, outcome in answers),
        )
        return self._answer(
            request,
            throttle_time=0,
            results=[
                {
                    "user": user,
                    "error_code": int(outcome.error_code),
                    "error_message": outcome.error_message,
                }
                for user, outcome in answers
            ],
        )
