"""A driver archive planted in a cache directory of a test's own (`replay.audit.driver_archive`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.audit import driver_archive


def plant_driver_archive(
    monkeypatch: pytest.MonkeyPatch, cache: Path, data: bytes | None = b"an archive"
) -> Path:
    """Point `XDG_CACHE_HOME` at `cache`; the driver's archive path there, holding `data`.

    `data=None` leaves the file out (its directory made): for a test that builds it.
    """
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    path = driver_archive.archive()
    assert path is not None and path.is_relative_to(cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        path.write_bytes(data)
    return path
