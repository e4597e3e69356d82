"""Scraping a server's metrics listener: the address it logged, `/metrics` as values, `/readyz`."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

START_WAIT = 60.0


def metrics_address(stderr: Path, timeout: float = START_WAIT) -> str:
    """`host:port` of the metrics listener, from the server's start line (waits for it)."""
    deadline = time.monotonic() + timeout
    while True:
        text = stderr.read_text() if stderr.exists() else ""
        found = re.findall(r"metrics and health probes on http://(\S+)/metrics", text)
        if found:
            return str(found[-1])
        if time.monotonic() > deadline:
            raise AssertionError(f"no metrics listener line in {stderr}: {text[-2000:]}")
        time.sleep(0.1)


def scrape(address: str) -> dict[str, float]:
    """`/metrics` as {name or name{label=value,...}: value}."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def readyz(address: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of `/readyz`."""
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
