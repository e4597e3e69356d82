"""`mlog status`: the readiness of running servers from their `/readyz`, one row each."""

from __future__ import annotations

import io
import json
from pathlib import Path

from api.cli.main import main
from api.cli.status import COLUMNS
from tests.support.server_thread import running_server


def test_a_ready_server_and_an_unreachable_one(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", metrics_listen=("127.0.0.1", 0)) as server:
        assert server.metrics_listener is not None
        address = server.metrics_listener.address
        out = io.StringIO()
        assert main(["status", "--metrics-server", address], out) == 0
        lines = out.getvalue().splitlines()
        assert tuple(lines[0].split()) == COLUMNS
        assert lines[1].split()[:3] == [address, "yes", "standalone"]
        out = io.StringIO()
        code = main(
            [
                "status",
                "--metrics-server",
                address,
                "--metrics-server",
                "127.0.0.1:1",
                "--output",
                "json",
            ],
            out,
        )
    assert code == 1
    ready, unreachable = json.loads(out.getvalue())
    assert ready["ready"] and ready["writes"] and ready["server"] == address
    assert not unreachable["ready"] and unreachable["reason"].startswith("unreachable")
