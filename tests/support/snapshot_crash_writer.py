"""Run a service that writes a snapshot and stalls half-way through it; killed by the test.

Usage: `python -m tests.support.snapshot_crash_writer <log dir> <database url> <topics>`.

Creates `<topics>` topics of 10 partitions through the service, asks for a snapshot, and from
the snapshot's progress callback (the transaction is open, rows are written) prints
`WRITING <offset> <rows>` and sleeps, so the test can `kill -9` it mid-snapshot.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

from api.service.service import MetadataService
from api.service.snapshots import Snapshotter
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.sql.store import SnapshotStore

written = 0


def main() -> None:
    """Entry point."""
    log_dir, url, topics = sys.argv[1], sys.argv[2], int(sys.argv[3])
    offset = -1

    def progress(rows: int) -> None:
        global written  # noqa: PLW0603 - a script-level counter for the callback
        written += rows
        if written >= 1000:
            sys.stdout.write(f"WRITING {offset} {written}\n")
            sys.stdout.flush()
            time.sleep(600)

    snapshotter = Snapshotter(SnapshotStore(url), progress=progress)
    service = MetadataService.open(Path(log_dir), snapshots=snapshotter)
    for broker_id in range(3):
        request = RegisterBroker(broker_id=broker_id)
        service.execute(functools.partial(service.controller.register_broker, request=request))
    batch = [
        CreatableTopic(name=f"t{n}", num_partitions=10, replication_factor=2) for n in range(topics)
    ]
    service.execute(functools.partial(service.controller.create_topics, topics=batch))
    offset = service.image.provenance.offset
    snapshotter.request(service.image, service.log)
    time.sleep(600)


if __name__ == "__main__":
    main()
