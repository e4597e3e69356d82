"""The server's quorum endpoint: the quorum APIs a node receives, answered by its shell.

`api.server.kafka.quorum.QuorumApis` authorizes and decodes a request; this hands it to the
node (`api.raft.node.QuorumNode`): the core's requests (FetchSnapshot among them: the
leader's core checks it and its shell fills the snapshot's bytes) go through its loop, and
DescribeQuorum is answered from the core's view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.raft.core.messages import DescribeQuorumResponse
from api.raft.transport.wire import (
    DescribeQuorumRequest,
    QuorumRequest,
    QuorumResponse,
)

if TYPE_CHECKING:
    from api.raft.node import QuorumNode


class NodeEndpoint:
    """Answers the quorum requests a server receives from its `QuorumNode`."""

    def __init__(self, node: QuorumNode) -> None:
        self.node = node

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        """The answer to one request from `sender_id` (-1 for a DescribeQuorum)."""
        node = self.node
        if isinstance(message, DescribeQuorumRequest):
            answer: DescribeQuorumResponse = node.describe()
            return answer
        response = await node.handle(sender_id, message)
        return response  # type: ignore[return-value]  # a request's answer is its response
