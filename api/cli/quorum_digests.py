"""`mlog quorum describe`'s digests: every node's hash chain digest at one common offset.

Block boundaries are byte for byte the same on every node of a quorum (a follower's blocks are
the leader's, and a follower that installed a snapshot carries the leader's chain state), so
every node holding the same log holds the same digest at the same offset. The nodes are the
voters DescribeQuorum v2 names (`nodes`) and the `--bootstrap-server` list. Each is asked its
digest at its committed offset (DescribeLogDigest, -1); the common offset is the smallest of
those, which is the last offset of a block on every node (each answered at a block end at or
below its committed offset, and the blocks are the same everywhere). Every node that answered
another offset is then asked at exactly that one. The value most nodes hold is the quorum's
(on a tie, the leader's); a node holding another is named, and the command exits 1. A node
that cannot be reached, keeps no chain yet or no longer holds the offset (trimmed) is said so
in its row and compared with none.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_DAMAGED, EXIT_OK
from api.cli.output import print_table

if TYPE_CHECKING:
    from api.client import AdminClient
    from api.security.client_config import ClientSecurity

NODE_WAIT_S = 5.0
"""How long one node may take to connect and answer before its row says it did not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeDigest:
    """One node's digest at the common offset, or why there is none."""

    address: str
    node_id: int | None
    """The voter's id when DescribeQuorum names the address (None: a bootstrap server only)."""
    offset: int = -1
    chain: bytes | None = None
    token: str | None = None
    problem: str | None = None
    differs: bool = False

    @property
    def label(self) -> str:
        """How the node is named in messages: its id and address."""
        return self.address if self.node_id is None else f"node {self.node_id} ({self.address})"

    def to_json(self) -> dict[str, Any]:
        """The row as JSON values."""
        return {
            "node_id": self.node_id,
            "address": self.address,
            "offset": None if self.chain is None else self.offset,
            "chain": None if self.chain is None else self.chain.hex(),
            "token": self.token,
            "problem": self.problem,
            "differs": self.differs,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumDigests:
    """Every node's digest at `offset` (None: no node answered one)."""

    offset: int | None
    nodes: list[NodeDigest] = field(default_factory=list)

    @property
    def differing(self) -> list[NodeDigest]:
        """The nodes whose digest is not the quorum's."""
        return [n for n in self.nodes if n.differs]

    def to_json(self) -> dict[str, Any]:
        """The digests as JSON values."""
        return {"offset": self.offset, "nodes": [n.to_json() for n in self.nodes]}


def node_addresses(answer: dict[str, Any], bootstrap: str) -> list[tuple[str, int | None]]:
    """(address, node id or None) of every voter DescribeQuorum named, then the bootstrap list."""
    found: dict[str, int | None] = {}
    for node in answer.get("nodes") or ():
        found.setdefault(f"{node['host']}:{node['port']}", int(node["node_id"]))
    for item in bootstrap.split(","):
        address = item.strip()
        if address:
            found.setdefault(address, None)
    return list(found.items())


def gather_digests(
    answer: dict[str, Any], bootstrap: str, security: ClientSecurity | None
) -> QuorumDigests:
    """Every node's digest at a common offset (see the module's docstring)."""
    return asyncio.run(
        _gather(node_addresses(answer, bootstrap), answer.get("leader_id"), security)
    )


async def _gather(
    addresses: list[tuple[str, int | None]], leader: int | None, security: ClientSecurity | None
) -> QuorumDigests:
    clients = await asyncio.gather(*(_connect(a, security) for a, _ in addresses))
    addresses, clients = await _by_node(addresses, list(clients))
    connected = {i: c for i, c in enumerate(clients) if not isinstance(c, str)}
    try:
        first = await asyncio.gather(*(_digest(c, -1) for c in connected.values()))
        answers = dict(zip(connected, first, strict=True))
        rows: list[NodeDigest] = []
        for i, (address, node_id) in enumerate(addresses):
            row = NodeDigest(address=address, node_id=node_id)
            client = clients[i]
            if isinstance(client, str):
                rows.append(replace(row, problem=client))
            else:
                rows.append(_row(row, answers[i], no_chain="keeps no hash chain yet"))
        offsets = [r.offset for r in rows if r.chain is not None]
        if not offsets:
            return QuorumDigests(offset=None, nodes=rows)
        common = min(offsets)
        again = [i for i in connected if rows[i].chain is not None and rows[i].offset != common]
        later = await asyncio.gather(*(_digest(connected[i], common) for i in again))
        for i, got in zip(again, later, strict=True):
            rows[i] = _row(rows[i], got, no_chain=f"holds no digest at offset {common}")
    finally:
        await asyncio.gather(*(c.close() for c in connected.values()))
    return QuorumDigests(offset=common, nodes=judge(rows, leader))


async def _by_node(
    addresses: list[tuple[str, int | None]], clients: list[AdminClient | str]
) -> tuple[list[tuple[str, int | None]], list[AdminClient | str]]:
    """One row per node: a bootstrap server that names its node takes that voter's row.

    DescribeQuorum names the voters at their controller listeners, which a client without the
    controllers' certificate cannot reach; a quorum node's client listener names only its own
    node in Metadata. So a bootstrap server is asked which node it is, and where it is a voter
    its address stands for that voter (whose controller address is dropped). A voter reached
    neither way keeps its row, which says why.
    """
    named = await asyncio.gather(
        *(
            _own_node(client) if node_id is None and not isinstance(client, str) else _nobody()
            for (_, node_id), client in zip(addresses, clients, strict=True)
        )
    )
    voters = {node_id for _, node_id in addresses if node_id is not None}
    reached = {node_id for node_id in named if node_id in voters}
    rows: list[tuple[str, int | None]] = []
    kept: list[AdminClient | str] = []
    for (address, voter), client, own in zip(addresses, clients, named, strict=True):
        if voter is not None and voter in reached:
            if not isinstance(client, str):
                await client.close()
            continue
        rows.append((address, own if voter is None and own in voters else voter))
        if isinstance(client, str) and voter is not None:
            kept.append(
                f"{client} (its controller listener; give its client address in "
                "--bootstrap-server to compare it)"
            )
        else:
            kept.append(client)
    return rows, kept


async def _own_node(client: AdminClient) -> int | None:
    """The node a server is, where its Metadata names only itself.

    A quorum node's client listener and a single server name only themselves; None where the
    answer names several nodes or does not come.
    """
    try:
        async with asyncio.timeout(NODE_WAIT_S):
            answer = await client.metadata([])
    except Exception:  # any failure: the row is kept as a bootstrap server's
        return None
    brokers = list(answer.brokers)
    if len(brokers) != 1:
        return None
    return int(brokers[0].node_id)


async def _nobody() -> int | None:
    return None


def _row(row: NodeDigest, got: Any, *, no_chain: str) -> NodeDigest:
    """The row with a DescribeLogDigest answer (or the text of why there is none)."""
    if isinstance(got, str):
        return replace(row, chain=None, token=None, problem=got)
    if got.offset < 0:
        return replace(row, chain=None, token=None, problem=no_chain)
    return replace(row, offset=int(got.offset), chain=bytes(got.chain), token=got.token)


def judge(rows: list[NodeDigest], leader: int | None) -> list[NodeDigest]:
    """The rows with `differs` set on each node whose value is not the one most nodes hold."""
    counts = collections.Counter(r.chain for r in rows if r.chain is not None)
    if len(counts) <= 1:
        return rows
    best = max(counts.values())
    tied = [value for value, n in counts.items() if n == best]
    reference = tied[0]
    if len(tied) > 1:
        leaders = [r.chain for r in rows if r.chain in tied and r.node_id == leader]
        if leaders and leaders[0] is not None:
            reference = leaders[0]
    return [replace(r, differs=r.chain is not None and r.chain != reference) for r in rows]


async def _connect(address: str, security: ClientSecurity | None) -> AdminClient | str:
    """A client of the node at `address`, or why it cannot be reached."""
    from api.client import AdminClient

    try:
        async with asyncio.timeout(NODE_WAIT_S):
            return await AdminClient.connect(
                address,
                client_id="mlog-cli",
                timeout_ms=int(NODE_WAIT_S * 1000),
                security=security,
            )
    except TimeoutError:
        return f"unreachable: no answer within {NODE_WAIT_S:g} s"
    except Exception as exc:  # a refused, reset or unsecured connection: said in the row
        return f"unreachable: {exc}"


async def _digest(client: AdminClient, offset: int) -> Any:
    """The node's DescribeLogDigest answer at `offset`, or why there is none."""
    try:
        async with asyncio.timeout(NODE_WAIT_S):
            return await client.log_digest(offset)
    except TimeoutError:
        return f"no answer within {NODE_WAIT_S:g} s"
    except Exception as exc:  # refused (authorization, trimmed offset, no such API): said
        return f"no digest: {exc}"


def print_digests(digests: QuorumDigests, out: TextIO) -> str | None:
    """Print the digests' section; the one-line error naming the nodes that differ, if any."""
    out.write("\n")  # a section of its own, after the replicas' table
    if digests.offset is None:
        out.write("Digests: no node answered one (nothing committed, or no hash chain yet)\n")
    else:
        out.write(f"Digests at offset {digests.offset} (each node's hash chain value there):\n")
    rows = []
    for node in digests.nodes:
        if node.chain is None:
            shown = node.problem or "-"
        else:
            shown = node.chain.hex() + ("  DIFFERS" if node.differs else "")
        rows.append(["-" if node.node_id is None else node.node_id, node.address, shown])
    print_table(rows, ["NodeId", "Address", "Digest"], out)
    return differing_error(digests)


def digests_verdict(error: str | None) -> int:
    """The command's exit code: 0 when the digests agree; else 1, the error line on stderr.

    1, as for damaged log data (`mlog log verify`): a node's log is not the others'.
    """
    if error is None:
        return EXIT_OK
    sys.stderr.write(f"mlog: error: {error}\n")
    return EXIT_DAMAGED


def differing_error(digests: QuorumDigests) -> str | None:
    """The one-line error naming the nodes whose digest differs (None: they agree)."""
    differing = digests.differing
    if not differing:
        return None
    names = ", ".join(n.label for n in differing)
    return (
        f"the digest of {names} at offset {digests.offset} differs from the other nodes': "
        "its log up to that offset is not theirs (an edited disk?); run `mlog log verify` on "
        "its data directory"
    )
