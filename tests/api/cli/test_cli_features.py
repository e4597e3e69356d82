"""`mlog features describe|upgrade` on a data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from records import FeatureLevelRecord
from tests.support.cli import error, mlog, ok


def test_a_new_data_directory_starts_at_the_newest_metadata_version(tmp_path: Path) -> None:
    ok(tmp_path, "namespaces", "create", "--namespace", "team")
    levels = {
        item["feature"]: item
        for item in json.loads(ok(tmp_path, "features", "describe", "--output", "json"))
    }
    assert levels["metadata.version"]["finalized_level"] == 2
    assert levels["metadata.version"]["supported_max_level"] == 2
    assert levels["kraft.version"]["finalized_level"] == 0
    assert levels["kraft.version"]["supported_max_level"] == 1
    assert "upgraded to level 1" in ok(
        tmp_path, "features", "upgrade", "--feature", "kraft.version=1"
    )
    text = ok(tmp_path, "features", "describe")
    assert "kraft.version" in text and "FinalizedVersionLevel" in text


def test_upgrades_this_version_cannot_make_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(tmp_path, "namespaces", "create", "--namespace", "team")
    assert "not supported by this version" in error(
        tmp_path, capsys, "features", "upgrade", "--feature", "metadata.version=3"
    )
    assert "already at level 2" in error(
        tmp_path, capsys, "features", "upgrade", "--feature", "metadata.version=1"
    )
    assert "unknown feature" in error(
        tmp_path, capsys, "features", "upgrade", "--feature", "x.version=1"
    )


def test_an_older_log_is_upgraded_by_a_feature_level_record(tmp_path: Path) -> None:
    # What the code before the chain wrote: metadata.version 1, no chain files.
    with MetadataLog.open(tmp_path / "log") as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
    for path in (tmp_path / "log").glob("*.chain"):
        path.unlink()
    before = json.loads(ok(tmp_path, "features", "describe", "--output", "json"))
    level = next(i for i in before if i["feature"] == "metadata.version")["finalized_level"]
    assert level < 2
    assert "would be upgraded" in ok(
        tmp_path, "features", "upgrade", "--feature", "metadata.version=2", "--dry-run"
    )
    ok(tmp_path, "features", "upgrade", "--feature", "metadata.version=2")
    after = json.loads(ok(tmp_path, "features", "describe", "--output", "json"))
    assert next(i for i in after if i["feature"] == "metadata.version")["finalized_level"] == 2
    code, text = mlog(tmp_path, "log", "verify")
    assert code == 0 and "hash chain from offset 0: intact" in text
