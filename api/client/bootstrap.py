"""A comma-separated bootstrap list (`h1:9091,h2:9092`), tried in turn as Kafka's tools do.

A server that accepts connections but never answers (a hung process, one stopped with SIGSTOP:
its kernel still completes the TCP handshake) would hold the list on it for the whole request
timeout. So each server of a list of several gets a setup deadline, `SETUP_TIMEOUT_MS` (or the
client config's `socket.connection.setup.timeout.ms`): connect, TLS and an ApiVersions answer
within it, or the next server is tried. Kafka's own default for that key is 10 s, for clients
that live long and reconnect in the background; a command run once by hand, with the rest of
the list to try, waits 2 s: a healthy node, even a busy one, answers ApiVersions in
milliseconds (its event loop answers it without touching the log). Only if no server of the
list answers in time is each tried again without the deadline, so a list of slow but live
servers still works as it did. A list of one server has nothing to fall back on: no deadline.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from api.client.admin import AdminClient
from api.client.connection import (
    DEFAULT_TIMEOUT_MS,
    ClientError,
    ConnectionSetupTimeout,
    parse_bootstrap,
)
from api.security.client_config import ClientSecurity

if TYPE_CHECKING:
    from collections.abc import Sequence

SETUP_TIMEOUT_MS = 2_000
"""How long each server of a bootstrap list of several gets to connect and answer ApiVersions
before the next one is tried (unless the client config sets socket.connection.setup.timeout.ms)."""


def bootstrap_addresses(text: str) -> list[str]:
    """The `HOST:PORT` addresses of a comma-separated list, each checked, duplicates dropped."""
    addresses = [part.strip() for part in text.split(",") if part.strip()]
    if not addresses:
        raise ClientError(
            f"bootstrap server list {text!r} names no server; give HOST:PORT[,HOST:PORT...]"
        )
    for address in addresses:
        parse_bootstrap(address)  # a malformed one is refused before any is tried
    return list(dict.fromkeys(addresses))


async def connect_bootstrap(
    text: str,
    *,
    client_id: str = "mlog",
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    security: ClientSecurity | None = None,
    setup_timeout_ms: int = SETUP_TIMEOUT_MS,
    reads_only: bool = False,
) -> AdminClient:
    """Connect to the controller through the first address of `text` that answers.

    Each address is tried in turn (`AdminClient.connect_controller`), within the setup
    deadline (`security.setup_timeout_ms` if the client config sets it, else
    `setup_timeout_ms`) when there are several; the others are kept as the client's
    `bootstrap` for its retries. Refused by all: `ClientError` naming each. Of a quorum's
    addresses, the leader's is taken when listed (`towards_leader`); with `reads_only`
    (a client that never writes: the console), a node other than the leader
    (`towards_follower`), so that its reads do not share the leader with the writes.
    """
    addresses = bootstrap_addresses(text)
    if len(addresses) == 1:
        return await AdminClient.connect_controller(
            addresses[0], client_id=client_id, timeout_ms=timeout_ms, security=security
        )
    given = security or ClientSecurity()
    deadline = given.setup_timeout_ms or setup_timeout_ms
    hurried = dataclasses.replace(given, setup_timeout_ms=deadline)
    failures: list[str] = []
    late: list[str] = []
    for address in addresses:
        client = await _try(
            address,
            client_id=client_id,
            timeout_ms=timeout_ms,
            security=hurried,
            failures=failures,
            late=late,
        )
        if client is not None:
            return await _placed(_keeping(client, addresses), addresses, reads_only)
    # Nobody answered in time: the slow ones again, each with the request timeout.
    patient = dataclasses.replace(given, setup_timeout_ms=None)
    for address in late:
        client = await _try(
            address,
            client_id=client_id,
            timeout_ms=timeout_ms,
            security=patient,
            failures=failures,
            late=[],
        )
        if client is not None:
            return await _placed(_keeping(client, addresses), addresses, reads_only)
    raise ClientError(
        f"no server of the bootstrap list answered ({'; '.join(failures)}); is `mlog serve` "
        "running at one of them?"
    )


async def _try(
    address: str,
    *,
    client_id: str,
    timeout_ms: int,
    security: ClientSecurity,
    failures: list[str],
    late: list[str],
) -> AdminClient | None:
    """The controller found from `address`, or None (why: in `failures`; too slow: `late`)."""
    try:
        return await AdminClient.connect_controller(
            address, client_id=client_id, timeout_ms=timeout_ms, security=security
        )
    except ConnectionSetupTimeout as exc:
        late.append(address)
        failures.append(f"{address}: {exc}")
    except (ClientError, OSError) as exc:
        failures.append(f"{address}: {exc}")
    return None


async def _placed(client: AdminClient, addresses: Sequence[str], reads_only: bool) -> AdminClient:
    if reads_only:
        return await client.towards_follower(addresses)
    return await client.towards_leader(addresses)


def _keeping(client: AdminClient, addresses: Sequence[str]) -> AdminClient:
    client.bootstrap = list(dict.fromkeys([*client.bootstrap, *addresses]))
    return client
