"""Trims keep the Merkle index (metadata_log.merkle): the tree still starts at offset 0.

Every trim path (`MetadataLog.trim_before`, which `mlog log trim` and a standalone server's
retention call, and `ReplicaLog.trim_before`, a quorum node's) first extends `merkle/` over
the entries it removes; one that cannot is held back and removes nothing. Afterwards digests
are `v2`, proofs reach entries before the start, and a `v2` digest taken before the trim
still matches. The proofs are checked by the auditor's verifier (tests/support).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from api.service.retention import LogRetention, RetentionConfig
from metadata_log import MetadataLog
from metadata_log.digest import LogDigest, take_digest
from metadata_log.merkle import IndexHeldBack, _split_fast, entry_bytes, recompute_root, root_at
from metadata_log.reader import LogReader
from records.varint import encode_long, read_long
from tests.support.cli import as_json, entries, mlog, ok
from tests.support.merkle_verifier import verify_consistency, verify_inclusion
from tests.support.replica_logs import block_of, opened
from tests.support.trim_logs import CONFIG, build, config


def indexed(directory: Path) -> int:
    """How many entries `<log dir>/merkle/` holds (0 when it has no state yet)."""
    state = directory / "merkle" / "state"
    return int(state.read_text().split()[0]) if state.exists() else 0


def v2_token(directory: Path, at_offset: int) -> str:
    """A v2 digest at `at_offset`, its root hashed from the entries (the index left alone)."""
    with LogReader.open(directory, config=CONFIG) as log:
        segments = log.storage.segments
        digest = take_digest(segments, at_offset)
        root = recompute_root(segments, digest.end_offset)
    return LogDigest(offset=digest.offset, chain=digest.chain, root=root).token()


def test_a_trim_indexes_what_it_removes_and_digests_and_proofs_survive_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    directory = data / "log"
    build(directory, 6)  # segments of one 3-entry block at 0, 3, 6, 9, 12, 15
    early, across, whole = v2_token(directory, 5), v2_token(directory, 11), v2_token(directory, 17)
    assert not (directory / "merkle").exists()
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert [s.base_offset for s in log.trim_before(9)] == [0, 3, 6]
    assert indexed(directory) >= 9  # the leaves of 0..8 were kept before they went
    latest = ok(data, "log", "digest").strip()
    assert latest == whole  # v2, the same root as the untrimmed log's
    for offset in (0, 5, 8, 9, 17):
        proof = as_json(data, "log", "prove", "--offset", str(offset), "--digest", latest)
        assert verify_inclusion(proof, latest)
        assert (proof["entry"] is None) == (offset < 9)
    proof = as_json(data, "log", "prove", "--from-digest", early, "--digest", latest)
    assert verify_consistency(proof, early, latest)
    # A digest taken before the trim: wholly trimmed, or across the new start.
    code, text = mlog(data, "log", "verify", "--digest", early)
    assert code == 0 and "MATCHES: entries 0..5 were trimmed" in text, text
    code, text = mlog(data, "log", "verify", "--digest", across)
    assert code == 0 and "hash chain and the Merkle root over entries 0..11 matches" in text, text
    forged = early[:-64] + "00" * 32
    code, text = mlog(data, "log", "verify", "--digest", forged)
    assert code == 1 and "DOES NOT MATCH" in text, text


def test_mlog_log_trim_keeps_the_leaves_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLOG_SEGMENT_BYTES", "4096")  # about one block per segment
    data = tmp_path / "data"
    ok(data, "brokers", "register", "--id", "1")
    for n in range(6):
        ok(data, "topics", "create", "--topic", f"t{n}", "--partitions", "2")
    early = v2_token(data / "log", entries(data) - 1)
    ok(data, "snapshot", "create")
    ok(data, "topics", "create", "--topic", "later")
    start = as_json(data, "log", "trim", "--before-snapshot")["log_start_offset"]
    assert start > 0 and indexed(data / "log") >= start
    latest = ok(data, "log", "digest").strip()
    assert latest.startswith("mlog-digest:v2:")
    proof = as_json(data, "log", "prove", "--offset", "0", "--digest", latest)
    assert proof["entry"] is None and verify_inclusion(proof, latest)
    assert mlog(data, "log", "verify", "--digest", early)[0] == 0


def test_a_quorum_log_keeps_the_leaves_once_it_keeps_the_chain(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with opened(directory) as log:
        log.keep_chain()
        for i in range(40):
            log.write_blocks([block_of(log, i * 5, 5, 1)], check=False)
        log.flush()
        cut = log.segments()[2].base_offset
        assert log.trim_before(cut)
        assert log.log_start_offset == cut and indexed(directory) >= cut
        # A node keeps it current off its write path, through the durable entries.
        assert log.keep_merkle_index(cut + 42)
        assert indexed(directory) == cut + 40  # the last block end at or before it


def test_an_unchained_quorum_log_has_no_index_to_keep(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with opened(directory) as log:
        for i in range(40):
            log.write_blocks([block_of(log, i * 5, 5, 1)], check=False)
        log.flush()
        assert log.trim_before(log.segments()[2].base_offset)
        assert not log.keep_merkle_index(150)
    assert not (directory / "merkle").exists()


def test_an_index_that_cannot_be_extended_holds_the_trim_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory, 6)
    (directory / "merkle").write_text("not a directory")  # every open of the index fails
    with MetadataLog.open(directory, config=CONFIG) as log:
        with pytest.raises(IndexHeldBack, match="could not be extended to offset 8"):
            log.trim_before(9)
        assert log.log_start_offset == 0 and len(log.segments()) == 6
        retention = LogRetention(RetentionConfig(max_bytes=0))
        with caplog.at_level(logging.WARNING):
            assert retention.trim(log, below=17) == []
        assert retention.held_back == 1 and retention.trimmed_segments == 0
        assert "retention held back the trim" in caplog.text
        assert log.append([config("still", 0)]) == (18, 18)  # the log still takes writes
        (directory / "merkle").unlink()
        assert retention.trim(log, below=17)  # once it can be extended, the trim goes ahead
        assert indexed(directory) >= log.log_start_offset > 0


def test_a_log_cut_and_written_again_keeps_the_leaves_below_its_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    directory = data / "log"
    build(directory, 6)
    with MetadataLog.open(directory, config=CONFIG) as log:
        log.trim_before(9)
    ok(data, "log", "digest")  # the index now reaches the end, 18
    assert indexed(directory) == 18
    ok(data, "log", "truncate", "--after-offset", "11", "--force")
    build(directory, 1)  # another block at 12: the index's end is not in the log any more
    latest = ok(data, "log", "digest").strip()
    assert latest.startswith("mlog-digest:v2:14:")  # rewound to the start, not to 0
    proof = as_json(data, "log", "prove", "--offset", "2", "--digest", latest)
    assert verify_inclusion(proof, latest)


def test_entries_are_split_exactly_even_when_one_holds_the_next_ones_first_bytes(
    tmp_path: Path,
) -> None:
    # Entries of a block are found by the bytes the next one starts with (offset, epoch,
    # timestamp), each piece checked to be one whole entry: a value holding those bytes (all
    # below 0x80 with this clock, so they fit in a string) makes that check fail and the
    # block is decoded instead. Either way the pieces are fastavro's, byte for byte.
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: 5) as log:
        log.append([config("plain", i) for i in range(4)])
        block, _ = next(log.storage.segments[0].blocks_with_offsets(0))
        _, end = read_long(block.body, 0)
        _, end = read_long(block.body, end)
        _, end = read_long(block.body, end)
        stamp = block.body[1:end]  # the epoch and timestamp every entry of a block starts with
        tricky = [config("x", 0), config("y", 1)]
        value = f"v{(encode_long(5) + stamp).decode()}v"  # entry 5's first bytes, in entry 4
        tricky[0] = dataclasses.replace(tricky[0], value=value)
        log.append(tricky)
    split = []
    with LogReader.open(directory, config=CONFIG) as log:
        for segment in log.storage.segments:
            schema = segment.header.schema_json
            for block, _ in segment.blocks_with_offsets(segment.base_offset):
                expected = entry_bytes(schema, block.count, block.body)
                fast = _split_fast(schema, block.count, block.body)
                assert fast is None or fast == expected
                assert len(expected) == block.count
                split.append(fast is not None)
        assert split == [True, False]  # the plain block split fast, the tricky one decoded
        assert recompute_root(log.storage.segments, 6) == root_at(
            directory, log.storage.segments, 6
        )
