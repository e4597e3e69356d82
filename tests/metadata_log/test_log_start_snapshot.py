"""A quorum log reset to start after an installed snapshot, and its `log-start-snapshot`."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from metadata_log import LogError
from metadata_log.start_snapshot import (
    START_SNAPSHOT_NAME,
    CarriedChain,
    StartSnapshot,
    StartSnapshotDamage,
    read_start_snapshot,
    write_start_snapshot,
)
from tests.support.cli import mlog
from tests.support.replica_logs import T0, block_of, opened, opened_reader
from tests.support.trim_logs import fill, segment_bases

SNAP = StartSnapshot(offset=499, epoch=4, timestamp=T0 + 499, checksum="ab" * 32)


def test_a_reset_leaves_an_empty_log_after_the_snapshot_and_survives_a_reopen(
    tmp_path: Path,
) -> None:
    fill(tmp_path)
    with opened(tmp_path) as log:
        log.reset_to_snapshot(SNAP)
        assert (log.log_start_offset, log.end_offset, log.epoch_cache()) == (500, 500, [])
        assert log.start_snapshot == SNAP
        log.write_blocks([block_of(log, 500, 3, 5)], check=False)
        log.flush()
    assert segment_bases(tmp_path) == [500]
    with opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset, log.epoch_cache()) == (500, 503, [(5, 500)])
        assert log.start_snapshot == SNAP
        assert [e.offset for e in log.read()] == [500, 501, 502]
    with opened_reader(tmp_path) as log:
        assert log.start_snapshot == SNAP and log.verify().ok


def test_a_reset_behind_the_log_end_drops_the_divergent_tail_too(tmp_path: Path) -> None:
    fill(tmp_path)
    with opened(tmp_path) as log:
        log.reset_to_snapshot(StartSnapshot(offset=52, epoch=1, timestamp=T0, checksum="c"))
        assert (log.log_start_offset, log.end_offset) == (53, 53)
    assert segment_bases(tmp_path) == [53]


@pytest.mark.parametrize("stage", ["intent only", "tail deleted", "new segment"])
def test_an_interrupted_reset_is_finished_by_the_next_writer(tmp_path: Path, stage: str) -> None:
    fill(tmp_path)
    write_start_snapshot(tmp_path, SNAP)
    if stage != "intent only":
        for base in segment_bases(tmp_path)[-1:]:
            (tmp_path / f"{base:020d}.avro").unlink()
    if stage == "new segment":
        from metadata_log.segment import Segment
        from records.codec import DEFAULT_CODEC

        Segment.create(tmp_path, 500, DEFAULT_CODEC.entry_schema_json)
    with pytest.raises(LogError, match="interrupted"), opened_reader(tmp_path):
        pass
    with opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset, log.start_snapshot) == (500, 500, SNAP)
    assert segment_bases(tmp_path) == [500]


def test_the_file_is_checked(tmp_path: Path) -> None:
    write_start_snapshot(tmp_path, SNAP)
    assert read_start_snapshot(tmp_path) == SNAP
    path = tmp_path / START_SNAPSHOT_NAME
    path.write_bytes(path.read_bytes().replace(b"epoch 4", b"epoch 5"))
    fill(tmp_path / "log")
    (tmp_path / "log" / START_SNAPSHOT_NAME).write_bytes(path.read_bytes())
    with pytest.raises(LogError, match="damaged"), opened(tmp_path / "log"):
        pass


def _leader_and_follower(tmp_path: Path) -> tuple[Path, Path]:
    leader, follower = tmp_path / "leader" / "log", tmp_path / "follower" / "log"
    fill(leader)
    with opened(leader) as log:
        log.keep_chain()
    with opened(follower) as log:  # a follower far behind, its chain not kept yet
        for i in range(3):
            log.write_blocks([block_of(log, i * 5, 5, 1)], check=False)
        log.flush()
    return leader, follower


def test_an_install_carries_the_leaders_chain_so_digests_agree(tmp_path: Path) -> None:
    leader, follower = _leader_and_follower(tmp_path)
    with opened(leader) as log:
        carried = log.chain_state(99)
        assert carried.origin == 0
        snapshot = StartSnapshot(
            offset=99, epoch=1, timestamp=T0 + 99, checksum="ab" * 32, chain=carried
        )
        later = log.replica_blocks(start=100, max_bytes=1 << 30)
        expected = [log.digest(o) for o in (99, 104, 199)]
    with opened(follower) as log:
        log.reset_to_snapshot(snapshot)
        assert log.keeps_chain
        assert log.start_snapshot == snapshot
        log.write_blocks(later, check=True)
        log.flush()
        assert [log.digest(o) for o in (99, 104, 199)] == expected
    with opened_reader(follower) as log:
        report = log.verify()
        assert report.ok and report.chain is not None
        assert "carried across the trimmed start at 100" in report.chain.describe()
        assert log.digest(199) == expected[-1]


def test_an_install_without_a_carried_chain_starts_it_from_zeros(tmp_path: Path) -> None:
    leader, follower = _leader_and_follower(tmp_path)
    with opened(leader) as log:
        later = log.replica_blocks(start=100, max_bytes=1 << 30)
        expected = log.digest(199)
    with opened(follower) as log:
        log.keep_chain()
        log.reset_to_snapshot(StartSnapshot(offset=99, epoch=1, timestamp=T0, checksum="c"))
        log.write_blocks(later, check=True)
        assert log.digest(199) != expected


def test_an_interrupted_reset_keeps_the_carried_chain(tmp_path: Path) -> None:
    leader, follower = _leader_and_follower(tmp_path)
    with opened(leader) as log:
        snapshot = StartSnapshot(
            offset=99, epoch=1, timestamp=T0, checksum="c", chain=log.chain_state(99)
        )
        expected = log.digest(99)
    write_start_snapshot(follower, snapshot)  # the intent, then a crash
    assert read_start_snapshot(follower) == snapshot
    with opened(follower) as log:
        assert (log.log_start_offset, log.keeps_chain) == (100, True)
        assert log.digest(99) == expected


def test_a_damaged_chain_line_is_damage(tmp_path: Path) -> None:
    chained = StartSnapshot(
        offset=1,
        epoch=1,
        timestamp=T0,
        checksum="c",
        chain=CarriedChain(origin=0, value=b"\1" * 32),
    )
    write_start_snapshot(tmp_path, chained)
    assert read_start_snapshot(tmp_path) == chained
    path = tmp_path / START_SNAPSHOT_NAME
    text = path.read_text().replace("01" * 32, "zz" * 32)
    body = text.rsplit("crc32", 1)[0]
    path.write_text(f"{body}crc32 {zlib.crc32(body.encode()):08x}\n")
    with pytest.raises(StartSnapshotDamage, match="chain lines"):
        read_start_snapshot(tmp_path)


def test_log_digest_after_an_install_is_the_chain_only_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leader, follower = _leader_and_follower(tmp_path)
    with opened(leader) as log:
        snapshot = StartSnapshot(
            offset=99, epoch=1, timestamp=T0, checksum="c", chain=log.chain_state(99)
        )
        later = log.replica_blocks(start=100, max_bytes=1 << 30)
        expected = log.digest(199)
    with opened(follower) as log:
        log.reset_to_snapshot(snapshot)
        log.write_blocks(later, check=True)
        log.flush()
    code, text = mlog(follower.parent, "log", "digest")
    assert code == 0, text
    assert text.strip() == expected.token()
    assert "v1 digest (hash chain only, no Merkle root)" in capsys.readouterr().err
    code, text = mlog(follower.parent, "log", "verify", "--digest", expected.token())
    assert code == 0 and "MATCHES" in text, text
