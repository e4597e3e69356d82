"""A real full disk, end to end: `mlog serve` on a tiny tmpfs answers 56, reads on, and heals.

Needs `mount -t tmpfs` (root); skipped with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.cli.main import main
from api.client import AdminClient
from metadata_log.reader import LogReader
from records import TopicRecord
from replay.controller.commands import CreatableTopic
from replay.controller.errors import ErrorCode
from tests.support.server_process import serve_process


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); it needs root")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(path: Path) -> None:
    """Write `path` until the file system is full (ENOSPC), to the last byte it takes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 16, 512, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)


async def _session(address: str, filler: Path) -> list[str]:
    storage = ErrorCode.KAFKA_STORAGE_ERROR
    acked: list[str] = []
    async with await AdminClient.connect(address) as client:
        (first,) = await client.create_topics([CreatableTopic(name="before", num_partitions=1)])
        assert first.outcome.ok
        acked.append("before")
        _fill(filler)
        # Some bytes may still fit in the segment's last page: write until the disk refuses.
        for i in range(1000):
            name = f"t{i}"
            (result,) = await client.create_topics([CreatableTopic(name=name, num_partitions=1)])
            if result.outcome.error_code == storage:
                break
            assert result.outcome.ok, result
            acked.append(name)
        else:
            raise AssertionError("the full disk never refused a write")
        # Reads go on from the committed image; writes keep answering 56 while it is full.
        metadata = await client.metadata()
        assert set(acked) <= {t.name for t in metadata.topics}
        await asyncio.sleep(1)
        (again,) = await client.create_topics([CreatableTopic(name="full", num_partitions=1)])
        assert again.outcome.error_code == storage
        filler.unlink()
        for _ in range(300):  # the server re-opens the log by itself every few seconds
            (healed,) = await client.create_topics([CreatableTopic(name="healed")])
            if healed.outcome.error_code != storage:
                break
            await asyncio.sleep(0.1)
        assert healed.outcome.ok, healed
        acked.append("healed")
    return acked


def test_a_full_disk_answers_storage_errors_and_heals_without_a_restart(
    tiny_disk: Path,
) -> None:
    data_dir = tiny_disk / "data"
    assert main(["--data-dir", str(data_dir), "brokers", "register", "--id", "1"]) == 0
    with serve_process(data_dir, tiny_disk.parent / "serve.log") as served:
        acked = asyncio.run(_session(served.address, tiny_disk / "filler"))
        assert served.stop() == 0
    text = served.log()
    assert "Traceback" not in text, text
    # One line when writes stop, one when they resume.
    assert len(re.findall("the metadata log cannot be written", text)) == 1, text
    assert len(re.findall("re-opened at end offset", text)) == 1, text
    with LogReader.open(data_dir / "log") as log:
        names = {e.record.name for e in log.read() if isinstance(e.record, TopicRecord)}
    assert set(acked) <= names  # nothing acknowledged was lost
