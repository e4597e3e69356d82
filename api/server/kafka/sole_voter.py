"""DescribeQuorum on a single server: the server is a quorum of one voter, which leads.

Kafka's tools and several clients (kafka-python's `describe_metadata_quorum`, kafka-ts,
@platformatic/kafka) ask any controller for DescribeQuorum (55). A single `mlog serve` is the
controller of its cluster and its only voter, so it answers as KRaft's leader of a one-voter
quorum answers:

- LeaderId: this node's id; LeaderEpoch: the epoch the server stamps on what it appends
  (the log's epoch, bumped each time the log is opened for writing);
- HighWatermark: the log's end offset (one past the last entry: every entry is committed once
  it is durable, there being no other voter to wait for);
- one voter, this node, with that log end offset and the current time as its last fetch and
  last caught-up timestamps (as KRaft reports the leader itself); no observers.

Only DescribeQuorum is served: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot stay unknown (there is no other voter to speak them), which is how a client
tells a quorum's node from a single server (`AdminClient.connect_controller` looks for Vote).
The request is checked and refused as on a quorum's node (`QuorumApis`: DESCRIBE on the
cluster, the metadata partition only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from api.protocol.quorum.apis import (
    DESCRIBE_QUORUM_KEY,
    QUORUM_VERSIONS,
    DescribeQuorumRequest,
    QuorumRequest,
    QuorumResponse,
)
from api.protocol.quorum.messages import DescribeQuorumResponse, ErrorCode, ReplicaState
from api.service.service import MetadataService

SOLE_VOTER_VERSIONS: Mapping[int, tuple[int, int]] = {
    DESCRIBE_QUORUM_KEY: QUORUM_VERSIONS[DESCRIBE_QUORUM_KEY]
}
"""The quorum APIs a single server serves: DescribeQuorum, in the versions a quorum serves."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class SoleVoter:
    """The `QuorumEndpoint` of a single server: answers DescribeQuorum as a one-voter quorum."""

    def __init__(
        self,
        service: MetadataService,
        node_id: int,
        *,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.service = service
        self.node_id = node_id
        self._clock_ms = clock_ms

    def describe(self) -> DescribeQuorumResponse:
        """The quorum as its one voter, the leader, sees it now."""
        log = self.service.log
        end = log.end_offset
        now = self._clock_ms()
        return DescribeQuorumResponse(
            error_code=ErrorCode.NONE,
            leader_id=self.node_id,
            leader_epoch=log.epoch,
            high_watermark=end,
            current_voters=(
                ReplicaState(
                    replica_id=self.node_id,
                    log_end_offset=end,
                    last_fetch_timestamp=now,
                    last_caught_up_timestamp=now,
                ),
            ),
            observers=(),
        )

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        """The answer to a DescribeQuorum (the only quorum API a single server is sent)."""
        if not isinstance(message, DescribeQuorumRequest):
            raise TypeError(f"a single server answers DescribeQuorum only, not {message!r}")
        return self.describe()
