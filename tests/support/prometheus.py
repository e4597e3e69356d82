"""A real Prometheus for the tests: its tools, a server scraping loopback targets, its HTTP API.

`prometheus` and `promtool` come from Debian's `prometheus` package (`make test` installs it).
Without them a test skips with the reason, and fails under CI=true. Also here: the rules file
and the dashboard the docs ship, read as the tests need them (alert -> expression and `for`;
each panel's queries with Grafana's variables substituted).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import DATA, REPO
from tests.support.quorum_processes import free_ports

RULES = REPO / "docs" / "prometheus-rules.yml"
RULES_TEST = DATA / "prometheus-rules-test.yml"
DASHBOARD = REPO / "docs" / "grafana-dashboard.json"
START_WAIT = 60.0


def tool(name: str) -> str:
    """The path of `prometheus` or `promtool`; skips (fails under CI=true) when missing."""
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is not installed (Debian's `prometheus` package)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the dashboard and the alert rules must be tested)")
        pytest.skip(f"{reason}; `make test` installs it")
    return found


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """`promtool ARGS...` (its exit code and output; never raises on a failure)."""
    return subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, timeout=120, check=False
    )


_RULE = re.compile(r"^\s*- alert: (\S+)\n\s+expr: (.+)\n(?:\s+for: (\S+)\n)?", re.MULTILINE)


def rules_in_file(path: Path = RULES) -> dict[str, tuple[str, str]]:
    """{alert: (expression, for)} of a rules file whose expressions each fit one line."""
    text = path.read_text()
    found = {m.group(1): (m.group(2).strip(), m.group(3) or "") for m in _RULE.finditer(text)}
    assert len(found) == text.count("- alert:"), f"an alert of {path} spreads over lines"
    return found


GRAFANA_VARIABLES = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "5m",
}
"""What Grafana's built-in variables stand for here (the dashboard's own are given by caller)."""


def dashboard_queries(variables: Mapping[str, str]) -> list[tuple[str, str]]:
    """(panel title, query) of every target of the dashboard, Grafana's variables replaced.

    `variables` gives the dashboard's own variables (`job`); a variable neither names is an
    error, so a new one is not sent to Prometheus as text.
    """
    values = {**GRAFANA_VARIABLES, **variables}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"the dashboard uses ${name}: say what it stands for in the test"
        return values[name]

    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels", []))  # rows hold their panels
        for target in panel.get("targets", []):
            expr = re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", replace, target["expr"])
            queries.append((panel["title"], expr))
    return queries


@dataclass(slots=True)
class PrometheusServer:
    """A running `prometheus` on loopback and its HTTP API."""

    address: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        """GET `/api/v1/PATH?params`: the answer's `data` (raises with the error it names)."""
        url = f"http://{self.address}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector's series, a scalar as one)."""
        data = self.api("query", query=expr)
        result = data["result"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": result}]
        return list(result)

    def alerting_rules(self) -> list[dict[str, Any]]:
        """Every alerting rule loaded, as `/api/v1/rules` describes it (health, lastError)."""
        groups = self.api("rules", type="alert")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def stop(self) -> int:
        """SIGTERM, then wait; its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        return self.process.returncode


def _config(jobs: Mapping[str, Sequence[str]], rules: Sequence[Path], interval: str) -> str:
    """prometheus.yml as JSON (a YAML document): one job per name, its targets, the rules."""
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }
    return json.dumps(config, indent=2)


@contextmanager
def prometheus_server(
    root: Path,
    jobs: Mapping[str, Sequence[str]],
    *,
    rules: Sequence[Path] = (RULES,),
    interval: str = "1s",
) -> Iterator[PrometheusServer]:
    """`prometheus` on a free port of 127.0.0.1 scraping `jobs` every `interval` with `rules`.

    Its storage is under `root` (nothing of the system's Prometheus is read or written); it is
    stopped on leaving.
    """
    root.mkdir(parents=True, exist_ok=True)
    config = root / "prometheus.yml"
    config.write_text(_config(jobs, rules, interval))
    checked = promtool("check", "config", str(config))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (port,) = free_ports(1)
    log = root / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.console.templates=/nonexistent",
                "--web.console.libraries=/nonexistent",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
    server = PrometheusServer(f"127.0.0.1:{port}", process, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        server.stop()


def _wait_ready(server: PrometheusServer) -> None:
    """Until `/-/ready` answers 200 (fails with its log if it exits or never does)."""
    deadline = time.monotonic() + START_WAIT
    while True:
        if server.process.poll() is not None:
            raise AssertionError(f"prometheus exited: {server.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://{server.address}/-/ready", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"prometheus not ready: {server.log.read_text()[-3000:]}")
        time.sleep(0.2)
