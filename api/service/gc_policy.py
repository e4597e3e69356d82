"""The cyclic garbage collector's policy for a server: its loaded image frozen, mass changes.

A server's image is large and lives as long as the process; the cyclic collector would walk
all of it in every full collection. So:

- `mlog serve` loads its image with the collector off and freezes what the load made as it
  ends (`image_frozen_as_loaded`), so no collection walks a fresh image;
- once an image is loaded (`freeze_loaded_image`: `mlog serve` once it serves, a quorum node
  when it loads or installs one) what is alive is frozen, the young generation's threshold goes up
  (`YOUNG_COLLECTION_THRESHOLD`), each collection first untracks the young generation's map
  nodes (`_untrack_young_map_nodes`, `replay.map_nodes`) and each long one freezes what
  survived it (`_freeze_after_long_collection`): on a growing image, its new objects are
  walked once, and its maps' new nodes not at all;
- a mass change (a fence moving a broker's leaderships in batches, a follower replaying such
  batches or catching up) makes objects that join the image and live as long as it: new
  partition records, map nodes, topic images. The collector would walk each of them in its
  young collection, again in its middle one, and again in full collections until a long one
  freezes what survived: ~15% of a voter's CPU during a 20% fence at 1M partitions, and full
  collections of tens of milliseconds on the event loop, which is where the heartbeats' tail
  came from. So while a mass change runs the collector makes no automatic collection, and
  when the last one ends what is alive is frozen (`gc.freeze`), as after an image's load,
  and collections resume.

The bargain is the freeze's: a cycle of garbage that exists at that moment (made by the
requests answered meanwhile) is never freed. It is bounded by one mass change, as the
freeze after a load is by the load, and mass changes are rare events (a broker fenced or
shut down, a node catching up), not every write's.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from replay.map_nodes import untrack_young_nodes

if TYPE_CHECKING:
    import asyncio


class _MassChanges:
    """The mass changes under way in this process (the collector is process-wide)."""

    def __init__(self) -> None:
        self.holders = 0
        self.was_enabled = False


_UNDER_WAY = _MassChanges()


def begin_mass_change() -> None:
    """A mass change begins: no automatic collection until the last one ends."""
    if _UNDER_WAY.holders == 0:
        _UNDER_WAY.was_enabled = gc.isenabled()
        gc.disable()
    _UNDER_WAY.holders += 1


def end_mass_change() -> None:
    """A mass change ends; after the last, freeze what is alive and let collections resume."""
    if _UNDER_WAY.holders <= 0:
        return
    _UNDER_WAY.holders -= 1
    if _UNDER_WAY.holders == 0:
        gc.freeze()
        if _UNDER_WAY.was_enabled:
            gc.enable()


def mass_changes_under_way() -> int:
    """How many mass changes have begun and not ended."""
    return _UNDER_WAY.holders


class MassChangeUntilQuiet:
    """A mass change that lasts while `busy()` is called, until `quiet_s` pass without a call.

    A follower cannot tell when the leader's mass change ends; it sees commits of many
    entries, and then none. Big commits that never stop (a sender keeping it busy on
    purpose, a very long catch-up) would keep the collector off for good and freeze all the
    garbage made meanwhile: after `longest_s` the mass change ends all the same, and the
    collector works as usual until a quiet spell ends that busy stretch.
    """

    def __init__(self, quiet_s: float, longest_s: float) -> None:
        self.quiet_s = quiet_s
        self.longest_s = longest_s
        self._timer: asyncio.TimerHandle | None = None
        """The quiet spell's timer, while a busy stretch lasts."""
        self._began: float | None = None
        """When this stretch's mass change began (None: none under way, or it ran too long)."""

    def busy(self) -> None:
        """Another step of the mass change (on the event loop's thread)."""
        import asyncio  # here: the commands that import the service run without asyncio

        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._timer is None:
            begin_mass_change()
            self._began = now
        else:
            self._timer.cancel()
            if self._began is not None and now - self._began >= self.longest_s:
                self._began = None
                end_mass_change()
        self._timer = loop.call_later(self.quiet_s, self.end)

    def under_way(self) -> bool:
        """Whether it holds the collector off now."""
        return self._began is not None

    def end(self) -> None:
        """End the busy stretch now, if there is one (also what the timer calls)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._began is not None:
            self._began = None
            end_mass_change()


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between two collections of the cyclic collector's youngest generation (700 by
default), once a server's image is loaded: fewer young collections, and fewer of the middle
and full ones they lead to, each of which walks every object made since the image was frozen.
Fencing a broker holding 20% of 1M partitions (202,902 moves) in process: 4.0 s with 700 (8
full collections, a batch held up to 0.3 s), 2.8 s with 10,000 (none), 2.4 s with no
collector. A single server taking admin writes (`bench/server_bench.py --against c81bc58
--pairs 4 --seconds 15`, this policy the only change to the server): 12,125 writes/s against
11,425 with 700 (and no freeze after long collections), 58.6 against 62.1 µs of CPU a
request; 50,000 did no better than 10,000."""


