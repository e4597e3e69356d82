"""The server's quorum endpoint: the quorum APIs a node receives, answered by its shell.

`api.server.kafka.quorum.QuorumApis` authorizes and decodes a request; this hands it to the
node (`api.raft.node.QuorumNode`): the core's requests (FetchSnapshot among them: the
leader's core checks it and its shell fills the snapshot's bytes) go through its loop, and
DescribeQuorum is answered from the core's view, with each voter's listener (v2's `nodes`:
the voter's address, from the log's voter set in a dynamic quorum or `controller.quorum.voters`,
under the controller listener's name), so a tool reaches every voter from one answer; the
KIP-853 voter changes (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) are answered by the
node's voter-change API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol.quorum.apis import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribedQuorum,
    DescribeQuorumRequest,
    QuorumListener,
    QuorumRequest,
    QuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)
from api.protocol.quorum.errors import INVALID_REQUEST
from api.protocol.quorum.messages import NO_LEADER, DescribeQuorumResponse
from api.protocol.quorum.messages import ErrorCode as CoreError
from api.raft.core.voters import Voter

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
        if isinstance(message, AddRaftVoterRequest):
            if not message.endpoints:
                return AddRaftVoterResponse(
                    correlation_id=message.correlation_id,
                    error_code=INVALID_REQUEST,
                    error_message="AddRaftVoter names no endpoint for the new voter",
                )
            endpoint = message.endpoints[0]
            code, text = await node.change_voters(
                add=Voter(
                    id=message.voter_id,
                    directory_id=message.voter_directory_id,
                    host=endpoint.host,
                    port=endpoint.port,
                ),
                timeout_ms=message.timeout_ms,
                ack_when_committed=message.ack_when_committed,
            )
            return AddRaftVoterResponse(
                correlation_id=message.correlation_id, error_code=code, error_message=text
            )
        if isinstance(message, RemoveRaftVoterRequest):
            code, text = await node.change_voters(
                remove=message.voter_id, directory_id=message.voter_directory_id
            )
            return RemoveRaftVoterResponse(
                correlation_id=message.correlation_id, error_code=code, error_message=text
            )
        if isinstance(message, UpdateRaftVoterRequest):
            return self._update_voter(message)
        response = await node.handle(sender_id, message)
        return response  # type: ignore[return-value]  # a request's answer is its response

    def _update_voter(self, message: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
        """UpdateRaftVoter: the leader checks a voter's endpoint against the voter set.

        A voter whose endpoint is the one the log holds is answered NONE; a changed endpoint
        is refused (INVALID_REQUEST): the voter is removed and added again instead.
        """
        node = self.node
        leader = node.leader_id
        address = node.voter_addresses().get(leader, ("", 0))

        def answer(code: int) -> UpdateRaftVoterResponse:
            return UpdateRaftVoterResponse(
                correlation_id=message.correlation_id,
                error_code=code,
                leader_id=leader,
                leader_epoch=node.epoch,
                leader_host=address[0],
                leader_port=address[1],
            )

        if not node.leading or leader == NO_LEADER:
            return answer(int(CoreError.NOT_LEADER_OR_FOLLOWER))
        if message.current_leader_epoch != node.epoch:
            return answer(int(CoreError.FENCED_LEADER_EPOCH))
        voter = node.voter_set().get(message.voter_id)
        if voter is None or voter.directory_id != message.voter_directory_id:
            return answer(int(CoreError.VOTER_NOT_FOUND))
        if not any(e.host == voter.host and e.port == voter.port for e in message.endpoints):
            return answer(INVALID_REQUEST)
        return answer(0)
