"""Time travel: the image at any offset or time, what changed between two, an entity's history.

`image_at(log, store, at_offset=N)` loads the newest valid snapshot at or before N and replays
the log from there up to N; `at_time=T` first finds the last entry appended at or before T.
A snapshot is used only if it belongs to this log (the log's entry at its offset has the
snapshot's epoch and timestamp) and its rows match their checksum; otherwise the next older one
is tried, and with none (or no database) the log is replayed from the start. The answer is the
same either way; snapshots only make it faster.

Only committed states are answered: an offset inside an atomic batch (a topic before its
partitions) means the batch's end (`batch_end`), and a time before the first entry is refused.

One module per job: `errors` (`TimeTravelError`), `points` (an offset from an offset, a time or
an argument), `rebuild` (`travel`, `image_at`), `image_diff` (`diff`, `diff_points`),
`descriptions` (a record in one line), `entity_history` (`history`, `history_range`) and
`image_cache` (`ImageCache`: images kept between points, for a process answering many).
"""

from replay.changes import Change
from replay.timetravel.descriptions import Names, describe
from replay.timetravel.entity_history import (
    Entity,
    HistoryEntry,
    history,
    history_range,
    image_names,
    learn,
    learn_image,
    start_image,
)
from replay.timetravel.errors import TimeTravelError
from replay.timetravel.image_cache import ImageCache
from replay.timetravel.image_diff import diff, diff_points
from replay.timetravel.points import (
    batch_end,
    offset_at_time,
    parse_time,
    point_offset,
    resolve_offset,
)
from replay.timetravel.rebuild import Travel, image_at, snapshot_matches_log, travel

__all__ = [
    "Change",
    "Entity",
    "HistoryEntry",
    "ImageCache",
    "Names",
    "TimeTravelError",
    "Travel",
    "batch_end",
    "describe",
    "diff",
    "diff_points",
    "history",
    "history_range",
    "image_at",
    "image_names",
    "learn",
    "learn_image",
    "offset_at_time",
    "parse_time",
    "point_offset",
    "resolve_offset",
    "snapshot_matches_log",
    "start_image",
    "travel",
]