@contextmanager
def image_frozen_as_loaded() -> Iterator[None]:
    """Load a server's image with the collector off, and freeze what the load made once it ends.

    The start of `mlog serve` (its imports, the log's open, the snapshot's load, the tail's
    replay) runs inside. A load makes millions of containers that live as long as the server
    and no cycles; with the collector on between its steps (between a snapshot's load and the
    tail's replay, or after it, during the next imports) each of its next collections walked
    all of them: the young one, a middle one and then full ones. At 1M partitions that was
    the warm-up's imports taking 3.1-3.6 s instead of 0.4 s, and the explicit collection
    after the start another 1.2-1.4 s: about 45% of a start. `gc.freeze` moves them out of
    every generation at once (an O(1) splice of the collector's lists; it walks nothing), so
    no collection walks them after the load either. A start that fails leaves what it made
    to the collector (a CLI error, a damaged log): nothing is frozen then.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if was_enabled:
            gc.enable()


def freeze_loaded_image() -> None:
    """Move what is alive now (a just loaded image) out of the cyclic collector's view.

    A single server does this once its image is loaded (`mlog serve`); a quorum node loads its
    image later, in its loop, and calls it then (and after installing a snapshot). Without it
    the next full collection scans every object of the image: 4 s at 1M partitions, on the
    event loop, long enough for the other voters to elect another leader and for each new
    leader to restart every broker's session. `gc.freeze` scans nothing (no `gc.collect`
    first, which would be that same pause); garbage frozen with the image is the replay's
    short-lived objects, little and kept once. The young generation's threshold goes up too
    (`YOUNG_COLLECTION_THRESHOLD`): a mass change (a fence's moves) makes a new object per
    partition changed, and every request a few.
    """
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and young < YOUNG_COLLECTION_THRESHOLD:  # 0: the collector is off; leave it
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)
    # In this order: the freeze's timer starts after the untracking, so it times the walk.
    for callback in (_untrack_young_map_nodes, _freeze_after_long_collection):
        if callback not in gc.callbacks:
            gc.callbacks.append(callback)


def _untrack_young_map_nodes(phase: str, info: dict[str, int]) -> None:
    """As a collection starts, untrack the young generation's map nodes (a `gc.callbacks` entry).

    They are most of what a growing image's young collections walk (`replay.map_nodes`):
    a quorum taking a topic per write, `quorum_bench --cpu`, paired runs in
    `docs/performance.md`. Nodes made since the last collection are all in the young
    generation (any collection takes it in), so one pass over it reaches each new node once.
    """
    if phase == "start":
        untrack_young_nodes()


FREEZE_AFTER_YOUNG_COLLECTION_S = 0.002
"""A young collection that took at least this much CPU is followed by a freeze of what survived."""

FREEZE_AFTER_COLLECTION_S = 0.05
"""A middle or full collection that took at least this much CPU is followed by a freeze."""

_collection_started = [0.0]
"""The thread's CPU time when the collection under way began (`_freeze_after_long_collection`)."""


def _freeze_after_long_collection(phase: str, info: dict[str, int]) -> None:
    """After a long collection, freeze what survived it (a `gc.callbacks` entry).

    The image keeps growing after it was loaded (a quorum that starts empty and takes writes,
    a fence's moves). What survives the collections then is mostly the image's new objects
    (topic images, partition records, ids, the persistent maps' new nodes), and walking them
    gets dearer as the image grows: a map node's children are older objects spread over the
    heap, each a cache miss. Each such object was walked by the young collection, again by a
    middle one and again by full ones until a freeze. Measured on a quorum taking a topic per
    write (`quorum_bench --cpu --writers 64 --repeat 4`, snapshots off, a `gc.callbacks`
    timer), each voter's middle collections of ~100,000 objects went from 1 ms to 100-140 ms
    over the run (1.8 s in all), and a CPython full collection, which comes once what moved
    to the oldest generation adds up to a quarter of what the last one kept, walked them all
    again: 850 ms and 1,041 ms on the leader, 2.4 s in an earlier run, longer than the fetch
    timeout (2 s): the followers elected another leader.

    So a collection that took `FREEZE_AFTER_YOUNG_COLLECTION_S` of CPU (a young one) or
    `FREEZE_AFTER_COLLECTION_S` (a middle or full one) is followed by `gc.freeze()`: what
    survived is never walked again. In that run, middle collections fell to ~0.03 s in all
    on each voter and full ones to 0.13-0.19 s (longest 65-85 ms); the voters' p99 to
    21-26 ms from 32-36 ms. Only long ones freeze: a young collection takes ~0.1 ms on a
    server whose image does not grow (`server_bench`, longest 1.2 ms), so freezes come with
    the image's growth spurts.

    The bargain is `freeze_loaded_image`'s: a collection has just freed the cycles of
    garbage among the generations it walked, so what is frozen is alive, or garbage of the
    older generations not walked yet; what the freeze keeps from the collector is that, and
    any cycle formed later among frozen objects (a connection open then, closed later). The
    requests of a server make almost none: in the run above, after ~500 young collections
    each followed by a freeze, `gc.unfreeze()` and a full collection at the end found 102
    objects of garbage on each voter; `server_bench`'s young collections collect ~0.01
    objects a request.
    """
    if phase == "start":
        _collection_started[0] = time.thread_time()
        return
    took = time.thread_time() - _collection_started[0]
    if took >= (
        FREEZE_AFTER_COLLECTION_S if info.get("generation") else FREEZE_AFTER_YOUNG_COLLECTION_S
    ):
        gc.freeze()


def sweep_frozen() -> int:
    """One full collection of everything, frozen or not; then what is alive frozen again.

    For a process that follows `freeze_loaded_image`'s policy but makes more cycles of
    garbage than a server's requests do: `mlog console` (aiohttp's requests, Jinja's
    renders, about 100 objects a page) would keep each freeze's cycles for good. Called
    every few minutes, it frees them at the price of one walk of what is alive; the freeze
    after it holds no garbage (the collection has just freed it). Returns what was freed.
    """
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()
