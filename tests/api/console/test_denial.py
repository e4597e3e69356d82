"""A principal denied DESCRIBE on a namespace sees it nowhere in the console.

The console over a server with an authorizer: each session reads through its own connection,
logged in as its user, so the server decides what a page may show. bob may DESCRIBE every
topic and namespace but the namespace `covert` (a DENY), and may not read the log: the
present image comes to him without `covert` and its topic (the server's filtered ImageAt),
and every page that reads the log or its past (the timeline and its search and exports, the
cluster and the map at a past point, compare, the charts, an entity's history) is refused
(403). alice may read the log (CLUSTER_ACTION): every page shows her `covert`, which is what
makes bob's pages a proof.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.console.app import make_app
from api.console.source import Origin
from api.server.server import MetadataServer
from replay.controller.authorizer import AuthorizerConfig
from tests.support.console import DENIED_VALUE, Client, build_denied_history, sign_in
from tests.support.sasl_users import SASL, USERS
from tests.support.server_thread import running_server

PAST = "9"
"""A point before the hidden namespace was made."""

VIEWS = [
    "/timeline",
    "/timeline?q=vau",
    "/timeline?entity=namespace",
    "/timeline.csv",
    "/timeline.json",
    "/timeline.json?q=cov",
    "/cluster",
    "/cluster?q=vau",
    "/cluster?at=" + PAST,
    "/map",
    "/map?namespace=&page=0",
    "/map?at=" + PAST,
    "/diff?from=-1",
    "/diff?from=" + PAST,
    "/charts",
    "/charts?by=day",
    "/entity?broker=1",
]
"""Every view, by URLs that do not name the hidden namespace or its topic."""

NAMED = [
    "/cluster?topic=covert:vault",
    "/map?namespace=covert",
    "/map?topic=covert:vault",
    "/entity?namespace=covert",
    "/entity?topic=covert:vault",
]
"""Views of the hidden namespace and its topic by name."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MetadataServer, str]]:
    """The denied history (`build_denied_history`) served with an authorizer."""
    data_dir = tmp_path_factory.mktemp("denial") / "data"
    vault_id = build_denied_history(data_dir)
    with running_server(
        data_dir / "log", brokers=0, listeners=[SASL], authorizer=AuthorizerConfig()
    ) as running:
        yield running, vault_id


async def _console(address: str, user: str) -> AsyncIterator[Client]:
    app = make_app(Origin(bootstrap_server=address), None)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        assert await sign_in(client, user, USERS[user]) == 303
        yield client


@pytest.fixture
async def bob(server: tuple[MetadataServer, str]) -> AsyncIterator[Client]:
    async for client in _console(server[0].address, "bob"):
        yield client


@pytest.fixture
async def alice(server: tuple[MetadataServer, str]) -> AsyncIterator[Client]:
    async for client in _console(server[0].address, "alice"):
        yield client


async def test_a_denied_namespace_is_on_no_page(
    bob: Client, server: tuple[MetadataServer, str]
) -> None:
    vault_id = server[1]
    seen: dict[str, int] = {}
    for path in VIEWS:
        answer = await bob.get(path)
        body = await answer.text()
        assert answer.status in (200, 403), (path, answer.status, body[:300])
        for marker in ("covert", "vault", vault_id, DENIED_VALUE):
            assert marker not in body, (path, marker)
        seen[path] = answer.status
    for path in NAMED:
        answer = await bob.get(path)
        body = await answer.text()
        assert answer.status in (400, 403), (path, answer.status)
        assert vault_id not in body and DENIED_VALUE not in body, path
        if answer.status == 400:  # answered as for a name that never existed
            missing = await bob.get(path.replace("covert", "absent"))
            assert missing.status == 400
            assert (await missing.text()).replace("absent", "covert") == body
    # The present image is his to see, without the namespace; the log is not.
    assert seen["/cluster"] == seen["/map"] == seen["/map?namespace=&page=0"] == 200
    assert seen["/timeline"] == seen["/timeline.json"] == seen["/charts"] == 403
    cluster = await (await bob.get("/cluster")).text()
    assert "orders" in cluster and "payments" in cluster


async def test_a_principal_that_may_read_the_log_sees_it_on_every_page(
    alice: Client, server: tuple[MetadataServer, str]
) -> None:
    vault_id = server[1]
    for path in VIEWS + NAMED:
        answer = await alice.get(path)
        body = await answer.text()
        assert answer.status == 200, (path, answer.status, body[:300])
        if path.startswith(("/charts", "/entity?broker", "/map?namespace=&")) or PAST in path:
            continue  # counts by principal and kind; a broker's; a point before it was made
        if path == "/map":
            assert 'href="/map?namespace=covert"' in body
            continue
        assert "covert" in body or vault_id in body or DENIED_VALUE in body, path
