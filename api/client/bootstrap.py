"""A comma-separated bootstrap list (`h1:9091,h2:9092`), tried in turn as Kafka's tools do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.client.admin import AdminClient
from api.client.connection import DEFAULT_TIMEOUT_MS, ClientError, parse_bootstrap

if TYPE_CHECKING:
    from api.security.client_config import ClientSecurity


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
) -> AdminClient:
    """Connect to the controller through the first address of `text` that answers.

    Each address is tried in turn (`AdminClient.connect_controller`); the others are kept
    as the client's `bootstrap` for its retries. Refused by all: `ClientError` naming each.
    """
    addresses = bootstrap_addresses(text)
    failures: list[str] = []
    for address in addresses:
        try:
            client = await AdminClient.connect_controller(
                address, client_id=client_id, timeout_ms=timeout_ms, security=security
            )
        except (ClientError, OSError) as exc:
            if len(addresses) == 1:
                raise
            failures.append(f"{address}: {exc}")
            continue
        client.bootstrap = list(dict.fromkeys([*client.bootstrap, *addresses]))
        return await client.towards_leader(addresses)
    raise ClientError(
        f"no server of the bootstrap list answered ({'; '.join(failures)}); is `mlog serve` "
        "running at one of them?"
    )
