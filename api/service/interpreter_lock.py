"""How long a busy thread keeps the interpreter lock from one that waits: a server's setting.

A server runs its event loop beside threads that need the lock for a moment: the log's
append thread where the compiled syncer is not built (metadata_log.syncer: it completes each
group commit), a quorum node's worker (a leader's fsyncs, catch-up reads), a snapshot written
on a thread in slices (the CLI's; `mlog serve` forks a child for it), the log writer
formatting lines. The loop holds the lock through
long stretches (a turn's ready callbacks, one request after another); a thread that asks for
it waits up to CPython's switch interval, 5 ms, unless the loop gives it up sooner for a
system call. So `share_the_interpreter_lock` lowers the interval to `SWITCH_INTERVAL_S`
(0.5 ms): `mlog serve` as it starts, single server or quorum node, and a quorum node when it
starts (`api.raft.node`).

- A single server without the compiled syncer: a group commit's answers wait on the append
  thread's turn. Against
  `826a521` (5 ms), `server_bench --against --pairs 4 --seconds 15`: 8,639 admin writes/s
  against 8,172 (every pair faster, +2.5% to +9.5%), 83.4 against 85.1 µs of CPU a request,
  p99 8.6-9.4 ms against 8.9-9.9 ms.
- A voter: each time the loop gives up the lock for a system call, a snapshot's writer takes
  it, and the loop waited up to 5 ms to get it back: that held the leader's fetch answers
  past the fetch timeout (2 s) when all three voters wrote their 20 MB snapshot together
  (`quorum_bench --cpu --repeat 1`, load 1-3: in 4 runs of 6 the followers elected another
  leader at that offset; with 0.5 ms, in none of 4, though one fetch still timed out in 3 of
  them). The writer also leaves the loop the lock between slices of its work
  (`api/service/snapshot_pacing.py`).

Lowered only, never raised: an embedding process that set a shorter interval keeps it.
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005
"""Seconds a thread holding the interpreter lock keeps it from another that waits (CPython's
default is 0.005)."""


def share_the_interpreter_lock() -> None:
    """Lower the interpreter's switch interval to `SWITCH_INTERVAL_S` (never raise it)."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
