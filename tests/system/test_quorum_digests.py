"""`mlog quorum describe` compares every node's digest and names a node whose disk was edited.

Three `mlog serve` processes agree on their digests at a common offset. A follower is stopped
and one of its sealed segments rewritten with valid CRCs (a topic renamed), its chain files
deleted and its headers rewritten to say they never had one, so that its next open hashes the
edited blocks: its own `mlog log verify` then finds
nothing wrong, and `quorum describe` names it (exit 1). (An edit that leaves the chain files
alone is named by the node's own `mlog log verify` instead: tests/metadata_log/test_chain.py.)
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from metadata_log.segment import parse_segment_name
from tests.support.chain_attacks import forget_chain, rename_topic, rewrite_entries
from tests.support.quorum_processes import (
    PROJECT,
    Quorum,
    Writer,
    converge,
    mlog,
    write_until,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def quorum_env() -> dict[str, str]:
    # Sealed segments after a few writes (the processes inherit the environment).
    return {"MLOG_SEGMENT_BYTES": "16384"}


def _describe(address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "quorum", "describe", "--bootstrap-server", address],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=120,
        check=False,
    )


def _edit(log_dir: Path, topic: str) -> None:
    """Rename `topic` in the sealed segment holding it; forget the chain (rehashed on open)."""
    bases = sorted(b for p in log_dir.iterdir() if (b := parse_segment_name(p.name)) is not None)
    for base in bases[:-1]:
        if rewrite_entries(log_dir / f"{base:020d}.avro", rename_topic(topic, "zz-edited")):
            break
    else:
        raise AssertionError(f"no sealed segment holds {topic}")
    forget_chain(log_dir)


def _all(quorum: Quorum, first: int | None = None) -> str:
    """Every node's client address (node `first`'s first): the nodes whose digests describe
    compares (a voter's own address is its controller listener's, mTLS)."""
    nodes = sorted(quorum.nodes.values(), key=lambda n: n.node_id != first)
    return ",".join(n.address for n in nodes)


def test_describe_compares_the_digests_and_names_an_edited_node(quorum: Quorum) -> None:
    asyncio.run(_scenario(quorum))


async def _scenario(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 40)
        await converge(quorum, writer)
        leader = await quorum.leader()
        described = json.loads(
            mlog("quorum", "describe", "--output", "json", "--bootstrap-server", _all(quorum))
        )
        digests = described["digests"]
        assert sorted(n["node_id"] for n in described["nodes"]) == [1, 2, 3]
        rows = digests["nodes"]
        assert len(rows) == 3 and all(r["problem"] is None for r in rows), rows
        assert len({(r["offset"], r["chain"]) for r in rows}) == 1, rows
        assert not any(r["differs"] for r in rows)
        assert digests["offset"] >= 40

        follower = next(i for i in quorum.nodes if i != leader)
        quorum.kill(follower, signal.SIGTERM)
        log_dir = quorum.nodes[follower].data_dir / "log"
        _edit(log_dir, writer.acknowledged[0])
        verified = mlog("log", "verify", "--data-dir", str(quorum.nodes[follower].data_dir))
        assert "clean" in verified  # its own chain is consistent again: only the others tell
        quorum.start(follower)
        await write_until(writer, 3)
        await converge(quorum, writer)
    finally:
        await writer.close()
    leader = await quorum.leader()
    done = _describe(_all(quorum, leader))
    assert done.returncode == 1, done.stdout + done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert f"the digest of node {follower} (" in error and "differs" in error, error
    others = [i for i in quorum.nodes if i != follower]
    assert all(f"node {i} (" not in error for i in others), error
    assert "DIFFERS" in done.stdout
