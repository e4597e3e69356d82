"""Fixtures of the compiled partition readers' tests (SQLite's and PostgreSQL's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from replay.image import MetadataImage
from replay.loader import load_image
from tests.support.sql_backends import LoadWays, write_generated_log


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A generated log's directory and its end offset (one per test module)."""
    directory: Path = tmp_path_factory.mktemp("runs") / "log"
    end = write_generated_log(directory, seed=31, batches=300, cancels=True, security=True)
    return directory, end


@pytest.fixture(scope="module")
def image(generated: tuple[Path, int]) -> MetadataImage:
    """The image of the whole generated log."""
    with LogReader.open(generated[0]) as log:
        return load_image(log)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> LoadWays:
    """Which way each load of the test read its partitions."""
    return LoadWays(monkeypatch)
