"""The shipped dashboard and alert rules in a real Prometheus scraping a three-node quorum.

Three `mlog serve` nodes with their metrics listeners, a Prometheus of their own (Debian's
`prometheus`, on a free port of 127.0.0.1, storage under the test's directory) scraping them
every second with docs/prometheus-rules.yml loaded; topics are written so the values move, a
refusal is answered (TOPIC_ALREADY_EXISTS), an idle connection is closed over
`connections.max.idle.ms` and snapshots are taken. Then every query of
docs/grafana-dashboard.json (its `$job` the scrape job) goes through Prometheus' HTTP API: each
answers without error and with data (a finite value in at least one series); and every alert
rule is loaded and evaluates with health `ok`. Without `prometheus` the test skips, and fails
under CI=true.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from api.client import AdminClient
from replay.controller.commands import CreatableTopic
from tests.support.metrics_scrape import metrics_address
from tests.support.prometheus import (
    PrometheusServer,
    dashboard_queries,
    prometheus_server,
    rules_in_file,
    tool,
)
from tests.support.quorum_processes import TIMERS, Quorum, Writer, write_until

pytestmark = pytest.mark.timeout(420)

JOB = "mlog"
KEYS: dict[str, int | str] = {
    **TIMERS,
    "metrics.listen": "127.0.0.1:0",
    # A snapshot every few hundred topics, so the snapshot panels have one to show.
    "metadata.log.max.record.bytes.between.snapshots": "8192",
    # An idle connection closed within seconds: the "closed over a limit" panel's counter.
    "connections.max.idle.ms": "3000",
}
DATA_WAIT = 240.0
"""Seconds for every query to return data (a loaded host scrapes and evaluates late)."""
LAG_PANEL = "Applied lag behind the most committed node"
HEALTHY_SILENT = {"MlogWritesRefused", "MlogOfflinePartitions", "MlogServerErrors"}
"""The alerts without a `for` (they fire at their first evaluation)."""


def _finite(series: dict[str, Any]) -> bool:
    return math.isfinite(float(series["value"][1]))


def _idle_until_closed(address: str, timeout: float = 60.0) -> None:
    """Open a connection, send nothing, wait for the server to close it."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        assert sock.recv(1) == b"", "an idle connection was answered"


async def _refuse_one(quorum: Quorum, name: str) -> None:
    """A CreateTopics of a topic that exists: an error answered (TOPIC_ALREADY_EXISTS)."""
    node = quorum.nodes[await quorum.leader()]
    client = await AdminClient.connect_controller(node.address, timeout_ms=5000)
    try:
        (result,) = await client.create_topics([CreatableTopic(name=name)])
        assert result.outcome.error_code != 0
    finally:
        await client.close()


async def _every_target_up(prom: PrometheusServer, targets: list[str]) -> None:
    """Wait until Prometheus has scraped every node (each target's `up` is 1)."""
    deadline = time.monotonic() + DATA_WAIT
    while True:
        up = await asyncio.to_thread(prom.query, f'up{{job="{JOB}"}} == 1')
        if sorted(s["metric"]["instance"] for s in up) == sorted(targets):
            return
        assert time.monotonic() < deadline, f"targets not all up: {up}"
        await asyncio.sleep(0.5)


async def _every_query_returns_data(prom: PrometheusServer, writer: Writer) -> set[str]:
    """Write while polling each dashboard query until it returns a finite value; the queries."""
    pending = dashboard_queries({"job": JOB})
    assert pending, "the dashboard has no queries"
    answered: set[str] = set()
    deadline = time.monotonic() + DATA_WAIT
    while pending:
        await write_until(writer, 5)
        for title, expr in list(pending):
            result = await asyncio.to_thread(prom.query, expr)  # raises on a query error
            if any(_finite(series) for series in result):
                pending.remove((title, expr))
                answered.add(expr)
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"no data from {pending}")
        await asyncio.sleep(1)
    return answered


async def _every_rule_evaluates(prom: PrometheusServer) -> list[dict[str, Any]]:
    """Wait until every alerting rule was evaluated at least once; the rules."""
    deadline = time.monotonic() + DATA_WAIT
    while True:
        rules = await asyncio.to_thread(prom.alerting_rules)
        if rules and all(not r["lastEvaluation"].startswith("0001-") for r in rules):
            return rules
        assert time.monotonic() < deadline, f"rules never evaluated: {rules}"
        await asyncio.sleep(1)


async def test_every_dashboard_query_and_alert_rule_evaluates_on_a_quorum(
    tmp_path: Path,
) -> None:
    tool("prometheus")
    tool("promtool")
    quorum = Quorum(tmp_path / "quorum", timers=KEYS)
    quorum.start_all()
    writer = Writer(quorum, prefix="dash")
    try:
        await quorum.register_brokers()
        targets = [metrics_address(node.stderr) for node in quorum.nodes.values()]
        with prometheus_server(tmp_path / "prometheus", {JOB: targets}) as prom:
            await write_until(writer, 20)
            await _refuse_one(quorum, writer.acknowledged[0])
            await asyncio.to_thread(_idle_until_closed, quorum.nodes[1].address)

            await _every_target_up(prom, targets)

            answered = await _every_query_returns_data(prom, writer)

            queries = dashboard_queries({"job": JOB})
            assert answered == {expr for _, expr in queries}
            lag = next(expr for title, expr in queries if title == LAG_PANEL)
            lines = await asyncio.to_thread(prom.query, lag)
            assert sorted(s["metric"]["instance"] for s in lines) == sorted(targets)
            assert all(_finite(s) for s in lines), lines

            rules = await _every_rule_evaluates(prom)
            assert {r["name"] for r in rules} == set(rules_in_file())
            for rule in rules:
                assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"
                assert not rule.get("lastError"), rule["name"]
            # Those that fire at once have nothing to fire on in a healthy quorum (the others
            # wait minutes in `for`, longer than this test's failures last).
            assert {name for name, (_, wait) in rules_in_file().items() if not wait} == (
                HEALTHY_SILENT
            )
            firing = {r["name"] for r in rules if r["state"] == "firing"}
            assert not firing & HEALTHY_SILENT, firing
    finally:
        await writer.close()
        quorum.stop_all()
