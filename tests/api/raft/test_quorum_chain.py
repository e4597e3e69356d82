"""A quorum keeps the hash chain once metadata.version 2 is committed, the same on every node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.quorum_harness import Cluster, create_topic, register

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a deadline


async def test_every_node_holds_the_same_digest_at_the_same_offset(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await create_topic(leader, "orders")
        offset = leader.service.image.provenance.offset
        await cluster.converged(offset)
        # A new cluster's log starts at metadata.version 2: every node keeps the chain.
        assert all(n.service.replica_log.keeps_chain for n in nodes)
        digests = {n.service.replica_log.digest(offset, at_or_before=True) for n in nodes}
        assert len(digests) == 1
        (digest,) = digests
        assert digest.offset >= 0
    finally:
        await cluster.stop_all()
