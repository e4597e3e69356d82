"""A quorum of real `mlog serve` processes archiving to one `file://` archive, through faults.

The archive's URL names a symbolic link to its directory; an outage points the link at a file
and the restore points it back, each in one rename, as a mount that fails and comes back.

- The leader killed (-9) in the middle of uploading a backlog: the new leader goes on from
  the manifest; the archive's run is dense from offset 0, holds each offset once, and every
  node's log read through it (`ArchiveCache.open_view`) holds every acknowledged write once.
- The archive unusable for a minute (its directory replaced by a file): writes go on, no node
  deletes a segment the archive lacks, the failure is one WARNING per node and shows in the
  metrics; once restored, the archive catches up and so does retention.

Small segments (`metadata.log.segment.bytes=16384`) and short timers; nothing is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from api.raft.quorum_state_file import read_quorum_state
from metadata_log.archive import ArchiveCache, ArchiveLocation, check_archive, read_manifest
from metadata_log.archive.manifest import Manifest
from metadata_log.errors import LogError
from metadata_log.reader import LogReader
from records import TopicRecord
from records.entry import LogEntry
from replay.controller.commands import CreatableTopic
from tests.support.metrics_scrape import metrics_address, scrape
from tests.support.quorum_processes import TIMERS, Quorum, logs_converge

pytestmark = pytest.mark.timeout(600)

SERVING: dict[str, int | str] = {
    **TIMERS,
    "metadata.log.segment.bytes": "16384",
    "metadata.log.max.record.bytes.between.snapshots": "16384",
    "metadata.max.retention.bytes": "65536",
    "metadata.log.archive.interval.ms": "200",
    "metrics.listen": "127.0.0.1:0",
}
WAIT_S = 240.0
"""A generous deadline for anything the quorum must reach (never a timing assertion)."""
OUTAGE_S = 60.0
"""How long the archive stays unusable: the issue's minute."""
OUTAGE_PACE_S = 0.25
"""The pause between the outage's writes."""


class Topics:
    """Creates topics 20 at a time through the leader, following it; remembers what was acked."""

    def __init__(self, quorum: Quorum) -> None:
        self.quorum = quorum
        self.acknowledged: list[str] = []
        self.attempts = 0
        self._client: AdminClient | None = None

    async def write(self, count: int = 20) -> bool:
        """One CreateTopics of `count` new names; True if acknowledged."""
        names = [f"a{self.attempts}-{i}" for i in range(count)]
        self.attempts += 1
        try:
            if self._client is None:
                leader = self.quorum.nodes[await self.quorum.leader()]
                self._client = await AdminClient.connect_controller(leader.address, timeout_ms=5000)
            async with asyncio.timeout(15):
                results = await self._client.create_topics([CreatableTopic(name=n) for n in names])
        except Exception:
            await self.close()
            return False
        if any(r.outcome.error_code != 0 for r in results):
            await self.close()
            return False
        self.acknowledged.extend(names)
        return True

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def _log_dir(quorum: Quorum, node_id: int) -> Path:
    return quorum.nodes[node_id].data_dir / "log"


def _local(quorum: Quorum, node_id: int) -> tuple[int, int, int]:
    """(log start, end, sealed segments) of a node's log, read beside it (retried on a race)."""
    for _ in range(50):
        try:
            with LogReader.open(_log_dir(quorum, node_id)) as log:
                return log.log_start_offset, log.end_offset, len(log.segments()) - 1
        except (FileNotFoundError, LogError):
            time.sleep(0.05)
    raise AssertionError(f"node {node_id}'s log could not be read beside it")


def _archive_link(root: Path) -> tuple[Path, str]:
    """(the archive's directory, its URL): the URL names a link to it, swapped atomically."""
    real = root / "archive-real"
    real.mkdir()
    (root / "archive").symlink_to(real)
    return real, f"file://{root / 'archive'}"


def _point(root: Path, target: Path) -> None:
    """Point the archive's link at `target` in one rename (no round sees it half done)."""
    staged = root / "archive.link"
    staged.unlink(missing_ok=True)
    staged.symlink_to(target)
    staged.replace(root / "archive")


def _broken(root: Path) -> None:
    """Make the archive unusable: its path names a file, not a directory."""
    blocker = root / "not-a-directory"
    blocker.write_text("the archive's directory replaced by a file\n")
    _point(root, blocker)


def _restored(root: Path) -> None:
    _point(root, root / "archive-real")


def _manifest(url: str) -> Manifest:
    return read_manifest(ArchiveLocation.open(url))


