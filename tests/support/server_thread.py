"""A metadata server on its own event loop thread, for tests that use blocking clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import api.server.answering
import api.server.login
from api.protocol import codec
from api.server.server import MetadataServer
from api.service.service import MetadataService
from replay.controller.commands import RegisterBroker


def _checked_encode(correlation_id: int, body: Any) -> bytes:
    """The server's encoder, checked against kio's writer on the built entity."""
    data = codec.encode_response(correlation_id, body)
    expected = codec.encode_response_with_kio(correlation_id, body)
    if data != expected:
        raise AssertionError(f"encoded {data!r}, kio wrote {expected!r} for {body!r}")
    return data


@contextmanager
def running_server(
    log_dir: Path,
    *,
    brokers: int = 3,
    racks: bool = False,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    **options: Any,
) -> Iterator[MetadataServer]:
    """A server on 127.0.0.1 (a free port) over `log_dir`, with `brokers` registered.

    Every answer it sends is checked against kio's own writer (a mismatch closes the client's
    connection, failing the test). `loop_factory` makes its event loop (uvloop's, say).
    """
    service = MetadataService.open(log_dir)
    for broker_id in range(1, brokers + 1):
        if service.image.cluster.get(broker_id) is None:
            request = RegisterBroker(
                broker_id=broker_id, rack=f"r{broker_id % 2}" if racks else None
            )
            service.execute(partial(service.controller.register_broker, request=request))
    loop = loop_factory()
    thread = threading.Thread(target=loop.run_forever, name="metadata-server", daemon=True)
    thread.start()
    server = MetadataServer(service, host="127.0.0.1", port=0, cluster_id="test-cluster", **options)
    encoders = (api.server.answering, api.server.login)  # the modules that write answers
    saved = [getattr(module, "encode_response") for module in encoders]  # noqa: B009 - patched for the server's life
    for module in encoders:
        setattr(module, "encode_response", _checked_encode)  # noqa: B010
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        yield server
    finally:
        for module, encoder in zip(encoders, saved, strict=True):
            setattr(module, "encode_response", encoder)  # noqa: B010
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
