"""`api.cli.quorum_digests`: which nodes are asked, which value is the quorum's, who is named."""

from __future__ import annotations

import io

from api.cli.quorum_digests import (
    NodeDigest,
    QuorumDigests,
    differing_error,
    gather_digests,
    judge,
    node_addresses,
    print_digests,
)
from tests.support.quorum_processes import free_ports

A, B = b"\1" * 32, b"\2" * 32


def row(node_id: int | None, chain: bytes | None, problem: str | None = None) -> NodeDigest:
    return NodeDigest(
        address=f"127.0.0.1:{9000 + (node_id or 0)}",
        node_id=node_id,
        offset=-1 if chain is None else 41,
        chain=chain,
        problem=problem,
    )


def test_every_voter_and_each_bootstrap_server_is_asked_once() -> None:
    answer = {
        "nodes": [
            {"node_id": 2, "name": "CONTROLLER", "host": "127.0.0.1", "port": 9002},
            {"node_id": 1, "name": "CONTROLLER", "host": "127.0.0.1", "port": 9001},
        ]
    }
    assert node_addresses(answer, "127.0.0.1:9001, 10.0.0.9:9092") == [
        ("127.0.0.1:9002", 2),
        ("127.0.0.1:9001", 1),
        ("10.0.0.9:9092", None),
    ]
    assert node_addresses({"nodes": []}, "h:1") == [("h:1", None)]


def test_the_value_most_nodes_hold_is_the_quorums_and_the_other_is_named() -> None:
    rows = judge([row(1, A), row(2, B), row(3, A), row(4, None, "unreachable: refused")], 1)
    assert [r.differs for r in rows] == [False, True, False, False]
    digests = QuorumDigests(offset=41, nodes=rows)
    error = differing_error(digests)
    assert error is not None
    assert error.startswith("the digest of node 2 (127.0.0.1:9002) at offset 41 differs")
    out = io.StringIO()
    assert print_digests(digests, out) == error
    text = out.getvalue()
    assert "Digests at offset 41" in text and "DIFFERS" in text
    assert "unreachable: refused" in text


def test_on_a_tie_the_leaders_value_is_the_quorums() -> None:
    rows = judge([row(1, A), row(2, B)], 2)
    assert [r.differs for r in rows] == [True, False]


def test_nodes_that_agree_are_not_named() -> None:
    digests = QuorumDigests(offset=41, nodes=judge([row(1, A), row(2, A), row(3, None)], 1))
    assert differing_error(digests) is None


def test_a_node_that_cannot_be_reached_is_said_so_in_its_row() -> None:
    port = free_ports(1)[0]  # nothing listens there
    digests = gather_digests({"nodes": []}, f"127.0.0.1:{port}", None)
    assert digests.offset is None
    (only,) = digests.nodes
    assert only.chain is None and only.problem is not None
    assert only.problem.startswith("unreachable: ")
    out = io.StringIO()
    assert print_digests(digests, out) is None  # nothing to compare, nobody named
    assert "unreachable: " in out.getvalue()