def _views(quorum: Quorum, url: str, cache: Path) -> dict[int, list[LogEntry]]:
    """Every node's whole history: the archive's run below its local log.

    A node that installed a snapshot (it came back after the leader's log had moved past its
    own) cuts its segments at other offsets than the archive's entries: its view cannot join
    them (`view.note`), and its local log alone is returned (checked against the others').
    """
    location = ArchiveLocation.open(url)
    manifest = read_manifest(location)
    out = {}
    for node_id, node in quorum.nodes.items():
        with (
            ArchiveCache(location, cache).open_view(_log_dir(quorum, node_id), manifest) as view,
            LogReader.open(view.path) as log,
        ):
            out[node_id] = list(log.read())
            if view.note is not None:
                assert "installed the leader's snapshot" in node.stderr.read_text(), view.note
    return out


def _check_history(quorum: Quorum, url: str, cache: Path, acknowledged: list[str]) -> None:
    """The archive dense from 0, each offset once; each node's history whole, writes once."""
    manifest = _manifest(url)
    assert manifest.start_offset == 0
    assert not manifest.gaps and not manifest.damaged
    assert len(manifest.entries) == len(manifest.run), "an offset range archived twice"
    assert check_archive(ArchiveCache(ArchiveLocation.open(url), cache), manifest).ok
    views = _views(quorum, url, cache)
    whole = {n: entries for n, entries in views.items() if entries and entries[0].offset == 0}
    assert len(whole) >= 2, "a majority reads the whole history through the archive"
    reference = max(whole.values(), key=len)
    for node_id, entries in views.items():
        first = entries[0].offset if entries else 0
        assert [e.offset for e in entries] == list(range(first, first + len(entries))), node_id
        assert entries == reference[first : first + len(entries)], f"node {node_id} diverges"
    for node_id, entries in whole.items():
        names = [e.record.name for e in entries if isinstance(e.record, TopicRecord)]
        assert len(names) == len(set(names)), f"node {node_id} holds a topic twice"
        missing = set(acknowledged) - set(names)
        assert not missing, f"node {node_id} lost acknowledged writes {sorted(missing)[:5]}"


async def _leader_failing(quorum: Quorum) -> bool:
    """Whether the node leading now failed its last archiving round (`mlog_archive_failing`).

    Asked of the leader of the moment: leadership may move while the archive is unreachable.
    """
    leader = quorum.nodes[await quorum.leader()]
    return scrape(metrics_address(leader.stderr)).get("mlog_archive_failing") == 1


def _stored_leader(quorum: Quorum) -> int | None:
    """The leader of the newest epoch the nodes' `quorum-state` files record, if one does."""
    states = [read_quorum_state(node.data_dir, voters=None) for node in quorum.nodes.values()]
    led = [(s.leader_epoch, s.leader_id) for s in states if s is not None and s.leader_id >= 0]
    return max(led)[1] if led else None


async def _until(condition: object, what: str, quorum: Quorum, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]  # a callable of no arguments
        assert time.monotonic() < deadline, f"{what}: {quorum.stderr_tails()}"
        await asyncio.sleep(0.2)


async def test_a_leader_killed_mid_upload_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    archive, url = _archive_link(tmp_path)
    _broken(tmp_path)  # a backlog builds while the archive cannot be used
    quorum = Quorum(tmp_path / "q", timers={**SERVING, "metadata.log.archive.url": url})
    quorum.start_all()
    topics = Topics(quorum)
    try:
        await quorum.register_brokers()
        leader = await quorum.leader()
        while _local(quorum, leader)[2] < 30:
            await topics.write()
        await logs_converge(quorum)
        backlog = _local(quorum, leader)[2]
        _restored(tmp_path)
        manifests = archive / "manifest"
        deadline = time.monotonic() + WAIT_S
        # Mid-upload: the leader's round is uploading the backlog, a few entries written. Every
        # node is frozen at once (no round trip in between, which a loaded host could stretch
        # past the rest of the backlog), then the leader its stored election names is killed.
        while not (manifests.is_dir() and len(os.listdir(manifests)) >= 3):
            assert time.monotonic() < deadline, quorum.stderr_tails()
            time.sleep(0.002)
        for node_id in quorum.nodes:
            quorum.signal(node_id, signal.SIGSTOP)
        leader = _stored_leader(quorum) or leader  # the uploader (leadership may have moved)
        quorum.kill(leader, signal.SIGKILL)
        for node_id in quorum.nodes:
            quorum.signal(node_id, signal.SIGCONT)
        at_kill = _manifest(url)
        assert at_kill.end_offset is not None and len(at_kill.run) < backlog, "not mid-upload"
        for _ in range(10):  # writes go on under the new leader
            await topics.write()
        new_leader = await quorum.leader()
        assert new_leader != leader
        quorum.start(leader)  # it catches up by fetching, or is sent a snapshot

        def caught_up() -> bool:
            end = _manifest(url).end_offset or 0
            with LogReader.open(_log_dir(quorum, new_leader)) as log:
                sealed = log.segments()[:-1]
            return bool(sealed) and end >= sealed[-1].next_offset

        await _until(caught_up, "the new leader did not archive its sealed segments", quorum)
        # The nodes that led after it went on where the manifest ended, not from offset 0.
        firsts = [
            int(found)
            for node_id, node in quorum.nodes.items()
            if node_id != leader
            for found in re.findall(
                r"archived \d+ segment\(s\), offsets (\d+)\.\.", node.stderr.read_text()
            )
        ]
        assert min(firsts) == at_kill.end_offset, (firsts, at_kill.end_offset)
        await topics.write()
        await logs_converge(quorum)
    finally:
        await topics.close()
        quorum.stop_all()
    _check_history(quorum, url, tmp_path / "cache", topics.acknowledged)


