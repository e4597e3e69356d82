"""Forwarded writes in `mlog_server_requests_total`: issue #54, finding 7 (its metrics part).

Before, a write a follower forwarded was counted on neither side by its API: the follower did
not count it at all, the leader counted `api="58"` (Envelope), error `NONE`, even when the
write inside was refused. Now both count it by the inner API's name and the inner answer's
error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.server.server import MetadataServer
from replay.controller.commands import CreatableTopic
from tests.support.quorum_harness import register
from tests.support.server_quorum import ServerQuorum

pytestmark = pytest.mark.asyncio


def _counts(server: MetadataServer) -> dict[tuple[str, str], int]:
    assert server.metrics is not None
    return dict(server.metrics.requests.counts)


async def test_a_forwarded_create_topics_is_counted_by_name_and_error_on_both_nodes(
    tmp_path: Path,
) -> None:
    quorum = ServerQuorum(tmp_path, metrics_listen=("127.0.0.1", 0))
    await quorum.start_all()
    try:
        leader = await quorum.leader()
        assert leader.quorum_node is not None
        await register(leader.quorum_node, 1)
        follower = await quorum.follower()
        async with await AdminClient.connect(quorum.address(follower)) as client:
            wanted = [CreatableTopic(name="t", num_partitions=1, replication_factor=1)]
            (created,) = await client.create_topics(wanted)
            (again,) = await client.create_topics(wanted)
        assert created.outcome.ok and not again.outcome.ok
        assert follower.forwarder is not None and follower.forwarder.forwarded == 2
        for server in (follower, leader):
            counts = _counts(server)
            assert counts.get(("CreateTopics", "NONE")) == 1, counts
            assert counts.get(("CreateTopics", "TOPIC_ALREADY_EXISTS")) == 1, counts
            assert not [key for key in counts if key[0] in ("58", "Envelope")], counts
    finally:
        await quorum.stop_all()
