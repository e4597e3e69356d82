"""The health and trust page: quorum, brokers, digest, and a pasted digest checked."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api import Metadata
from api.console.app import make_app
from api.console.source import HistorySource, Origin, open_local
from api.server.server import MetadataServer
from replay.controller.authorizer import AuthorizerConfig
from tests.support.chain_attacks import rewrite_entries
from tests.support.console import HOSTILE, Client, build_history, sign_in
from tests.support.sasl_users import SASL, USERS
from tests.support.server_thread import running_server


def _token(html: str) -> str:
    found = re.search(r'<code id="digest">([^<]+)</code>', html)
    assert found is not None, html
    return found.group(1)


def _other_chain(token: str) -> str:
    """The token with one hex digit of its chain value changed."""
    head, chain = token.split(":")[:3], token.split(":")[3]
    flipped = ("0" if chain[0] != "0" else "1") + chain[1:]
    return ":".join([*head, flipped, *token.split(":")[4:]])


def _blame_mallory_for(offset: int) -> Callable[[dict[str, Any]], bool]:
    """A `rewrite_entries` change: the entry at `offset` made by User:mallory instead."""

    def change(entry: dict[str, Any]) -> bool:
        if entry["offset"] != offset:
            return False
        entry["principal"] = "User:mallory"
        return True

    return change


async def test_a_data_directory_says_so_and_shows_its_digest(
    client: Client, history_dir: Path
) -> None:
    await sign_in(client)
    page = await client.get("/health")
    html = await page.text()
    assert page.status == 200
    assert "a data directory" in html and "not a quorum" in html
    for broker in (1, 2, 3):
        assert f"?broker={broker}" in html
    assert "keeps no sessions" in html
    with Metadata.open(history_dir) as md:
        expected = md.digest()
    assert _token(html) == expected.token()
    assert expected.token().startswith(f"mlog-digest:v2:{expected.offset}:")
    assert 'id="committed">18<' in html


async def test_the_chain_is_verified_when_asked(client: Client) -> None:
    await sign_in(client)
    html = await (await client.get("/health")).text()
    assert 'id="verify"' in html  # not read unless asked
    verified = await (await client.get("/health?verify=1")).text()
    assert "intact up to offset 18" in verified


async def test_a_kept_digest_matches_and_another_does_not(client: Client) -> None:
    await sign_in(client)
    token = _token(await (await client.get("/health")).text())
    same = await client.get("/health", params={"digest": token})
    html = await same.text()
    assert same.status == 200
    assert "<b>matches</b>" in html
    assert "is the one the digest was taken from" in html
    other = await (await client.get("/health", params={"digest": _other_chain(token)})).text()
    assert "<b>does not match</b>" in other


@pytest.mark.parametrize(
    "garbage",
    [
        "not a token",
        "mlog-digest:v2:5:zz",
        HOSTILE,
        "mlog-digest:v1:99999999999999999999:" + "0" * 64,
        "x" * 1000,
    ],
)
async def test_a_pasted_garbage_token_is_a_one_line_error(client: Client, garbage: str) -> None:
    await sign_in(client)
    answer = await client.get("/health", params={"digest": garbage})
    html = await answer.text()
    assert answer.status == 400
    assert "Traceback" not in html
    assert "<script>alert" not in html and "<img src=x" not in html
    error = re.search(r'<p class="error" id="error">([^<]*)</p>', html)
    assert error is not None and "\n" not in error.group(1)
    assert "digest" in error.group(1)


async def test_a_bad_verify_flag_is_refused(client: Client) -> None:
    await sign_in(client)
    answer = await client.get("/health?verify=yes")
    assert answer.status == 400


async def test_an_edited_log_does_not_match_and_names_the_first_block(
    history_dir: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "data"
    shutil.copytree(history_dir, copy)
    with Metadata.open(copy) as md:
        kept = md.digest().token()
    (segment,) = sorted((copy / "log").glob("*.avro"))
    assert rewrite_entries(segment, _blame_mallory_for(9)) == 1
    app = make_app(Origin(data_dir=copy), HistorySource(open_local(copy)))
    async with TestClient(TestServer(app, host="127.0.0.1")) as edited:
        await sign_in(edited)
        html = await (await edited.get("/health", params={"digest": kept})).text()
    assert "<b>does not match</b>" in html
    assert 'id="first-block"' in html
    assert "BROKEN" in html


# ---------------------------------------------------------------------- through a server


@pytest.fixture
async def remote(server: MetadataServer) -> AsyncIterator[Client]:
    app = make_app(Origin(bootstrap_server=server.address), None)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


async def test_through_a_server_the_quorum_and_digest_are_the_services(
    remote: Client, server: MetadataServer
) -> None:
    assert await sign_in(remote) == 303
    page = await remote.get("/health")
    html = await page.text()
    assert page.status == 200
    assert 'id="leader">' in html  # a single server is its own quorum of one
    assert 'id="voters"' in html
    token = _token(html)
    assert token.startswith("mlog-digest:v1:18:")  # DescribeLogDigest's: the chain only
    assert "cannot read a node's files" in html
    same = await (await remote.get("/health", params={"digest": token})).text()
    assert "<b>matches</b>" in same
    other = await (await remote.get("/health", params={"digest": _other_chain(token)})).text()
    assert "<b>does not match</b>" in other
    past = "mlog-digest:v1:500:" + "0" * 64
    beyond = await (await remote.get("/health", params={"digest": past})).text()
    assert "<b>does not match</b>" in beyond and "offset 500" in beyond
    garbage = await remote.get("/health", params={"digest": HOSTILE})
    assert garbage.status == 400
    assert "<script>alert" not in await garbage.text()


async def test_a_principal_sees_only_what_it_may_describe(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    build_history(data_dir)
    with running_server(
        data_dir / "log",
        brokers=0,
        listeners=[SASL],
        authorizer=AuthorizerConfig(super_users=frozenset({"User:alice"})),
    ) as server:
        app = make_app(Origin(bootstrap_server=server.address), None)
        async with TestClient(TestServer(app, host="127.0.0.1")) as remote:
            assert await sign_in(remote, "bob", USERS["bob"]) == 303
            page = await remote.get("/health")
            html = await page.text()
            follow = await remote.get("/timeline/follow?after=18")
            pasted = await remote.get("/health", params={"digest": "mlog-digest:v1:18:" + "0" * 64})
            verdict = await pasted.text()
    assert page.status == 200
    assert "this principal may not describe the quorum" in html
    assert "may not read the log&#39;s digest" in html
    assert 'id="digest"' not in html
    assert "<b>cannot be checked</b>: this principal may not read" in verdict
    assert follow.status == 403  # FetchLog is the log's readers' (the script stops)
