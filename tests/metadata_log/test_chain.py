"""The hash chain over the log's blocks: verify, digests, edits with valid CRCs."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_log import LogConfig, MetadataLog
from metadata_log.config import MIN_SEGMENT_BYTES
from metadata_log.digest import DigestError, LogDigest, parse_digest
from metadata_log.errors import LogCorruptionError
from metadata_log.reader import LogReader
from metadata_log.replica_log import ReplicaLog
from metadata_log.segment import Segment, segment_name
from metadata_log.verify import VerifyReport, verify_log
from records import TopicRecord
from records.codec import DEFAULT_CODEC
from records.uuids import Uuid
from tests.support.chain_attacks import forget_chain, rename_topic, rewrite_entries
from tests.support.cli import mlog
from tests.support.replica_logs import block_of, opened

DATA = Path(__file__).parent.parent / "data"
ROLL_EVERY_BLOCK = LogConfig(segment_bytes=MIN_SEGMENT_BYTES)
"""Segments this small hold one block each: every append but the last is in a sealed one."""


def topic(name: str) -> TopicRecord:
    return TopicRecord(name=name, topic_id=Uuid(uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes))


def build(directory: Path, topics: int = 12, config: LogConfig = ROLL_EVERY_BLOCK) -> None:
    with MetadataLog.open(directory, config=config) as log:
        for i in range(topics):
            log.append([topic(f"t{i}")], principal="User:admin")


def check(directory: Path, digest: LogDigest) -> tuple[VerifyReport, bool]:
    """(the verify report, whether the digest matches the recomputed chain)."""
    report = verify_log(directory, chain_values_at=[digest.end_offset])
    assert report.chain is not None
    return report, report.chain.value_at(digest.end_offset) == digest.chain


def test_a_new_log_is_chained_from_its_first_block(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    report = verify_log(directory)
    assert report.ok
    assert report.chain is not None
    assert report.chain.origin == 0
    assert report.chain.stored_from == 0
    assert "intact up to offset 11" in report.chain.describe()


def test_a_rewrite_with_valid_crcs_is_caught_by_verify_and_by_a_digest(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    with LogReader.open(directory) as log:
        digest = log.digest()
    # t3 is the only entry of the sealed segment 3: rewritten as zz with fresh CRCs.
    assert rewrite_entries(directory / segment_name(3), rename_topic("t3", "zz")) == 1
    with LogReader.open(directory) as log:
        assert [e.record.name for e in log.read() if isinstance(e.record, TopicRecord)][3] == "zz"
    report, matches = check(directory, digest)
    assert all(s.error is None for s in report.segments)  # every CRC holds
    assert not report.ok
    assert report.chain is not None
    first = report.chain.breaks[0]
    assert (first.first_offset, first.last_offset) == (3, 3)
    assert first.segment.name == segment_name(3)
    assert not matches


def test_the_cli_names_the_first_block_that_does_not_follow(tmp_path: Path) -> None:
    build(tmp_path / "log")
    code, token = mlog(tmp_path, "log", "digest", "--at-offset", "5")
    assert code == 0
    assert token.strip().startswith("mlog-digest:v2:5:")
    code, text = mlog(tmp_path, "log", "verify", "--digest", token.strip())
    assert code == 0, text
    assert "MATCHES" in text
    rewrite_entries(tmp_path / "log" / segment_name(3), rename_topic("t3", "zz"))
    code, text = mlog(tmp_path, "log", "verify", "--digest", token.strip())
    assert code == 1
    assert "the block at offsets 3..3" in text
    assert "DOES NOT MATCH" in text


def test_even_a_rewritten_chain_file_does_not_pass_the_digest(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    with LogReader.open(directory) as log:
        digest = log.digest()
    rewrite_entries(directory / segment_name(3), rename_topic("t3", "zz"))
    # The attacker recomputes every stored value after the edit (deletes the files and the
    # headers' word that they existed; a writer open rebuilds them from the edited blocks).
    forget_chain(directory)
    MetadataLog.open(directory, config=ROLL_EVERY_BLOCK).close()
    report, matches = check(directory, digest)
    assert report.ok
    assert not matches


def test_a_digest_holds_after_appends_a_trim_and_restarts(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    config = LogConfig(segment_bytes=16 * 1024)
    build(directory, topics=300, config=config)
    with LogReader.open(directory) as log:
        bases = [s.base_offset for s in log.segments()]
        assert len(bases) >= 2
        early = log.digest(20)
        at_boundary = log.digest(bases[1] - 1)  # what the trimmed start will carry
        at_end = log.digest()
    with MetadataLog.open(directory, config=config) as log:
        for i in range(1000):
            log.append([topic(f"later{i}")])
    with MetadataLog.open(directory, config=config) as log:
        log.trim_before(bases[1])
        assert log.log_start_offset == bases[1]
    with MetadataLog.open(directory, config=config) as log:
        log.append([topic("after-restart")])
    for digest in (at_boundary, at_end):
        report, matches = check(directory, digest)
        assert report.ok and matches, digest
    assert report.chain is not None and report.chain.origin == 0
    assert "carried across the trimmed start" in report.chain.describe()
    code, text = mlog(tmp_path, "log", "verify", "--digest", at_end.token())
    assert code == 0 and "MATCHES" in text, text
    # A digest before the start cannot be checked any more, and says so.
    code, text = mlog(tmp_path, "log", "verify", "--digest", early.token())
    assert code == 1 and "CANNOT BE CHECKED" in text


def test_a_log_chained_from_birth_without_its_chain_files_is_never_clean(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "log"
    build(directory)
    with LogReader.open(directory) as log:
        digest = log.digest()
    rewrite_entries(directory / segment_name(3), rename_topic("t3", "zz"))
    for path in directory.glob("*.chain"):
        path.unlink()
    shutil.rmtree(directory / "merkle", ignore_errors=True)
    report, matches = check(directory, digest)
    assert not report.ok and not matches
    assert report.chain is not None
    assert [p.name for p in report.chain.missing] == [
        f"{segment_name(b)[:-5]}.chain" for b in range(12)
    ]
    assert "hash chain: MISSING, 12 segment(s)" in report.chain.describe()
    # A writer does not build the chain again over the forged block.
    with pytest.raises(LogCorruptionError, match="chain files are missing") as refused:
        MetadataLog.open(directory, config=ROLL_EVERY_BLOCK)
    assert "mlog log verify --digest TOKEN" in str(refused.value)
    assert not list(directory.glob("*.chain"))
    with pytest.raises(LogCorruptionError, match="chain files are missing"):
        ReplicaLog.open(directory, config=ROLL_EVERY_BLOCK)
    with (
        pytest.raises(DigestError, match=r"its chain file .* is missing"),
        LogReader.open(directory) as reader,
    ):
        reader.digest()
    # One file gone is named alone; the rest still checks.
    build(tmp_path / "other", topics=4)
    (tmp_path / "other" / f"{segment_name(1)[:-5]}.chain").unlink()
    report = verify_log(tmp_path / "other")
    assert report.chain is not None and not report.ok
    assert [p.name for p in report.chain.missing] == [f"{segment_name(1)[:-5]}.chain"]


def test_a_new_segment_whose_chain_file_a_crash_kept_from_being_made_is_not_missing(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "log"
    build(directory, topics=3)
    # A roll that a crash stopped between the new segment's creation and its chain file's.
    previous = Segment.open_header(directory / segment_name(2), 2)
    Segment.create(directory, 3, DEFAULT_CODEC.entry_schema_json, previous, hash_chained=True)
    newest = directory / f"{segment_name(3)[:-5]}.chain"
    assert not newest.exists()
    assert verify_log(directory).ok
    with MetadataLog.open(directory, config=ROLL_EVERY_BLOCK) as log:
        log.append([topic("next")])
    assert newest.exists() and verify_log(directory).ok


def test_a_log_written_before_the_chain_gets_one_on_its_next_writer_open(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    shutil.copytree(DATA / "legacy-log", directory)
    for path in directory.glob("*.chain"):
        path.unlink()
    report = verify_log(directory)
    assert report.ok
    assert report.chain is not None and report.chain.origin is None
    with pytest.raises(DigestError, match="before the hash chain"), LogReader.open(directory) as r:
        r.digest()
    with MetadataLog.open(directory) as log:
        log.append([topic("new")])
        digest = log.digest()
    report, matches = check(directory, digest)
    assert report.ok and matches
    assert report.chain is not None and report.chain.origin == 0


def test_a_quorum_log_keeps_its_chain_across_a_cut(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with opened(directory) as log:
        log.keep_chain()
        for i in range(6):
            log.write_blocks([block_of(log, i * 5, 5, 1)], check=False)
        log.flush()
        log.truncate_to(12)  # inside a block: it is rewritten shorter
        log.write_blocks([block_of(log, 12, 5, 2)], check=False)
        log.flush()
        digest = log.digest()
    report, matches = check(directory, digest)
    assert report.ok and matches


def test_tokens_are_checked() -> None:
    digest = LogDigest(offset=7, chain=bytes(range(32)))
    assert parse_digest(digest.token()) == digest
    for bad in ("", "mlog-digest:v2:7:" + "00" * 32, "mlog-digest:v1:-1:" + "00" * 32):
        with pytest.raises(DigestError, match="not a digest token"):
            parse_digest(bad)


@pytest.fixture(scope="module")
def closed_segment_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("chain") / "log"
    build(directory, topics=4, config=LogConfig(segment_bytes=16 * 1024))
    with MetadataLog.open(directory, config=LogConfig(segment_bytes=16 * 1024)) as log:
        for i in range(80):
            log.append([topic(f"x{i}") for _ in range(3)])
        assert len(log.segments()) >= 2
    return directory


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(position=st.floats(0, 1, exclude_max=True), delta=st.integers(1, 255))
def test_any_single_byte_change_in_a_closed_segment_is_caught(
    closed_segment_log: Path, tmp_path_factory: pytest.TempPathFactory, position: float, delta: int
) -> None:
    directory = tmp_path_factory.mktemp("flip") / "log"
    shutil.copytree(closed_segment_log, directory)
    with LogReader.open(directory) as log:
        digest = log.digest()
        sealed = log.segments()[0].path.name
    path = directory / sealed
    data = bytearray(path.read_bytes())
    at = int(position * len(data))
    data[at] = (data[at] + delta) % 256
    path.write_bytes(bytes(data))
    report, matches = check(directory, digest)
    assert not report.ok
    assert not matches


def test_a_quorum_log_keeps_the_chain_once_switched_on_with_the_same_values(
    tmp_path: Path,
) -> None:
    early, late = tmp_path / "early", tmp_path / "late"
    with opened(early) as first, opened(late) as second:
        assert not first.keeps_chain
        first.keep_chain()  # a node that switched it on before any block
        for i in range(6):
            first.write_blocks([block_of(first, i * 5, 5, 1)], check=False)
            second.write_blocks([block_of(second, i * 5, 5, 1)], check=False)
        assert not list(late.glob("*.chain"))
        second.keep_chain()  # one that switched it on later: the same chain
        assert first.digest() == second.digest()
    with opened(late) as reopened:
        assert reopened.keeps_chain


def test_verify_checks_a_v2_tokens_merkle_root_and_says_which_part_failed(
    tmp_path: Path,
) -> None:
    build(tmp_path / "log")
    code, token = mlog(tmp_path, "log", "digest", "--at-offset", "7")
    token = token.strip()
    code, text = mlog(tmp_path, "log", "verify", "--digest", token)
    assert code == 0, text
    assert "MATCHES" in text and "Merkle root over entries 0..7 matches" in text
    other_root = token[:-64] + "11" * 32
    code, text = mlog(tmp_path, "log", "verify", "--digest", other_root)
    assert code == 1
    assert "the hash chain matches, but the Merkle root over entries 0..7 is" in text
    prefix, _chain, root = token.rsplit(":", 2)
    other_chain = f"{prefix}:{'22' * 32}:{root}"
    code, text = mlog(tmp_path, "log", "verify", "--digest", other_chain)
    assert code == 1
    assert "Merkle root over entries 0..7 matches" in text
    assert "the hash chain part of the token differs" in text
    # An edit of an entry the digest covers fails both parts, even with the index rebuilt.
    rewrite_entries(tmp_path / "log" / segment_name(3), rename_topic("t3", "zz"))
    shutil.rmtree(tmp_path / "log" / "merkle")
    code, text = mlog(tmp_path, "log", "verify", "--digest", token)
    assert code == 1
    assert "DOES NOT MATCH" in text and "the Merkle root over entries 0..7 is" in text
