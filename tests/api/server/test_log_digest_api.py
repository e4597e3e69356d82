"""DescribeLogDigest: a node publishes the hash chain's digest at its committed offset."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.client import AdminClient, RemoteError
from metadata_log.digest import parse_digest
from metadata_log.reader import LogReader
from metadata_log.verify import verify_log
from replay.controller.commands import CreatableTopic
from tests.support.cli import mlog
from tests.support.server_thread import running_server


async def _digests(address: str) -> tuple[str, str]:
    async with await AdminClient.connect(address) as client:
        (created,) = await client.create_topics([CreatableTopic(name="t", num_partitions=2)])
        assert created.outcome.ok
        committed = await client.log_digest()
        assert committed.offset == committed.committed_offset >= 0
        assert committed.token == parse_digest(committed.token).token()
        earlier = await client.log_digest(0)
        assert earlier.offset == 0
        with pytest.raises(RemoteError, match="not committed"):
            await client.log_digest(committed.committed_offset + 1)
        return committed.token, earlier.token


def test_the_committed_digest_is_served_and_matches_the_log(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        tokens = asyncio.run(_digests(server.address))
    for token in tokens:
        digest = parse_digest(token)
        report = verify_log(tmp_path / "log", chain_values_at=[digest.end_offset])
        assert report.ok
        assert report.chain is not None
        assert report.chain.value_at(digest.end_offset) == digest.chain


def test_log_digest_through_a_server_is_the_nodes_committed_digest(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_digests(server.address))
        code, text = mlog(
            tmp_path / "elsewhere", "log", "digest", "--bootstrap-server", server.address
        )
        assert code == 0, text
        served = parse_digest(text.strip())
        with LogReader.open(tmp_path / "log") as log:
            assert log.digest() == served
