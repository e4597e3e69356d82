"""docs/grafana-dashboard.json queries only metrics the server exports, each documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.paths import REPO
from tests.support.server_thread import running_server

DASHBOARD = REPO / "docs" / "grafana-dashboard.json"
REFERENCE = REPO / "docs" / "operating.md"


def _queried() -> set[str]:
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            expr = node.get("expr")
            if isinstance(expr, str):
                names.update(re.findall(r"\bmlog_[a-z_]+", expr))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(DASHBOARD.read_text()))
    return names


def _in_source(name: str, source: str) -> bool:
    """Whether metrics.py names `name`: whole, or as one of its prefixes plus a suffix."""
    if f'"{name}"' in source:
        return True
    for prefix in re.findall(r'prefix = "(mlog_[a-z]+_)"', source):
        if name.startswith(prefix) and f'prefix + "{name[len(prefix) :]}"' in source:
            return True
    return False


def test_every_queried_metric_is_exported_and_documented(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", metrics_listen=("127.0.0.1", 0)) as server:
        listener = server.metrics_listener
        assert listener is not None
        text = listener.answer(b"GET /metrics HTTP/1.1\r\n\r\n")[2].decode()
    exported = set(re.findall(r"^# TYPE (\S+)", text, re.MULTILINE))
    # A standalone server without snapshots exports no raft or snapshot gauges: those are
    # looked up in the collector's source.
    source = (REPO / "api" / "server" / "metrics.py").read_text()
    queried = _queried()
    assert queried, "the dashboard queries nothing"
    for name in queried:
        base = re.sub(r"_(bucket|total)$", "", name)
        assert base in exported or _in_source(base, source), f"{name} is not exported"
        assert base in REFERENCE.read_text(), f"{base} is not in docs/operating.md"
