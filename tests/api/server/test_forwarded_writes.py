"""A follower relays a forwarded write's answer only once its own image holds the write.

Issue #54 (read-your-write at a follower): the leader's answer to a forwarded write and its
fetch answer carrying the commit travel on two connections, so a client's very next read at
the follower could arrive between them and miss the write (kafkajs: deleteTopics, then
listTopics still listed the topic). The follower now asks the leader's high watermark on the
connection the answer came on and waits for its image to reach it before it answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.raft.node import QuorumNode
from replay.controller.commands import CreatableTopic, TopicRef
from tests.support.server_quorum import started_quorum

pytestmark = pytest.mark.asyncio

ROUNDS = 40
"""Create-then-read and delete-then-read rounds through one follower."""


async def _names(client: AdminClient) -> set[str]:
    return {str(topic.name) for topic in (await client.metadata(None)).topics}


async def test_every_read_after_a_forwarded_write_at_a_follower_sees_it(tmp_path: Path) -> None:
    async with started_quorum(tmp_path) as quorum:
        follower = await quorum.follower()
        missed = []
        async with await AdminClient.connect(quorum.address(follower)) as client:
            for round_ in range(ROUNDS):
                name = f"ryw-{round_}"
                wanted = [CreatableTopic(name=name, num_partitions=1, replication_factor=1)]
                (created,) = await client.create_topics(wanted)
                assert created.outcome.ok, created
                if name not in await _names(client):
                    missed.append(f"create {name}")
                await client.delete_topics([TopicRef(name=name)])
                if name in await _names(client):
                    missed.append(f"delete {name}")
        assert follower.forwarder is not None and follower.forwarder.forwarded >= 2 * ROUNDS
        assert not missed, f"{len(missed)} of {2 * ROUNDS} reads missed the write: {missed[:5]}"


async def test_a_follower_that_cannot_catch_up_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait is bounded: a follower whose image never reaches the commit answers anyway."""
    async with started_quorum(tmp_path) as quorum:
        follower = await quorum.follower()
        asked = []

        async def never(self: QuorumNode, high_watermark: int, timeout: float) -> bool:
            asked.append((high_watermark, timeout))
            return False

        monkeypatch.setattr(QuorumNode, "caught_up", never)
        async with await AdminClient.connect(quorum.address(follower)) as client:
            wanted = [CreatableTopic(name="late", num_partitions=1, replication_factor=1)]
            (created,) = await client.create_topics(wanted)
        assert created.outcome.ok
        assert asked and asked[0][0] > 0 and 0 < asked[0][1] <= 5.0
