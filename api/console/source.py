"""The handle a console session reads through: `Metadata`, its calls on a worker thread.

`Metadata` is synchronous (a data directory is read with blocking file reads; a server is
asked through the CLI's `RemoteTarget`, which runs its client on a private event loop), so
the console never calls it on its own event loop: each call runs on a thread, one at a time
per handle (a `RemoteTarget` is one connection, and its loop runs one call at a time).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from api.client.connection import ConnectionLost
from api.console.map_counts import NamespaceCounts
from api.python_api import Metadata
from api.security.client_config import ClientSecurity, SecurityProtocol
from api.service.settings import load_settings
from api.targets import RemoteTarget

T = TypeVar("T")

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """Where the console reads: a data directory, or servers (and their client config)."""

    data_dir: Path | None = None
    archive_url: str | None = None
    """The archive a data directory's history continues in, below its local log start."""
    archive_cache: Path | None = None
    """Where that archive's segments are kept once downloaded (its default if None)."""
    bootstrap_server: str | None = None
    security: ClientSecurity | None = None
    """The client config of `--command-config` (TLS settings); its login is replaced by the
    signed-in user's."""

    @property
    def remote(self) -> bool:
        """Whether the console reads through a server."""
        return self.bootstrap_server is not None

    @property
    def shown(self) -> str:
        """Where it reads, in words, for the pages."""
        if self.bootstrap_server is not None:
            return f"servers {self.bootstrap_server}"
        if self.archive_url is not None:
            return f"data directory {self.data_dir} over the archive {self.archive_url}"
        return f"data directory {self.data_dir}"


SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


def user_security(origin: Origin, user: str, password: str) -> ClientSecurity:
    """The client config that logs in as `user` by SCRAM, keeping the configured TLS.

    A SCRAM mechanism named by the client config is used; otherwise SCRAM-SHA-512.
    """
    base = origin.security or ClientSecurity()
    protocol = SecurityProtocol.SASL_SSL if base.protocol.tls else SecurityProtocol.SASL_PLAINTEXT
    mechanism = base.mechanism if base.mechanism in SCRAM_MECHANISMS else SCRAM_MECHANISMS[0]
    return dataclasses.replace(
        base, protocol=protocol, mechanism=mechanism, username=user, password=password
    )


class HistorySource:
    """One `Metadata` handle and the lock that keeps its calls one at a time."""

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata
        self._lock = asyncio.Lock()
        self.map_counts = None if metadata.remote else NamespaceCounts()
        """The partition map's namespace counts, carried from image to image of this handle
        (used only inside its calls, which run one at a time). None through servers: each
        ImageAt answer is decoded apart, so two images share nothing to carry, and walking
        both would only add to the count (0.5 s at 100,000 topics)."""

    async def call(self, read: Callable[[Metadata], T]) -> T:
        """Run `read(metadata)` on a worker thread, after any call before it has ended.

        A server's connection lost on the way is made again (to another node if that one is
        gone) and `read` runs once more; a second loss is the caller's error.
        """
        async with self._lock:
            try:
                return await asyncio.to_thread(read, self.metadata)
            except ConnectionLost:
                if not self.metadata.remote:
                    raise
            # The server was lost (killed, or a leader gone in a failover): connect again to
            # another node and ask once more (the console only reads: asking twice is safe).
            logger.warning("console: the server's connection was lost; connecting again")
            await asyncio.to_thread(self.metadata.reconnect)
            return await asyncio.to_thread(read, self.metadata)

    async def close(self) -> None:
        """Close the handle (its connection), after the call running on it."""
        async with self._lock:
            await asyncio.to_thread(self.metadata.close)


def open_local(
    data_dir: Path, *, archive_url: str | None = None, archive_cache: Path | None = None
) -> Metadata:
    """A read handle on a data directory (never written: the console only reads).

    With `archive_url`, the history below the local log start is read from that archive.
    """
    return Metadata.open(data_dir, archive_url=archive_url, archive_cache=archive_cache)


def connect_as(origin: Origin, user: str, password: str) -> Metadata:
    """A handle on the servers, logged in as `user` (blocking: call it on a worker thread).

    The login is the service's: a refused password fails here, as it would for any client.
    The console only reads: of a quorum's servers it reads from one that is not the leader
    when the list holds one (each node answers from its own committed log), so that pages do
    not slow the leader's writes.
    """
    if origin.bootstrap_server is None:
        raise ValueError("connect_as needs servers to connect to")
    security = user_security(origin, user, password)
    target = RemoteTarget(origin.bootstrap_server, security=security, reads_only=True)
    settings = dataclasses.replace(
        load_settings(bootstrap_server=origin.bootstrap_server),
        bootstrap_server=origin.bootstrap_server,
    )
    return Metadata(target, settings)
