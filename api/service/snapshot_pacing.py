"""How a snapshot written beside a serving event loop leaves that loop the interpreter.

A background snapshot runs on a worker thread, and in CPython only one thread runs Python at a
time. While the writer holds the interpreter lock, the event loop, back from each system call
(a socket read, a send, an fsync), waits for it up to the switch interval; the writer takes the
lock back whenever the loop makes its next call. With three voters on two cores all writing
the same offset's snapshot, that held a leader's answers for seconds. Kafka's controller writes
its snapshots incrementally between events; here the writer works in slices instead: at most
`busy_s` of work, then a rest (a sleep, which releases the lock: the loop has it to itself and
runs every event that is ready). The rest lasts `rest_s`, and goes on, each further sleep
twice as long, up to `max_rest_s` in all, while the rest of the process (the loop) kept a CPU
busy for at least `busy_share` of the last sleep: a busy loop gets most of the interpreter, an
idle one lets the writer run at nearly full speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


def _others_cpu() -> float:
    """CPU seconds the process's other threads used so far (the process's less this thread's)."""
    return time.process_time() - time.thread_time()


@dataclass(frozen=True, slots=True, kw_only=True)
class DutyCycle:
    """A write's slices: at most `busy_s` of work, then a rest of `rest_s` to `max_rest_s`."""

    busy_s: float = 0.002
    rest_s: float = 0.0005
    max_rest_s: float = 0.008
    busy_share: float = 0.5
    """The share of a rest the other threads must have used the CPU for to extend it."""

    def pacer(
        self,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        others_cpu: Callable[[], float] = _others_cpu,
    ) -> Callable[[], None]:
        """A fresh `pace` for one write, to call often: rests once `busy_s` has passed.

        Wall time, not the thread's CPU time: time spent waiting for the lock counts as
        busy, so a writer that had to wait rests sooner, never later.
        """
        busy_s, rest_s, max_rest_s, busy_share = (
            self.busy_s,
            self.rest_s,
            self.max_rest_s,
            self.busy_share,
        )
        since = clock()

        def pace() -> None:
            nonlocal since
            if clock() - since < busy_s:
                return
            # Each further sleep twice as long as the last: few system calls beside a busy loop.
            rested, step = 0.0, rest_s
            while True:
                before = others_cpu()
                sleep(step)
                rested += step
                # (A tail shorter than half the first sleep is not worth one: no float dust.)
                if rested > max_rest_s - rest_s / 2 or others_cpu() - before < step * busy_share:
                    break
                step = min(2 * step, max_rest_s - rested)
            since = clock()

        return pace
