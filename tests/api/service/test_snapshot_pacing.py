"""A background snapshot is written in slices, resting between them for the event loop."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from api.service.snapshot_pacing import DutyCycle
from api.service.snapshots import Snapshotter
from metadata_log.reader import LogReader
from replay.image import MetadataImage
from replay.sql.store import Progress, SnapshotInfo, SnapshotStore
from tests.support.sql_backends import write_generated_log


class FakeTime:
    """A clock that only a sleep, or the test, moves; the loop's CPU use during each sleep."""

    def __init__(self, loop_busy: float = 0.0, busy_sleeps: int | None = None) -> None:
        self.now = 100.0
        self.loop_cpu = 0.0
        self.loop_busy = loop_busy
        """The share of each sleep the loop spends running..."""
        self.busy_sleeps = busy_sleeps
        """...during this many sleeps (None: all), then none."""
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def others_cpu(self) -> float:
        return self.loop_cpu

    def sleep(self, seconds: float) -> None:
        busy = self.busy_sleeps is None or len(self.sleeps) < self.busy_sleeps
        self.sleeps.append(seconds)
        self.now += seconds
        self.loop_cpu += seconds * self.loop_busy * busy

    def pacer(self, cycle: DutyCycle) -> Callable[[], None]:
        return cycle.pacer(clock=self.clock, sleep=self.sleep, others_cpu=self.others_cpu)


CYCLE = DutyCycle(busy_s=0.002, rest_s=0.0005, max_rest_s=0.002)


def _work(time: FakeTime, pace: Callable[[], None], calls: int) -> list[int]:
    """Calls of `pace` after half a millisecond of work each; the calls that rested."""
    rested_at = []
    for call in range(calls):
        time.now += 0.0005
        before = len(time.sleeps)
        pace()
        if len(time.sleeps) > before:
            rested_at.append(call)
    return rested_at


def test_beside_an_idle_loop_a_write_rests_briefly_after_each_busy_slice() -> None:
    time = FakeTime(loop_busy=0.0)
    assert _work(time, time.pacer(CYCLE), 12) == [3, 7, 11]  # after every 2 ms of work
    assert time.sleeps == [0.0005] * 3


def test_beside_a_busy_loop_a_write_rests_until_its_longest_rest() -> None:
    # The loop ran through each rest: the writer leaves it the interpreter up to max_rest_s.
    time = FakeTime(loop_busy=0.9)
    assert _work(time, time.pacer(CYCLE), 8) == [3, 7]
    assert time.sleeps == [0.0005, 0.001, 0.0005] * 2  # each sleep twice the last, 2 ms in all


def test_a_rest_ends_once_the_loop_is_done() -> None:
    time = FakeTime(loop_busy=0.9, busy_sleeps=1)
    pace = time.pacer(CYCLE)
    time.now += 0.003
    pace()
    assert time.sleeps == [0.0005, 0.001]


def test_a_writer_that_waited_longer_than_its_slice_rests_at_once() -> None:
    # Time spent waiting for the interpreter counts as busy: such a writer never runs longer.
    time = FakeTime()
    pace = time.pacer(CYCLE)
    time.now += 0.05
    pace()
    pace()
    assert time.sleeps == [CYCLE.rest_s]


class RecordingStore(SnapshotStore):
    """A real store that notes whether each write was given a pace."""

    paced: list[bool]

    def write(
        self,
        image: MetadataImage,
        *,
        progress: Progress | None = None,
        pace: Callable[[], None] | None = None,
        base: tuple[SnapshotInfo, MetadataImage] | None = None,
    ) -> SnapshotInfo:
        self.paced.append(pace is not None)
        return super().write(image, progress=progress, pace=pace, base=base)


def _snapshot(
    tmp_path: Path, name: str, snapshotter_of: Callable[[SnapshotStore], Snapshotter]
) -> list[bool]:
    write_generated_log(tmp_path / name, seed=3, batches=40)
    store = RecordingStore(f"sqlite:///{tmp_path / name}.db")
    store.paced = []
    snapshotter = snapshotter_of(store)
    with LogReader.open(tmp_path / name) as log:
        image = snapshotter.start_image(log)
        info = snapshotter.request(image, log).result()
    snapshotter.close()
    assert info is not None and info.offset == image.provenance.offset
    return store.paced


def test_the_snapshotter_writes_in_slices_unless_told_not_to(tmp_path: Path) -> None:
    assert _snapshot(tmp_path, "default", Snapshotter) == [True]
    assert _snapshot(tmp_path, "none", lambda s: Snapshotter(s, duty_cycle=None)) == [False]


def test_warming_up_opens_and_creates_no_database(tmp_path: Path) -> None:
    # A server imports the store's modules ahead of its first snapshot; the database itself is
    # still created with that snapshot.
    file = tmp_path / "snapshots.db"
    snapshotter = Snapshotter(lambda: SnapshotStore(f"sqlite:///{file}"), file=file)
    snapshotter.warm_up()
    snapshotter.close()
    assert not file.exists()
    assert not snapshotter.may_hold_snapshots()


_WARM_UP = """
import sys
from pathlib import Path
from api.service.snapshots import Snapshotter
from replay.sql.store import SnapshotStore
file = Path(sys.argv[1])
snapshotter = Snapshotter(lambda: SnapshotStore(f"sqlite:///{file}"), file=file)
snapshotter.warm_up().result()
snapshotter.close()
with SnapshotStore(f"sqlite:///{file}") as store:
    assert store.ensure_schema()
print("alembic" in sys.modules, "replay.sql.schema" in sys.modules)
"""


def test_a_server_never_imports_alembic_for_a_new_or_current_database(tmp_path: Path) -> None:
    # Alembic only migrates: a new database is created at the head revision without it
    # (replay/sql/new_schema.py), a current one is known by one query; its memory and CPU stay
    # out of the serving process.
    file = tmp_path / "snapshots.db"

    def warmed_then_created() -> str:
        done = subprocess.run(
            [sys.executable, "-c", _WARM_UP, str(file)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return done.stdout.strip()

    assert warmed_then_created() == "False False"  # no database yet: created by ensure_schema
    assert file.exists()
    assert warmed_then_created() == "False False"  # the database at its revision
