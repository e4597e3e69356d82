"""Serving the console: `mlog console`'s flags, TLS from PEM files, cookies Secure under TLS."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import ssl
import subprocess
import sys
import weakref
from pathlib import Path

import aiohttp
import pytest
import trustme
from aiohttp.test_utils import TestClient, TestServer

from api.cancellation import cancel_and_wait
from api.cli.console import DEFAULT_NICENESS
from api.console.app import make_app
from api.console.errors import ConsoleError
from api.console.serve import collect_as_a_server, parse_listen, serve, tls_context
from api.console.sessions import LOGIN_CSRF_COOKIE, SESSION_COOKIE
from api.console.source import HistorySource, Origin, open_local
from api.service.gc_policy import _freeze_after_long_collection
from metadata_log.reader import LogReader
from tests.support.archives import SMALL_SEGMENT_ENV, trimmed_twins
from tests.support.cli import mlog, ok
from tests.support.collector import Cycle
from tests.support.console import PASSWORD, sign_in


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("[::1]:0", ("::1", 0))],
)
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["8080", "host:", ":80", "h:70000", "h:x"])
def test_a_bad_listen_address_says_what_fits(text: str) -> None:
    with pytest.raises(ConsoleError, match="is not HOST:PORT"):
        parse_listen(text)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listen", "nowhere"], "is not HOST:PORT"),
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "missing.pem", "--tls-key", "k.pem"], "--tls-cert missing.pem: no such"),
        (["--session-minutes", "0"], "is not a number of minutes"),
        (["--niceness", "20"], "is not a niceness (0..19"),
        (["--niceness", "-5"], "is not a niceness (0..19"),
    ],
)
def test_bad_flags_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _ = mlog(tmp_path, "console", *args)
    assert code == 2
    assert says in capsys.readouterr().err


def test_the_console_runs_below_the_controllers_priority(history_dir: Path) -> None:
    # On a controller's host the console takes the CPU the voters leave (docs/console.md).
    for flags, niceness in (([], DEFAULT_NICENESS), (["--niceness", "0"], 0)):
        console = subprocess.Popen(
            [
                *(sys.executable, "-m", "api.cli", "--data-dir", str(history_dir), "console"),
                *("--listen", "127.0.0.1:0", *flags),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert console.stdout is not None
            assert "serving" in console.stdout.readline()
            assert os.getpriority(os.PRIO_PROCESS, console.pid) == os.nice(0) + niceness
        finally:
            console.terminate()
            assert console.wait(60) == 0


def test_a_data_directory_without_a_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = mlog(tmp_path / "none", "console")
    assert code == 2
    assert "holds no log" in capsys.readouterr().err


def test_a_key_that_does_not_match_is_refused(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    other = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    other.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    with pytest.raises(ConsoleError, match="cannot load them"):
        tls_context(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))


async def test_cookies_are_secure_under_tls(history_dir: Path) -> None:
    app = make_app(
        Origin(data_dir=history_dir), HistorySource(open_local(history_dir)), secure=True
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        form = await client.get("/login")
        assert "Secure" in form.headers["Set-Cookie"]
        token = re.search(r'name="csrf" value="([^"]+)"', await form.text())
        assert token is not None
        answer = await client.post(
            "/login",
            data={"csrf": token.group(1), "user": "alice", "password": PASSWORD},
            cookies={LOGIN_CSRF_COOKIE: token.group(1)},
            allow_redirects=False,
        )
        assert answer.status == 303
        assert answer.cookies[SESSION_COOKIE]["secure"]


async def test_serve_answers_https(history_dir: Path, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    tls = tls_context(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(
        serve(
            Origin(data_dir=history_dir),
            host="127.0.0.1",
            port=0,
            tls=tls,
            session_seconds=60,
            started=started,
        )
    )
    try:
        async with asyncio.timeout(60):
            url = await started
        assert url.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context()
        ca.configure_trust(trust)
        async with (
            aiohttp.ClientSession() as session,
            session.get(url + "login", ssl=trust) as page,
        ):
            assert page.status == 200
            assert "Sign in" in await page.text()
    finally:
        await cancel_and_wait(serving)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--archive-url", "ftp://host/archive"], "ftp"),
        (["--archive-cache", "cache"], "--archive-cache is where an archive's segments are kept"),
    ],
)
def test_bad_archive_flags_are_one_line_errors(
    history_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _ = mlog(history_dir, "console", *args)
    assert code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def _timeline_rows(page: str) -> list[str]:
    """The rows of a timeline page's table, as their HTML."""
    return re.findall(r"<tr>.*?</tr>", page, flags=re.S)[1:]


async def test_the_timeline_reads_below_the_local_log_start_from_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A data directory trimmed below its snapshot after its segments were archived, and an
    # untrimmed twin: over the archive, the console shows the trimmed entries as the twin.
    for key, value in SMALL_SEGMENT_ENV.items():
        monkeypatch.setenv(key, value)
    trimmed, twin, url, _ = trimmed_twins(tmp_path, topics=12)
    with LogReader.open(trimmed / "log") as log:
        start = log.log_start_offset
    assert start > 0
    pages: dict[str, list[str]] = {}
    for name, data_dir, archive in (
        ("twin", twin, None),
        ("trimmed", trimmed, url),
        ("bare", trimmed, None),
    ):
        if name != "bare":  # alice, signed in as below (the CLI: the log is trimmed)
            ok(
                *(data_dir, "users", "scram-set", "--name", "alice"),
                *("--mechanism", "SCRAM-SHA-512", "--password-stdin"),
                stdin=PASSWORD + "\n",
            )
        cache = None if archive is None else tmp_path / "cache"
        origin = Origin(data_dir=data_dir, archive_url=archive, archive_cache=cache)
        local = HistorySource(open_local(data_dir, archive_url=archive, archive_cache=cache))
        async with TestClient(TestServer(make_app(origin, local), host="127.0.0.1")) as client:
            assert await sign_in(client) == 303
            answer = await client.get(f"/timeline?limit={start}&internal=1")
            text = await answer.text()
            if name == "bare":  # without the archive the page says the entries were trimmed
                assert answer.status == 400 and "trimmed from this log" in text, text
                continue
            assert answer.status == 200, (name, text)
            pages[name] = _timeline_rows(text)
    # A page ends at a batch's end: entries appended in one millisecond by one principal are
    # one batch to the timeline, so a page may hold a few rows past its limit.
    assert len(pages["twin"]) >= start
    assert pages["trimmed"] == pages["twin"]


@pytest.mark.usefixtures("collector")
async def test_the_console_freezes_as_a_server_and_sweeps_what_it_froze() -> None:
    sweeping = asyncio.create_task(collect_as_a_server(0.05))
    try:
        await asyncio.sleep(0)  # the policy is in place: long collections freeze
        assert _freeze_after_long_collection in gc.callbacks
        garbage = Cycle()
        gone = weakref.ref(garbage)
        del garbage
        gc.freeze()  # as a long collection's freeze would
        async with asyncio.timeout(60):
            while gone() is not None:  # the next sweep frees it
                await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait(sweeping)