async def test_an_unreachable_archive_holds_retention_and_never_writes(tmp_path: Path) -> None:
    archive, url = _archive_link(tmp_path)
    quorum = Quorum(tmp_path / "q", timers={**SERVING, "metadata.log.archive.url": url})
    quorum.start_all()
    topics = Topics(quorum)
    try:
        await quorum.register_brokers()
        leader = await quorum.leader()
        while (_manifest(url).end_offset or 0) == 0 or _local(quorum, leader)[0] == 0:
            await topics.write()  # archived and trimmed at least once
        await logs_converge(quorum)
        await asyncio.sleep(1.0)  # a round of every node reads the archive's end
        started = time.monotonic()
        _broken(tmp_path)
        # An upload already under way when the link was swapped still lands in the real
        # directory: what the archive holds is read once the leader (whichever node leads by
        # then) has failed a round since.
        while not await _leader_failing(quorum):
            await topics.write()
            await asyncio.sleep(OUTAGE_PACE_S)
            assert time.monotonic() - started < WAIT_S, quorum.stderr_tails()
        held = read_manifest(ArchiveLocation.open(f"file://{archive}")).end_offset
        assert held is not None
        acknowledged_before = len(topics.acknowledged)
        broke_at = time.monotonic()
        while time.monotonic() - broke_at < OUTAGE_S:
            await topics.write()
            for node_id in quorum.nodes:
                start = _local(quorum, node_id)[0]
                assert start <= held, f"node {node_id} trimmed to {start} past the archive's {held}"
            # Paced: the outage's length is what is tested, and a few writes a second still
            # grow the logs many times past their retention (the writes as fast as they went
            # were 70 CPU-seconds of the suite's minute).
            await asyncio.sleep(OUTAGE_PACE_S)
        assert len(topics.acknowledged) > acknowledged_before + 100, "writes went on"
        during = {n: scrape(metrics_address(quorum.nodes[n].stderr)) for n in quorum.nodes}
        leader = await quorum.leader()
        seen = {n: {k: v for k, v in m.items() if "archive" in k} for n, m in during.items()}
        assert during[leader]["mlog_archive_failing"] == 1, seen
        assert during[leader]["mlog_archive_upload_failures_total"] > 1, seen
        assert during[leader]["mlog_archive_behind_segments"] > 0, seen
        assert all(m["mlog_archive_end_offset"] == held for m in during.values()), (held, seen)
        assert any(m["mlog_log_trims_held_by_archive_total"] > 0 for m in during.values()), seen
        _restored(tmp_path)

        def caught_up() -> bool:
            return all(_local(quorum, n)[0] > held for n in quorum.nodes)

        while not caught_up():  # retention goes on past the old end once it is archived
            await topics.write()
            await asyncio.sleep(0.2)
            assert time.monotonic() - broke_at < OUTAGE_S + WAIT_S, quorum.stderr_tails()
        await logs_converge(quorum)
        after = {n: scrape(metrics_address(quorum.nodes[n].stderr)) for n in quorum.nodes}
        assert all(m["mlog_archive_failing"] == 0 for m in after.values())
    finally:
        await topics.close()
        quorum.stop_all()
    for node in quorum.nodes.values():
        log = node.stderr.read_text()
        assert log.count("cannot be used") == 1, f"node {node.node_id}: one WARNING an outage"
        assert "answers again" in log
    _check_history(quorum, url, tmp_path / "cache", topics.acknowledged)
