"""`mlog features describe|upgrade|downgrade` on a data directory and through a server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from records import FeatureLevelRecord
from tests.support.chain_attacks import forget_chain
from tests.support.cli import error, mlog, ok
from tests.support.server_thread import running_server


@pytest.fixture(params=["embedded", "remote"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Flags that aim `mlog` at the data directory (none) or at a server over it."""
    if request.param == "embedded":
        ok(tmp_path, "namespaces", "create", "--namespace", "team")
        yield []
        return
    with running_server(tmp_path / "served" / "log", brokers=0) as server:
        yield ["--bootstrap-server", server.address]


def _levels(tmp_path: Path, where: list[str]) -> dict[str, dict[str, int]]:
    text = ok(tmp_path, "features", "describe", "--output", "json", *where)
    return {item["feature"]: item for item in json.loads(text)}


def test_describe_upgrade_and_a_refused_downgrade(tmp_path: Path, where: list[str]) -> None:
    levels = _levels(tmp_path, where)
    assert levels["metadata.version"]["finalized_level"] == 2
    assert levels["metadata.version"]["supported_max_level"] == 2
    assert levels["kraft.version"]["finalized_level"] == 0
    assert levels["kraft.version"]["supported_max_level"] == 1
    assert "would be upgraded to level 1" in ok(
        tmp_path, "features", "upgrade", "--feature", "kraft.version=1", "--dry-run", *where
    )
    assert _levels(tmp_path, where)["kraft.version"]["finalized_level"] == 0
    assert "upgraded to level 1" in ok(
        tmp_path, "features", "upgrade", "--feature", "kraft.version=1", *where
    )
    after = _levels(tmp_path, where)
    assert after["kraft.version"]["finalized_level"] == 1
    assert after["kraft.version"]["epoch"] > levels["kraft.version"]["epoch"]
    text = ok(tmp_path, "features", "describe", *where)
    header = text.splitlines()[0].split()
    assert header == [
        "Feature",
        "SupportedMinVersion",
        "SupportedMaxVersion",
        "FinalizedVersionLevel",
        "Epoch",
    ]
    code, _ = mlog(tmp_path, "features", "downgrade", "--feature", "kraft.version=0", *where)
    assert code == 2
    assert _levels(tmp_path, where)["kraft.version"]["finalized_level"] == 1


def test_refusals_say_why_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(tmp_path, "namespaces", "create", "--namespace", "team")
    said = {
        ("upgrade", "--feature", "metadata.version=3"): "not supported by this version",
        ("upgrade", "--metadata", "1"): "needs a downgrade (mlog features downgrade)",
        ("upgrade", "--feature", "x.version=1"): "unknown feature",
        ("downgrade", "--metadata", "1"): "cannot be downgraded safely",
        ("downgrade", "--metadata", "1", "--unsafe"): "cannot be downgraded even unsafely",
        ("downgrade", "--feature", "kraft.version=1"): "is an upgrade, not a downgrade",
        ("upgrade", "--feature", "kraft.version=1", "--metadata", "3"): "not supported",
        ("upgrade",): "nothing to change",
    }
    for args, text in said.items():
        assert text in error(tmp_path, capsys, "features", *args), args
    levels = _levels(tmp_path, [])
    assert levels["kraft.version"]["finalized_level"] == 0


def test_a_server_refuses_with_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(tmp_path / "served" / "log", brokers=0) as server:
        code, _ = mlog(
            tmp_path,
            "features",
            "downgrade",
            "--metadata",
            "1",
            "--bootstrap-server",
            server.address,
        )
    assert code == 2
    assert "cannot be downgraded safely from level 2 to 1" in capsys.readouterr().err


def test_an_older_log_is_upgraded_by_a_feature_level_record(tmp_path: Path) -> None:
    # What the code before the chain wrote: metadata.version 1, no chain files.
    with MetadataLog.open(tmp_path / "log") as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
    forget_chain(tmp_path / "log")
    level = _levels(tmp_path, [])["metadata.version"]["finalized_level"]
    assert level < 2
    assert "would be upgraded" in ok(
        tmp_path, "features", "upgrade", "--metadata", "2", "--dry-run"
    )
    ok(tmp_path, "features", "upgrade", "--feature", "metadata.version=2")
    assert _levels(tmp_path, [])["metadata.version"]["finalized_level"] == 2
    code, text = mlog(tmp_path, "log", "verify")
    assert code == 0 and "hash chain from offset 0: intact" in text
