"""A standalone `mlog serve` with retention and a `file://` archive: the history outlives the trims.

With `metadata.log.segment.bytes=16384`, a snapshot every 16 KiB of records and
`metadata.max.retention.bytes=65536`, topics are created until retention has removed 50+
segments locally. Meanwhile the log's start never passes the archive's end; afterwards the
archive's run is dense from offset 0, the local log starts past 0, and the archive read below
the local log (`ArchiveCache.open_view`) gives every entry a client saw written, in order.

The server answers below its local start from its archive (api/server/archive_reads.py): the
remote `history`, `image show --at-offset`, `image diff`, `log dump` and `log digest
--at-offset` (`--bootstrap-server`)
answer as the same commands on an untrimmed copy of the log (the archive's run and the local
segments copied into a data directory of their own, checked against what the client saw).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from metadata_log.archive import ArchiveCache, ArchiveLocation, check_archive, read_manifest
from metadata_log.reader import LogReader
from records.entry import LogEntry
from replay.controller.commands import CreatableTopic, RegisterBroker
from tests.support.cli import mlog
from tests.support.metrics_scrape import metrics_address, scrape
from tests.support.server_process import serve_process

pytestmark = pytest.mark.timeout(600)

SERVING = {
    "metadata.log.segment.bytes": "16384",
    "metadata.log.max.record.bytes.between.snapshots": "16384",
    "metadata.max.retention.bytes": "65536",
    "metadata.log.archive.interval.ms": "200",
}
TRIMMED = 50
"""Segments retention must have removed locally before the checks."""
WRITE_WAIT_S = 400.0
"""A generous deadline for the writes (a loaded host takes its time; nothing is timed)."""


def removed_segments(stderr: str) -> int:
    """The segments the server's retention lines say it removed."""
    return sum(int(n) for n in re.findall(r"retention removed (\d+) segment", stderr))


def log_start(log_dir: Path) -> int:
    """The local log's start, read beside the server (a trim between two reads is retried)."""
    for _ in range(20):
        with contextlib.suppress(FileNotFoundError), LogReader.open(log_dir) as log:
            return log.log_start_offset
        time.sleep(0.05)
    raise AssertionError(f"{log_dir} could not be opened beside its server")


async def follow(address: str, seen: list[LogEntry]) -> None:
    """Every entry the server writes, as a client tails it (the reference the archive must give)."""
    client = await AdminClient.connect(address)
    try:
        async for entry in client.follow(0, max_wait_ms=500):
            seen.append(entry)
    finally:
        await client.close()


async def write_until_trimmed(address: str, server_log: Path, log_dir: Path, url: str) -> int:
    """Create topics until retention removed `TRIMMED` segments; the topics created."""
    client = await AdminClient.connect(address)
    location = ArchiveLocation.open(url)
    created = 0
    deadline = time.monotonic() + WRITE_WAIT_S
    try:
        for broker_id in (1, 2, 3):
            await client.register_broker(RegisterBroker(broker_id=broker_id))
        while removed_segments(server_log.read_text()) < TRIMMED:
            assert time.monotonic() < deadline, "retention did not remove enough segments"
            topics = [CreatableTopic(name=f"t{created + i}") for i in range(20)]
            results = await client.create_topics(topics)
            assert all(r.outcome.error_code == 0 for r in results)
            created += len(topics)
            if created % 200 == 0:
                start = log_start(log_dir)
                end = read_manifest(location).end_offset
                assert start == 0 or (end is not None and start <= end), (start, end)
    finally:
        await client.close()
    return created


