"""Returning freed memory after connections close (issue #54, finding 5): when trims happen."""

from __future__ import annotations

import asyncio

import pytest

from api.server.heap import HeapTrimmer, return_free_memory


@pytest.mark.skipif(not HeapTrimmer().available, reason="the C library has no malloc_trim")
def test_a_trim_follows_enough_closes_and_not_each_one() -> None:
    async def run() -> HeapTrimmer:
        trimmer = HeapTrimmer(closes=3, delay=0.01)
        for _ in range(2):
            trimmer.closed()
        await asyncio.sleep(0.1)
        assert trimmer.trims == 0  # two closes are not worth a trim
        for _ in range(10):
            trimmer.closed()  # the third makes one due; the others join it
        await asyncio.sleep(0.2)
        return trimmer

    assert asyncio.run(run()).trims == 1


def test_a_trim_not_started_is_dropped_at_stop() -> None:
    async def run() -> HeapTrimmer:
        trimmer = HeapTrimmer(closes=1, delay=0.05)
        trimmer.closed()
        trimmer.cancel()
        await asyncio.sleep(0.2)
        return trimmer

    assert asyncio.run(run()).trims == 0


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_a_start_returns_what_its_load_freed_in_the_heap() -> None:
    # What a load leaves: blocks freed among blocks it keeps, so the heap's top never shrinks.
    made = [bytearray(4000) for _ in range(20_000)]  # 80 MB of the heap, below mmap's size
    kept = made[::16]
    del made
    before = _rss_kib()
    assert return_free_memory()  # glibc (this suite runs on Linux)
    returned_mib = (before - _rss_kib()) / 1024
    assert returned_mib > 40, f"only {returned_mib:.1f} MiB returned"
    assert len(kept) == 1250
