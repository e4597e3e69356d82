"""Returning freed memory after connections close (issue #54, finding 5): when trims happen."""

from __future__ import annotations

import asyncio

import pytest

from api.server.heap import HeapTrimmer


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
