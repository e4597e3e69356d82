"""The console in a real Chromium (Debian's `chromium`, driven by Playwright): marker `browser`.

The console runs on its own event loop thread over the shared history; each test drives a
fresh browser context (no cookies). Skipped, with the reason, where Playwright or chromium
is missing (`make browser` installs chromium; Playwright is a test dependency).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from api.console.serve import serve
from api.console.source import Origin
from replay.controller.authorizer import AuthorizerConfig
from tests.support.console import (
    DENIED_NAMESPACE,
    DENIED_VALUE,
    HOSTILE,
    PASSWORD,
    build_denied_history,
    quorum_leader,
    scram_quorum,
)
from tests.support.quorum_processes import mlog
from tests.support.sasl_users import SASL, USERS
from tests.support.server_thread import running_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("MLOG_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = os.environ.get("MLOG_CONSOLE_SCREENSHOTS")
"""A directory to save a screenshot of each view into (docs/console.md's images)."""


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (`make test` installs the test dependencies)"
    if not Path(CHROMIUM).is_file():
        return f"chromium is missing ({CHROMIUM}): `make browser` installs Debian's package"
    return None


@contextlib.contextmanager
def _console(origin: Origin) -> Iterator[str]:
    """The console over `origin`, served on 127.0.0.1 from a thread of its own; its URL."""
    started: Future[str] = Future()
    loop = asyncio.new_event_loop()

    async def run() -> None:
        ready: asyncio.Future[str] = loop.create_future()
        ready.add_done_callback(lambda f: started.set_result(f.result()))
        await serve(
            origin,
            host="127.0.0.1",
            port=0,
            tls=None,
            session_seconds=600,
            started=ready,
        )

    task: list[asyncio.Task[None]] = []

    def main() -> None:
        task.append(loop.create_task(run()))
        try:
            loop.run_until_complete(task[0])
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    try:
        yield started.result(timeout=60)
    finally:
        loop.call_soon_threadsafe(task[0].cancel)
        thread.join(timeout=60)


@pytest.fixture(scope="module")
def console_url(history_dir: Path) -> Iterator[str]:
    """The console over the history."""
    with _console(Origin(data_dir=history_dir)) as url:
        yield url


@pytest.fixture(scope="module")
def denied_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The console over a server with an authorizer (`build_denied_history`); its URL and
    the denied topic's id."""
    if _browser_missing() is not None:
        pytest.skip(str(_browser_missing()))
    data_dir = tmp_path_factory.mktemp("denied") / "data"
    vault_id = build_denied_history(data_dir)
    with (
        running_server(
            data_dir / "log", brokers=0, listeners=[SASL], authorizer=AuthorizerConfig()
        ) as server,
        _console(Origin(bootstrap_server=server.address)) as url,
    ):
        yield url, vault_id


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    missing = _browser_missing()
    if missing is not None:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    dialogs: list[str] = []

    def dialog_opened(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", dialog_opened)
    yield opened
    context.close()
    assert not dialogs, f"a script ran in the page: {dialogs}"


def _sign_in(page: Page, user: str = "alice", password: str = PASSWORD) -> None:
    page.fill("#user", user)
    page.fill("#password", password)
    page.click("#sign-in")


def _shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


def test_login_and_logout(page: Page, console_url: str) -> None:
    page.goto(console_url + "timeline")
    assert "/login" in page.url
    _shot(page, "login")
    _sign_in(page, password="wrong")
    assert page.inner_text("#error") == "user or password refused"
    _sign_in(page)
    assert page.url.endswith("/timeline")
    assert page.inner_text("#principal") == "User:alice"
    assert "No authorizer" in page.inner_text("#authorizer")
    page.click("#logout")
    assert "/login" in page.url
    page.goto(console_url + "timeline")
    assert "/login" in page.url


def test_the_timeline_filters_into_its_url(page: Page, console_url: str) -> None:
    page.goto(console_url + "login")
    _sign_in(page)
    _shot(page, "timeline")
    page.select_option("select[name=entity]", "config")
    page.click("#apply")
    assert "entity=config" in page.url
    table = page.inner_text("#timeline")
    assert "retention.ms 86400000 -> 3600000" in table
    assert "RegisterBroker" not in table
    hostile = page.inner_text("#timeline")
    assert "<script>alert(2)</script>" in hostile  # shown as text, and no dialog opened


def test_a_deep_link_reopened_shows_the_same_point(
    browser: Browser, page: Page, console_url: str
) -> None:
    link = console_url + "cluster?at=5&topic=orders"
    page.goto(link)
    _sign_in(page)
    assert page.url == link
    assert page.inner_text("#offset") == "7"
    assert "payments" not in page.inner_text("#topics")
    partitions = page.inner_text("#partitions")
    _shot(page, "cluster")
    again = browser.new_context()
    try:
        reopened = again.new_page()
        reopened.goto(link)
        assert "/login" in reopened.url  # a new browser has no session
        _sign_in(reopened)
        assert reopened.url == link
        assert reopened.inner_text("#offset") == "7"
        assert reopened.inner_text("#partitions") == partitions
    finally:
        again.close()


def test_the_slider_moves_the_point_and_compare_shows_the_change(
    page: Page, console_url: str
) -> None:
    page.goto(console_url + "cluster")
    _sign_in(page)
    page.fill("#slider", "9")
    page.click("#slide")
    assert "at=9" in page.url
    assert page.inner_text("#offset") == "9"
    page.goto(console_url + "diff?from=8&to=9")
    assert "3600000" in page.inner_text("#changes")
    _shot(page, "compare")


def test_an_entity_name_opens_its_history(page: Page, console_url: str) -> None:
    page.goto(console_url + "timeline?entity=topic")
    _sign_in(page)
    page.click("#timeline a[href='/entity?topic=orders']")
    assert page.url.endswith("/entity?topic=orders")
    assert page.inner_text("#entity") == "orders"
    history = page.inner_text("#history")
    assert "retention.ms=3600000" in history
    _shot(page, "entity")
    page.goto(console_url + "entity?topic=payments")
    assert "<script>alert(2)</script>" in page.inner_text("#history")  # text, no dialog


def test_the_partition_map_drills_down_to_a_topics_partitions(page: Page, console_url: str) -> None:
    page.goto(console_url + "map")
    _sign_in(page)
    assert page.url.endswith("/map")
    assert "(default)" in page.inner_text("#map")
    page.click("#map a[href='/map?namespace=']")
    assert "orders" in page.inner_text("#map") and "payments" in page.inner_text("#map")
    page.click("#map a[href='/map?topic=orders']")
    assert page.url.endswith("/map?topic=orders")
    assert page.locator("#map td.role.leader").count() == 3
    _shot(page, "map")
    page.click("#up-cluster")
    assert page.url.endswith("/map")


def test_the_charts_draw_the_logs_changes(page: Page, console_url: str) -> None:
    page.goto(console_url + "charts?after=-1")
    _sign_in(page)
    assert page.locator("svg.chart").count() == 4
    assert page.locator("svg.chart rect").count() >= 2
    numbers = page.locator("table.numbers").first.text_content() or ""
    assert "<script>alert(2)</script>" in numbers  # the hostile principal, as text
    _shot(page, "charts")
    page.click("#by-day")
    assert "by=day" in page.url
    page.goto(console_url + "entity?topic=orders")
    assert page.locator("#entity-charts svg.chart").count() == 3


def test_a_denied_namespace_is_on_no_page(page: Page, denied_url: tuple[str, str]) -> None:
    url, vault_id = denied_url
    page.goto(url + "cluster")
    _sign_in(page, "bob", USERS["bob"])
    assert page.inner_text("#principal") == "User:bob"
    assert "through the service as User:bob" in page.inner_text("#authorizer")
    assert "orders" in page.inner_text("#topics")  # what he may see is there
    for path in (
        "cluster",
        "cluster?q=vau",
        "map",
        "map?namespace=",
        "timeline",
        "timeline?q=vau",
        "timeline.csv",
        "timeline.json",
        "diff?from=-1",
        "charts",
        "entity?topic=orders",
    ):
        answer = page.goto(url + path)
        assert answer is not None and answer.status in (200, 403), path
        shown = page.content()
        for marker in (DENIED_NAMESPACE, "vault", vault_id, DENIED_VALUE):
            assert marker not in shown, (path, marker)
    assert "Not allowed" in page.inner_text("main")  # the log is not his to read


def test_the_health_page_checks_a_kept_digest(page: Page, console_url: str) -> None:
    page.goto(console_url + "health")
    _sign_in(page)
    assert page.url.endswith("/health")
    assert "a data directory" in page.inner_text("#quorum")
    token = page.inner_text("#digest")
    page.fill("#pasted", token)
    page.click("#check-digest")
    assert page.inner_text("#verdict").startswith("matches")
    _shot(page, "health")
    page.fill("#pasted", HOSTILE)
    page.click("#check-digest")
    error = page.inner_text("#error")
    assert "is not a digest token" in error
    assert "<script>alert(2)</script>" in error  # the pasted text shown as text, no dialog


def _following(page: Page) -> None:
    """Wait until the page's script follows the log (it says so), and mark the page."""
    page.wait_for_selector("#live:has-text('following new entries')", timeout=30_000)
    page.evaluate("() => { window.mlogNotReloaded = true; }")


def _row_appears(page: Page, text: str) -> None:
    page.locator("#timeline td", has_text=text).first.wait_for(timeout=90_000)
    assert page.evaluate("() => window.mlogNotReloaded") is True  # the same page, not reloaded


@pytest.mark.process
def test_the_live_timeline_shows_a_write_made_by_the_cli(
    page: Page, history_dir: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(history_dir, data_dir)
    with _console(Origin(data_dir=data_dir)) as url:
        page.goto(url + "timeline")
        _sign_in(page)
        _following(page)
        mlog("namespaces", "create", "--namespace", "live", "--data-dir", str(data_dir))
        _row_appears(page, "live")
        page.goto(url + "cluster")  # the cluster "now" follows too
        page.evaluate("() => { window.mlogNotReloaded = true; }")
        mlog("namespaces", "create", "--namespace", "later", "--data-dir", str(data_dir))
        page.locator("#namespaces td", has_text="later").first.wait_for(timeout=90_000)
        assert page.evaluate("() => window.mlogNotReloaded") is True


def _create_namespace(name: str, bootstrap: str, config: Path, timeout: float = 90) -> None:
    """`mlog namespaces create` through the quorum, again while it elects a new leader."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            mlog(
                *("namespaces", "create", "--namespace", name),
                *("--bootstrap-server", bootstrap, "--command-config", str(config)),
            )
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _follows_past_a_kill(page: Page, tmp_path: Path, *, leader_first: bool) -> None:
    """A page following the log shows a write made after the first listed node is killed."""
    with scram_quorum(tmp_path / "quorum") as (quorum, alice):
        leader = quorum_leader(quorum)
        nodes = sorted(quorum.nodes.values(), key=lambda n: (n.node_id == leader) != leader_first)
        bootstrap = ",".join(n.address for n in nodes)
        with _console(Origin(bootstrap_server=bootstrap)) as url:
            page.goto(url + "timeline?newest=1")
            _sign_in(page)
            _following(page)
            _create_namespace("before", bootstrap, alice)
            _row_appears(page, "before")
            quorum.kill(nodes[0].node_id)
            _create_namespace("after", bootstrap, alice)
            _row_appears(page, "after")
            assert "User:alice" in page.inner_text("#timeline")


@pytest.mark.process
def test_a_page_following_the_log_survives_a_killed_leader(page: Page, tmp_path: Path) -> None:
    # Listed first, yet the console reads from a follower: the writes go on through the
    # next leader and the page shows them.
    _follows_past_a_kill(page, tmp_path, leader_first=True)


@pytest.mark.process
def test_a_page_following_the_log_survives_its_server_killed(page: Page, tmp_path: Path) -> None:
    # A follower listed first: the console's session reads from it, the node killed.
    _follows_past_a_kill(page, tmp_path, leader_first=False)
