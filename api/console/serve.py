"""Serving the console: the listen address, TLS from PEM files, the run until interrupted."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from aiohttp import web

from api.console.app import make_app
from api.console.errors import ConsoleError
from api.console.sessions import SessionStore
from api.console.source import HistorySource, Origin, open_local
from api.service.gc_policy import freeze_loaded_image, sweep_frozen

SWEEP_SECONDS = 600.0
"""How often the console unfreezes everything for one full collection (`sweep_frozen`)."""


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 in brackets) as (host, port); `ConsoleError` says what fits."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConsoleError(
            f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:8080; a port 0..65535)"
        )
    return host, int(port)


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server TLS context from a PEM certificate chain and its PEM private key."""
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not Path(path).is_file():
            raise ConsoleError(f"{flag} {path}: no such file (a PEM file)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ConsoleError(
            f"--tls-cert/--tls-key: cannot load them ({exc.reason or exc}); give a PEM "
            "certificate chain and its unencrypted PEM private key"
        ) from None
    return context


async def serve(
    origin: Origin,
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    session_seconds: float,
    started: asyncio.Future[str] | None = None,
) -> None:
    """Serve the console until cancelled; `started` gets its URL once it listens."""
    local = (
        None
        if origin.remote or origin.data_dir is None
        else HistorySource(
            open_local(
                origin.data_dir,
                archive_url=origin.archive_url,
                archive_cache=origin.archive_cache,
            )
        )
    )
    app = make_app(origin, local, sessions=SessionStore(session_seconds), secure=tls is not None)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        try:
            await site.start()
        except OSError as exc:
            raise ConsoleError(
                f"--listen {host}:{port}: cannot listen there ({exc.strerror})"
            ) from None
        bound = runner.addresses[0]
        scheme = "https" if tls is not None else "http"
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        url = f"{scheme}://{shown}:{bound[1]}/"
        if started is not None and not started.done():
            started.set_result(url)
        else:
            print(f"mlog console: serving {origin.shown} at {url}", flush=True)
        await collect_as_a_server(SWEEP_SECONDS)
    finally:
        await runner.cleanup()


async def collect_as_a_server(sweep_seconds: float) -> None:
    """The cyclic collector's policy for the console, until cancelled.

    The console keeps images of past points (100,000s of objects each) to answer the next
    pages from; CPython's full collections walked them all every page or two (0.5 s of a
    1.2 s timeline page at 100,000 partitions). So, as a server does after its load
    (`freeze_loaded_image`), what survives a long collection is frozen; unlike a server's
    requests, pages make cycles of garbage, so every `sweep_seconds` one full collection of
    everything frees the cycles those freezes kept (`sweep_frozen`).
    """
    freeze_loaded_image()
    while True:
        await asyncio.sleep(sweep_seconds)
        sweep_frozen()
