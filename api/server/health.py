"""Whether a server is live and ready: what `/healthz` and `/readyz` answer and `mlog status` shows.

Live: the process serves (its event loop answers). Ready: it can answer from its image: the
image is applied (standalone: always, once open; a quorum node: up to the high watermark it
knows), a quorum node knows a leader, and it has not stopped on a failure. Whether writes are
possible here is reported beside it (a follower is ready and sends writes to the leader; a
standalone service whose disk is full is ready for reads and refuses writes until it heals).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from api.protocol.quorum.messages import NO_LEADER

if TYPE_CHECKING:
    from api.raft.node import QuorumNode
    from api.service.service import MetadataService


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """A server's readiness and why, as one value (JSON for `/readyz`, a table for the CLI)."""

    ready: bool
    role: str
    """`standalone`, or the quorum role: `leader`, `follower`, `candidate`, ..."""
    image_applied: bool
    leader_id: int
    """The quorum's leader as this node knows it (-1: none known; a standalone: itself)."""
    epoch: int
    committed_offset: int
    """The last committed offset (-1: nothing yet)."""
    applied_offset: int
    """The offset of the image answers come from (-1: empty)."""
    writes: bool
    """Whether this node takes writes now."""
    reason: str
    """Why it is not ready or does not take writes ("" when it is ready and takes them)."""

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON object."""
        return asdict(self)


def health(service: MetadataService, node: QuorumNode | None, *, node_id: int) -> Health:
    """The readiness of a server over `service` (and its quorum `node`, if any)."""
    applied = service.image.provenance.offset
    if node is None:
        failure = service.failure
        return Health(
            ready=True,
            role="standalone",
            image_applied=True,
            leader_id=node_id,
            epoch=0,
            committed_offset=applied,
            applied_offset=applied,
            writes=failure is None,
            reason="" if failure is None else f"writes refused: {failure}",
        )
    committed = node.core.high_watermark - 1
    leader = node.leader_id
    image_applied = applied >= committed
    reasons: list[str] = []
    if node.failed is not None:
        reasons.append(f"stopped: {node.failed}")
    if leader == NO_LEADER:
        reasons.append("no leader known (an election is under way)")
    if not image_applied:
        reasons.append(f"image at offset {applied}, committed offset {committed}")
    ready = not reasons
    writes = node.leading and node.failed is None and service.failure is None
    if not writes and ready:
        reasons.append(
            f"writes go to the leader, node {leader}"
            if leader != node_id
            else "the leader takes writes once its epoch's first entry is committed"
        )
    if service.failure is not None:
        reasons.append(f"writes refused: {service.failure}")
    return Health(
        ready=ready,
        role=node.role.name.lower(),
        image_applied=image_applied,
        leader_id=leader,
        epoch=node.epoch,
        committed_offset=committed,
        applied_offset=applied,
        writes=writes,
        reason="; ".join(reasons),
    )
