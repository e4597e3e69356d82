"""`event.loop`: which loop `mlog serve` runs on, and the server answering on uvloop's.

The choice is a pure function of the setting, whether uvloop imports and whether a listener is
TLS (uvloop would stall those handshakes: `api/server/event_loop.py`). The last test serves
real requests on uvloop's loop over a socket (skipped where uvloop is not installed).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from api.protocol import codec
from api.server.config import ServerConfigError, server_config
from api.server.event_loop import EventLoopUnavailable, choose_loop
from tests.support.protocol_frames import recv_frame
from tests.support.server_thread import running_server

WAIT = 20.0


def test_asyncio_is_asyncios_own_loop_whatever_is_installed() -> None:
    for tls in (False, True):
        choice = choose_loop("asyncio", tls=tls)
        assert choice.factory is None and choice.name == "asyncio"


def test_a_tls_listener_keeps_asyncios_loop_and_refuses_uvloop() -> None:
    assert choose_loop("auto", tls=True).factory is None
    with pytest.raises(EventLoopUnavailable, match="TLS"):
        choose_loop("uvloop", tls=True)


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    choice = choose_loop("auto", tls=False)
    assert choice.factory is None and "not installed" in choice.name
    with pytest.raises(EventLoopUnavailable, match="does not import"):
        choose_loop("uvloop", tls=False)


def test_with_uvloop_auto_and_uvloop_run_on_it() -> None:
    uvloop = pytest.importorskip("uvloop")
    for setting in ("auto", "uvloop"):
        choice = choose_loop(setting, tls=False)
        assert choice.factory is uvloop.new_event_loop
        assert choice.name == f"uvloop {uvloop.__version__}"


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of"):
        choose_loop("trio", tls=False)


def test_the_config_key_is_checked_and_defaults_to_auto() -> None:
    assert server_config({}).event_loop == "auto"
    assert server_config({"event.loop": " AsyncIO "}).event_loop == "asyncio"
    with pytest.raises(ServerConfigError, match=r"event.loop: 'trio' is not one of"):
        server_config({"event.loop": "trio"})


def _frame(body: object, correlation_id: int) -> bytes:
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _answer(sock: socket.socket, api_key: int, version: int) -> object:
    return codec.decode_response(api_key, version, recv_frame(sock))[1]


def test_a_server_on_uvloop_creates_describes_and_deletes(tmp_path: Path) -> None:
    uvloop = pytest.importorskip("uvloop")
    with running_server(tmp_path / "log", loop_factory=uvloop.new_event_loop) as server:
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            create = codec.build(
                codec.request_class(19, 7),
                topics=[
                    {
                        "name": "on-uvloop",
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=30_000,
                validate_only=False,
            )
            sock.sendall(_frame(create, 1))
            created = _answer(sock, 19, 7).topics[0]  # type: ignore[attr-defined]
            assert int(created.error_code) == 0
            describe = codec.build(
                codec.request_class(3, 12),
                topics=[{"name": "on-uvloop", "topic_id": None}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            sock.sendall(_frame(describe, 2))
            described = _answer(sock, 3, 12).topics[0]  # type: ignore[attr-defined]
            assert len(described.partitions) == 2
            delete = codec.build(
                codec.request_class(20, 6),
                topics=[{"name": None, "topic_id": created.topic_id}],
                timeout=30_000,
            )
            sock.sendall(_frame(delete, 3))
            deleted = _answer(sock, 20, 6).responses[0]  # type: ignore[attr-defined]
            assert int(deleted.error_code) == 0
