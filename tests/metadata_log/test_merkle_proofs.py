"""Merkle proofs checked by an independent verifier written from docs/verifiable-history.md.

The verifier (tests/support/merkle_verifier.py) imports nothing of the project: only hashlib,
as an auditor's own program would. It follows the document's "Checking an inclusion proof"
and "Checking a consistency proof" steps (RFC 9162 sections 2.1.3.2 and 2.1.4.2).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog
from records import TopicRecord
from records.uuids import Uuid
from tests.support.cli import mlog
from tests.support.merkle_verifier import token_size_and_root, verify_consistency, verify_inclusion

# ---------------------------------------------------------------- the tests


def _append(directory: Path, names: range) -> None:
    with MetadataLog.open(directory, config=LogConfig(segment_bytes=16 * 1024)) as log:
        for i in names:
            log.append(
                [
                    TopicRecord(name=f"t{i}_{j}", topic_id=Uuid(uuid.uuid4().bytes))
                    for j in range(1 + i % 3)
                ]
            )


def _ok(data_dir: Path, *args: str) -> str:
    code, text = mlog(data_dir, *args)
    assert code == 0, text
    return text


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A log and digests taken as it grew (sizes 1, 2, 3, a power of two and others)."""
    data_dir = tmp_path_factory.mktemp("merkle")
    tokens = []
    done = 0
    for upto in (1, 2, 3, 5, 40, 97, 300):
        _append(data_dir / "log", range(done, upto))
        done = upto
        tokens.append(_ok(data_dir, "log", "digest").strip())
    return data_dir, tokens


def test_inclusion_proofs_verify_and_altered_ones_do_not(history: tuple[Path, list[str]]) -> None:
    data_dir, tokens = history
    token = tokens[-1]
    size, _ = token_size_and_root(token)
    for offset in (0, 1, size // 2, size - 2, size - 1):
        proof = json.loads(
            _ok(data_dir, "log", "prove", "--offset", str(offset), "--digest", token)
        )
        assert verify_inclusion(proof, token)
        entry = bytearray.fromhex(proof["entry"])
        entry[-2] ^= 1
        altered_entry = dict(proof, entry=entry.hex())
        assert not verify_inclusion(altered_entry, token)
        if proof["path"]:
            first = proof["path"][0]
            flipped = ("0" if first[0] != "0" else "1") + first[1:]
            assert not verify_inclusion(dict(proof, path=[flipped, *proof["path"][1:]]), token)
            assert not verify_inclusion(dict(proof, path=proof["path"][:-1]), token)
        assert not verify_inclusion(dict(proof, leaf_index=(offset + 1) % size), token)
    # Against an older digest too.
    older = tokens[3]
    proof = json.loads(_ok(data_dir, "log", "prove", "--offset", "2", "--digest", older))
    assert verify_inclusion(proof, older)
    assert not verify_inclusion(proof, token)


def test_consistency_proofs_verify_and_altered_ones_do_not(
    history: tuple[Path, list[str]],
) -> None:
    data_dir, tokens = history
    for i, old in enumerate(tokens):
        for new in tokens[i:]:
            proof = json.loads(_ok(data_dir, "log", "prove", "--from-digest", old, "--digest", new))
            assert verify_consistency(proof, old, new), (old, new)
            if proof["path"]:
                last = proof["path"][-1]
                flipped = ("0" if last[0] != "0" else "1") + last[1:]
                assert not verify_consistency(
                    dict(proof, path=[*proof["path"][:-1], flipped]), old, new
                )
    # A made-up older root is not consistent with the newer one.
    old, new = tokens[2], tokens[-1]
    proof = json.loads(_ok(data_dir, "log", "prove", "--from-digest", old, "--digest", new))
    fake_old = old[:-64] + "00" * 32
    assert not verify_consistency(proof, fake_old, new)


def test_a_digest_of_another_log_gets_no_proof(history: tuple[Path, list[str]]) -> None:
    data_dir, tokens = history
    token = tokens[-1]
    other = token[:-64] + "11" * 32
    code, text = mlog(data_dir, "log", "prove", "--offset", "0", "--digest", other)
    assert code != 0, text
