"""KIP-590 wired into a server: a follower's writes answered by the leader, Envelopes opened.

forwarding.py holds the two sides (`Forwarder`, `EnvelopeOpener`); `WriteForwarding` is what a
server holds of them. On a quorum node that does not lead, a write (`forwarded`) that the edge
admits on the listener it reached is sent to the leader and answered with the leader's answer,
counted by the API and error inside it; a write that could not be sent is answered here
(NOT_CONTROLLER, `ReplicatedService.submit`). An Envelope received is opened only if the edge
admits it, and what it carries again (`Edge.check`); a single server takes none.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from api.protocol.connection import PrivateRequest, Request
from api.server.forwarding import (
    EnvelopeOpener,
    Forwarder,
    ForwardFailed,
    KafkaAnswerer,
    PrivateAnswerer,
    forwarded,
    refused_frame,
)
from api.server.kafka.base import Session
from api.server.metrics import ServerMetrics, forwarded_labels
from replay.controller.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from api.raft.node import QuorumNode
    from api.security.client_config import ClientSecurity
    from api.server.channel import Channel
    from api.server.edge import Edge

logger = logging.getLogger("api.server")


class WriteForwarding:
    """A server's forwarding: writes sent to the leader, Envelopes opened (KIP-590)."""

    def __init__(
        self,
        *,
        node: QuorumNode | None,
        edge: Edge | None,
        security: ClientSecurity | None,
        kafka: Callable[[str], KafkaAnswerer],
        private: PrivateAnswerer,
        metrics: ServerMetrics | None,
    ) -> None:
        """`kafka` names the handler of a listener, `private` answers our private APIs."""
        self._node = node
        self._edge = edge
        self._metrics = metrics
        self.forwarder = None if node is None else Forwarder(node, security=security)
        """Sends the writes this node does not lead to the leader (None: a single server)."""
        self.envelopes = EnvelopeOpener(node=node, admit=self._admit, kafka=kafka, private=private)
        """Opens the Envelopes a node that leads receives."""

    def _admit(self, api_key: int, session: Session, listener: str) -> None:
        """Refuse an Envelope, or a voter change inside one, that the edge does not admit."""
        if self._edge is None:
            raise ApiError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "a single server takes no Envelope"
            )
        self._edge.check(api_key, listener, session)

    async def answered(self, event: Request | PrivateRequest, channel: Channel) -> bool:
        """Answer a write on a node that does not lead with the leader's answer (KIP-590).

        False when it is not forwarded (a read, this node leads, or nothing could be sent):
        it is answered here (a write with NOT_CONTROLLER, `ReplicatedService.submit`).
        """
        forwarder = self.forwarder
        node = self._node
        if forwarder is None or node is None or node.leading or not forwarded(event):
            return False
        if isinstance(event, Request) and self._edge is not None:
            # The edge decides on the node the request reached, before anything is sent: a
            # voter change it refuses here is answered with that refusal (`Answers.answer`).
            try:
                self._edge.check(event.request.header.api_key, channel.listener, channel.session)
            except ApiError:
                return False
        started = time.perf_counter()
        try:
            data = await forwarder.forward(event.frame, channel.session)
        except ForwardFailed as exc:
            logger.debug("write answered here, not forwarded: %s", exc)
            return False
        except ApiError as exc:
            frame = refused_frame(event, exc)
            if frame is None:
                return False
            channel.write(frame)
            self._count(event, None, int(exc.error_code), started)
            return True
        channel.write(struct.pack(">i", len(data)) + data)
        self._count(event, data, 0, started)
        return True

    def _count(
        self, event: Request | PrivateRequest, answer: bytes | None, error: int, started: float
    ) -> None:
        """Count a forwarded write by the API and error of its answer (`forwarded_labels`)."""
        if self._metrics is not None:
            labels = forwarded_labels(event.frame, answer, error)
            self._metrics.requests.observe(*labels, time.perf_counter() - started)

    async def close(self) -> None:
        """Stop forwarding: writes from now on are answered here (NOT_CONTROLLER)."""
        if self.forwarder is not None:
            await self.forwarder.close()
