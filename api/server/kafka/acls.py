"""ACLs: DescribeAcls.

No ACLs exist yet (issue #20 adds them), so the answer is always empty; admin clients ask for
it all the same, and an answer at all tells them this is a modern broker.
"""

from __future__ import annotations

from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.kafka.base import HandlerGroup, Session


class AclApis(HandlerGroup):
    """DescribeAcls."""

    async def describe_acls(self, request: KafkaRequest, session: Session) -> Any:
        """No ACLs exist yet: an empty answer (it tells clients this is a modern broker)."""
        return self._answer(
            request, throttle_time=0, error_code=0, error_message=None, resources=[]
        )
