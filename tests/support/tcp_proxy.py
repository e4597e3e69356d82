"""Small TCP proxies on loopback whose links can be cut and restored, for partition tests.

Each `Proxy` listens on a port of its own and forwards every connection to one target port.
`cut()` closes the connections it carries and refuses new ones until `restore()`: to the
nodes on either side, the link is down. `lose_next_answer()` lets requests through and drops
the next bytes the target sends back, cutting that connection there: the request was
served, its answer is lost (`answer_lost` is set when it happened). The proxies run on an
event loop in a thread of their own, so the test's loop and the servers' processes are
unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator


class Proxy:
    """Forwards connections from `port` to `target`; `cut()` stops it, `restore()` resumes."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target: int) -> None:
        self.loop = loop
        self.target = target
        self.port = 0
        self.blocked = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lose_answer = False
        self._then: Callable[[], object] | None = None
        self.answer_lost = threading.Event()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(
                _pipe(reader, up_writer), _pipe(up_reader, writer, self._answer_check(writer))
            )
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    def _close_all(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()
        self._writers.clear()

    def cut(self) -> None:
        """Close what the proxy carries and refuse new connections."""

        def do() -> None:
            self.blocked = True
            self._close_all()

        self.loop.call_soon_threadsafe(do)

    def restore(self) -> None:
        """Carry connections again."""
        self.loop.call_soon_threadsafe(setattr, self, "blocked", False)

    def lose_next_answer(self, then: Callable[[], object] | None = None) -> None:
        """Drop the next bytes any target sends back, and cut that connection (both ways).

        `then` runs (on the proxies' thread) when they came, before the cut: say, kill -9 of
        the target, which then dies before its client can learn anything.
        """
        self.answer_lost.clear()

        def arm() -> None:
            self._lose_answer, self._then = True, then

        self.loop.call_soon_threadsafe(arm)

    def _answer_check(self, writer: asyncio.StreamWriter) -> Callable[[], bool]:
        """For the target-to-client pipe: whether to drop what came (and cut the link)."""

        def check() -> bool:
            if not self._lose_answer:
                return False
            self._lose_answer = False
            if self._then is not None:
                self._then()
            writer.transport.abort()
            self.answer_lost.set()
            return True

        return check


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    drop: Callable[[], bool] | None = None,
) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            if drop is not None and drop():
                break
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.close()


@contextlib.contextmanager
def proxy_loop() -> Iterator[ProxyLoop]:
    """An event loop in a thread that proxies run on; stopped when the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield ProxyLoop(loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


class ProxyLoop:
    """Makes proxies on the thread's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def proxy(self, target: int) -> Proxy:
        """A started proxy to `target`."""
        proxy = Proxy(self.loop, target)
        asyncio.run_coroutine_threadsafe(proxy.start(), self.loop).result(10)
        return proxy
