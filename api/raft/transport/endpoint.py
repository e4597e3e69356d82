"""The server's quorum endpoint: the quorum APIs a node receives, answered by its shell.

`api.server.kafka.quorum.QuorumApis` authorizes and decodes a request; this hands it to the
node (`api.raft.node.QuorumNode`): the core's requests (FetchSnapshot among them: the
leader's core checks it and its shell fills the snapshot's bytes) go through its loop, and
DescribeQuorum is answered from the core's view, with each voter's listener (v2's `nodes`:
`controller.quorum.voters`' address under the controller listener's name), so a tool reaches
every voter from one answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.raft.core.messages import DescribeQuorumResponse
from api.raft.transport.wire import (
    DescribedQuorum,
    DescribeQuorumRequest,
    QuorumListener,
    QuorumRequest,
    QuorumResponse,
)

if TYPE_CHECKING:
    from api.raft.node import QuorumNode


class NodeEndpoint:
    """Answers the quorum requests a server receives from its `QuorumNode`."""

    def __init__(self, node: QuorumNode, *, listener_name: str = "CONTROLLER") -> None:
        self.node = node
        self.listener_name = listener_name
        """The name the voters' addresses are listed under (Kafka's controller listener)."""

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        """The answer to one request from `sender_id` (-1 for a DescribeQuorum)."""
        node = self.node
        if isinstance(message, DescribeQuorumRequest):
            answer: DescribeQuorumResponse = node.describe()
            listeners = tuple(
                QuorumListener(node_id=i, name=self.listener_name, host=host, port=port)
                for i, (host, port) in sorted(node.voter_addresses().items())
            )
            return DescribedQuorum(
                error_code=answer.error_code,
                leader_id=answer.leader_id,
                leader_epoch=answer.leader_epoch,
                high_watermark=answer.high_watermark,
                current_voters=answer.current_voters,
                observers=answer.observers,
                nodes=listeners,
            )
        response = await node.handle(sender_id, message)
        return response  # type: ignore[return-value]  # a request's answer is its response
