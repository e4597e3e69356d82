"""What the quorum's shell needs of a transport: send requests, get answers by callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class QuorumTransport(Protocol):
    """Sends the core's requests to the other nodes; their answers come back by callback."""

    def send(self, destination: int, message: Any) -> bool:
        """Send a request (never blocks; False: dropped, e.g. the link is down)."""

    async def close(self) -> None:
        """Close every link."""


TransportFactory = Callable[[Callable[[int, Any], None]], QuorumTransport]
"""Makes the transport, given the callback its answers go to: `(source node id, message)`."""
