"""The server's quorum endpoint: the quorum APIs a node receives, answered by its shell.

`api.server.kafka.quorum.QuorumApis` authorizes and decodes a request; this hands it to the
node (`api.service.quorum.QuorumNode`): the core's requests go through its loop, DescribeQuorum
is answered from the core's view, and FetchSnapshot is refused, since no node offers a
snapshot (docs/replication.md: a follower below the leader's log start is not handled yet, and
the log is never cut at its start while it is a quorum's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol.raft_wire import DescribeQuorumRequest, QuorumRequest, QuorumResponse
from metadata_log.raft.messages import (
    DescribeQuorumResponse,
    ErrorCode,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
)

if TYPE_CHECKING:
    from api.service.quorum import QuorumNode


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
        if isinstance(message, FetchSnapshotRequest):
            return FetchSnapshotResponse(
                correlation_id=message.correlation_id,
                error_code=ErrorCode.SNAPSHOT_NOT_FOUND,
                snapshot_id=message.snapshot_id,
                current_leader=LeaderIdAndEpoch(leader_id=node.leader_id, leader_epoch=node.epoch),
                size=0,
                position=message.position,
            )
        response = await node.handle(sender_id, message)
        return response  # type: ignore[return-value]  # a request's answer is its response