async def test_the_archive_holds_every_entry_retention_removed(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    url = f"file://{archive}"
    config = tmp_path / "server.properties"
    config.write_text(
        "".join(f"{k}={v}\n" for k, v in {**SERVING, "metadata.log.archive.url": url}.items())
    )
    data = tmp_path / "data"
    log_dir = data / "log"
    stderr = tmp_path / "stderr.txt"
    seen: list[LogEntry] = []
    with serve_process(
        data, stderr, "--config", str(config), "--metrics-listen", "127.0.0.1:0"
    ) as server:
        tail = asyncio.create_task(follow(server.address, seen))
        try:
            created = await write_until_trimmed(server.address, stderr, log_dir, url)
            metrics = scrape(metrics_address(stderr))
            end = await_end(log_dir)
            deadline = time.monotonic() + 60
            while len(seen) < end or not seen:
                assert time.monotonic() < deadline, "the tail did not reach the log's end"
                await asyncio.sleep(0.1)
        finally:
            tail.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await tail
        served_start = log_start(log_dir)
        commands = remote_commands(served_start)
        remote = [
            await asyncio.to_thread(
                answer, tmp_path / "nowhere", *c, "--bootstrap-server", server.address
            )
            for c in commands
        ]
        assert server.stop() == 0
        log = server.log()
    assert created > 0 and removed_segments(log) >= TRIMMED
    assert "retention removed" in log and "archived " in log
    # Retention removes only what was archived: at least as many uploaded as removed.
    assert metrics["mlog_archive_uploaded_segments_total"] >= TRIMMED
    assert metrics["mlog_archive_uploaded_bytes_total"] > 0
    assert metrics["mlog_archive_end_offset"] > 0
    assert metrics["mlog_archive_failing"] == 0

    location = ArchiveLocation.open(url)
    manifest = read_manifest(location)
    start = log_start(log_dir)
    assert start > 0
    assert manifest.start_offset == 0 and manifest.end_offset is not None
    assert manifest.end_offset >= start, "retention removed nothing the archive lacks"
    assert manifest.entries == manifest.run and not manifest.gaps and not manifest.damaged
    assert len([e for e in manifest.run if e.next_offset <= start]) >= TRIMMED
    cache = ArchiveCache(location, tmp_path / "cache")
    assert check_archive(cache, manifest).ok

    with (
        cache.open_view(log_dir) as view,
        LogReader.open(view.path) as whole,
    ):
        assert view.note is None
        entries = list(whole.read())
    assert entries[0].offset == 0
    assert [e.offset for e in entries] == list(range(len(entries)))
    assert entries == seen[: len(entries)] and len(entries) == len(seen)

    # The untrimmed copy: what the view links, copied (its entries are the client's, above).
    twin = tmp_path / "twin"
    with cache.open_view(log_dir) as view:
        shutil.copytree(view.path, twin / "log")
    assert start >= served_start > 0
    local = [answer(twin, *c) for c in commands]
    for command, got, expected in zip(commands, remote, local, strict=True):
        if command[:2] == ("log", "digest"):
            # A server's digest is the chain's (v1); the CLI's on a directory adds the root.
            served, copied = json.loads(got), json.loads(expected)
            assert (served["offset"], served["chain"]) == (copied["offset"], copied["chain"])
        else:
            assert got == expected, command
    (history, *_) = remote
    assert json.loads(history)[0]["offset"] < served_start, "t0 was created below the start"


def remote_commands(start: int) -> list[tuple[str, ...]]:
    """History commands that read below the local log `start` (and on above it)."""
    low, mid = start // 4, start // 2
    return [
        ("history", "--topic", "t0"),
        ("history", "--topic", "t1", "--lte", str(mid)),
        ("history", "--broker", "2"),
        ("image", "show", "--at-offset", str(mid)),
        ("image", "diff", "--from", str(low), "--to", str(mid)),
        ("image", "diff", "--from", str(low), "--to", str(start + 5)),
        ("log", "dump", "--gt", str(low), "--lte", str(mid), "--limit", "500"),
        ("log", "digest", "--at-offset", str(start - 1)),  # a segment's end: a block's
    ]


def answer(data_dir: Path, *args: str) -> str:
    """`mlog --output json ARGS` (on `data_dir`, or a server named in ARGS): its output."""
    code, text = mlog(data_dir, "--output", "json", *args)
    assert code == 0, (args, text)
    return text


def await_end(log_dir: Path) -> int:
    """The log's end offset, read beside the server."""
    with LogReader.open(log_dir) as log:
        return log.end_offset


def test_a_bad_archive_url_stops_the_start_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "serve",
            "--data-dir",
            str(data),
            "--listen",
            "127.0.0.1:0",
            "--override",
            "metadata.log.archive.url=ftp://host/archive",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlog: error: metadata.log.archive.url:")
    assert not data.exists(), "nothing is made for a start that fails"
