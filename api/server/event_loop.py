"""Which event loop `mlog serve` runs on: uvloop where it is installed and can, else asyncio's.

The server is one event loop on one thread holding the interpreter lock, so the loop's own
work (polling, reading and writing sockets, waking tasks) is part of every request's cost.
uvloop (libuv, written in Cython) does that work in C: about 7% fewer instructions per admin
write than asyncio's selector loop (`bench/server_bench.py`, docs/performance.md). What the
server asks of its loop (TCP servers, signal handlers, `run_in_executor`, timers) both have.

Not TLS listeners: a TLS connection's handshake starts in its channel's task, after the
connection is admitted (`channel.py`), with reading paused from `connection_made` until
`start_tls` takes the socket. uvloop starts reading after `connection_made` whatever it asked,
so the client's first handshake bytes reach the channel, not the TLS layer, and the handshake
stalls. A server with a TLS listener (SSL, SASL_SSL) runs on asyncio's loop, and its TLS
connections on asyncio's SSL protocol with a 16 KiB read buffer (`tls_upgrade.py`).

`event.loop` in server.properties (or `--override event.loop=...`) chooses:

- `auto` (the default): uvloop if it imports and no listener is TLS, else asyncio's loop
  (uvloop is not built for Windows, and an installation may leave it out);
- `uvloop`: uvloop, and an error at start if it is not installed or a listener is TLS;
- `asyncio`: asyncio's own loop (to rule the loop out when looking into a problem).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

EVENT_LOOP_KEY = "event.loop"
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
"""`event.loop`'s values."""


class EventLoopUnavailable(Exception):
    """`event.loop=uvloop` and uvloop does not import, or cannot serve the listeners."""


@dataclass(frozen=True, slots=True)
class LoopChoice:
    """The loop to run: a factory for `asyncio.Runner` and its name for the start line."""

    factory: Callable[[], asyncio.AbstractEventLoop] | None
    """None: asyncio's own loop (the runner's default)."""
    name: str


def choose_loop(setting: str, *, tls: bool) -> LoopChoice:
    """The loop `event.loop=setting` (one of `EVENT_LOOPS`) runs on; `tls`: a listener is TLS."""
    if setting not in EVENT_LOOPS:
        raise ValueError(f"{setting!r} is not one of {', '.join(EVENT_LOOPS)}")
    asyncio_loop = LoopChoice(None, "asyncio")
    if setting == "asyncio":
        return asyncio_loop
    if tls:
        if setting == "uvloop":
            raise EventLoopUnavailable(
                f"{EVENT_LOOP_KEY}=uvloop cannot serve TLS listeners (their handshakes would "
                f"stall); set {EVENT_LOOP_KEY}=auto or asyncio"
            )
        return LoopChoice(None, "asyncio (a listener is TLS)")
    try:
        import uvloop  # noqa: PLC0415 - optional: only `mlog serve` asks, and may go without
    except ImportError as exc:
        if setting == "uvloop":
            raise EventLoopUnavailable(
                f"{EVENT_LOOP_KEY}=uvloop but uvloop does not import ({exc}); install uvloop "
                f"or set {EVENT_LOOP_KEY}=auto"
            ) from None
        return LoopChoice(None, "asyncio (uvloop is not installed)")
    version = getattr(uvloop, "__version__", "")  # not in its stubs' exports
    return LoopChoice(uvloop.new_event_loop, f"uvloop {version}".strip())
