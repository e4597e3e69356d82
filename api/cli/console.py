"""`mlog console`: the read-only web console over the history (api/console, docs/console.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
    bounded_int,
)
from api.cli.targets import COMMAND_CONFIG_ENV, archive_of

if TYPE_CHECKING:
    from api.service.settings import Settings


DEFAULT_NICENESS = 10
"""How much the console lowers its CPU priority by default: a console on a controller's host
(two cores, three voters) takes what the voters leave, not a share of their write path."""


def _minutes(text: str) -> int:
    return bounded_int(text, "a number of minutes", low=1, high=7 * 24 * 60, hint="1..10080")


def _niceness(text: str) -> int:
    return bounded_int(text, "a niceness", low=0, high=19, hint="0..19; 0 keeps the priority")


def cmd_console(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Serve the console on --listen until interrupted (Ctrl-C)."""
    from api.console.errors import ConsoleError
    from api.console.serve import parse_listen, serve, tls_context
    from api.console.source import Origin

    try:
        host, port = parse_listen(args.listen)
        if (args.tls_cert is None) != (args.tls_key is None):
            raise CliError("--tls-cert and --tls-key go together: give both PEM files, or neither")
        tls = None if args.tls_cert is None else tls_context(args.tls_cert, args.tls_key)
    except ConsoleError as exc:
        raise CliError(str(exc)) from None
    if settings.bootstrap_server:
        security = None
        config = getattr(args, "command_config", None) or os.environ.get(COMMAND_CONFIG_ENV)
        if config:
            from api.security.client_config import load_client_security

            security = load_client_security(config)
        origin = Origin(bootstrap_server=settings.bootstrap_server, security=security)
    else:
        log_dir = Path(settings.log_dir)
        if not log_dir.is_dir():
            raise CliError(
                f"{settings.data_dir} holds no log: give the --data-dir of a service, or "
                "--bootstrap-server HOST:PORT of a running one"
            )
        # Below the local log start the pages read the archive (--archive-url), as the
        # history commands do on a data directory.
        archive = archive_of(settings, args)
        origin = Origin(
            data_dir=Path(settings.data_dir),
            archive_url=None if archive is None else archive.location.url,
            archive_cache=None if archive is None else archive.cache_dir,
        )

    if args.niceness:
        os.nice(args.niceness)  # after every check: a refused flag changes nothing

    async def until_stopped() -> None:
        # SIGTERM (a service manager's stop) ends it as Ctrl-C does: sessions closed, exit 0.
        from api.cancellation import cancel_and_wait

        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        serving = asyncio.create_task(
            serve(origin, host=host, port=port, tls=tls, session_seconds=args.session_minutes * 60)
        )
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(stopping)
            if not serving.done():
                await cancel_and_wait(serving)
        if not serving.cancelled():
            serving.result()  # a console that could not start says why

    asyncio.run(until_stopped())
    return EXIT_OK


def add_verbs(console: argparse.ArgumentParser) -> None:
    """The flags of `mlog console`, on its parser."""
    add_global_options(console)
    console.add_argument(
        "--listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="where the console listens (default 127.0.0.1:8080)",
    )
    add_archive_options(console)
    console.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    console.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    console.add_argument(
        "--session-minutes",
        type=_minutes,
        default=60,
        metavar="N",
        help="how long a sign-in lasts (default 60)",
    )
    console.add_argument(
        "--niceness",
        type=_niceness,
        default=DEFAULT_NICENESS,
        metavar="N",
        help=f"lower the console's CPU priority by N, as nice -n does (0..19, default "
        f"{DEFAULT_NICENESS}; 0 keeps it): controllers on the same host go first",
    )
    console.set_defaults(handler=cmd_console)
