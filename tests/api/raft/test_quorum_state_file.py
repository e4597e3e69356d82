"""`api.raft.quorum_state_file`: the `quorum-state` file, written atomically, read back checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.protocol.quorum.bounds import LAST_EPOCH
from api.raft import quorum_state_file
from api.raft.core import QuorumState, QuorumStateError
from api.raft.quorum_state_file import (
    MAX_FILE_BYTES,
    QUORUM_STATE_NAME,
    read_quorum_state,
    write_quorum_state,
)

VOTERS = frozenset({1, 2, 3})


def test_a_missing_file_means_no_durable_state(tmp_path: Path) -> None:
    assert read_quorum_state(tmp_path, voters=VOTERS) is None


def test_write_then_read_and_nothing_temporary_is_left(tmp_path: Path) -> None:
    state = QuorumState(leader_epoch=7, leader_id=2, voted_id=3, voters=VOTERS)
    write_quorum_state(tmp_path, state)
    assert read_quorum_state(tmp_path, voters=VOTERS) == state
    assert os.listdir(tmp_path) == [QUORUM_STATE_NAME]
    data = json.loads((tmp_path / QUORUM_STATE_NAME).read_text())
    assert data["leaderEpoch"] == 7 and data["votedId"] == 3 and data["data_version"] == 0
    newer = QuorumState(leader_epoch=8, voters=VOTERS)
    write_quorum_state(tmp_path, newer)
    assert read_quorum_state(tmp_path, voters=VOTERS) == newer


@given(
    epoch=st.integers(0, 2**31 - 2),
    leader=st.sampled_from([-1, 1, 2, 3]),
    voted=st.sampled_from([-1, 1, 2, 3]),
)
def test_every_valid_state_round_trips(epoch: int, leader: int, voted: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        state = QuorumState(leader_epoch=epoch, leader_id=leader, voted_id=voted, voters=VOTERS)
        write_quorum_state(Path(directory), state)
        assert read_quorum_state(Path(directory), voters=VOTERS) == state


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "not a quorum-state file"),
        (b"\x00\xff\xfe garbage", "not a quorum-state file"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"data_version": 1}', "data_version 1"),
        (b'{"data_version": 0, "leaderEpoch": "7"}', "'leaderEpoch' should be an integer"),
        (b'{"data_version": 0, "leaderEpoch": true}', "'leaderEpoch' should be an integer"),
        (
            b'{"data_version":0,"leaderEpoch":1,"leaderId":-1,"votedId":-1,"currentVoters":5}',
            "'currentVoters' is malformed",
        ),
        (
            b'{"data_version":0,"leaderEpoch":-4,"leaderId":-1,"votedId":-1,'
            b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}]}',
            "out of range",
        ),
        (
            b'{"data_version":0,"leaderEpoch":4,"leaderId":9,"votedId":-1,'
            b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}]}',
            "leaderId 9 is not a voter",
        ),
        (b"{" * 2_000_000, "over"),
    ],
)
def test_a_damaged_file_is_a_one_line_error(tmp_path: Path, content: bytes, says: str) -> None:
    (tmp_path / QUORUM_STATE_NAME).write_bytes(content)
    with pytest.raises(QuorumStateError) as info:
        read_quorum_state(tmp_path, voters=VOTERS)
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_a_file_of_another_voter_set_is_refused(tmp_path: Path) -> None:
    write_quorum_state(tmp_path, QuorumState(leader_epoch=3, voters=frozenset({1, 2, 4})))
    with pytest.raises(QuorumStateError, match=r"written for voters \[1, 2, 4\]"):
        read_quorum_state(tmp_path, voters=VOTERS)


def test_a_write_that_cannot_happen_says_what_to_do(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(QuorumStateError, match="cannot write"):
        write_quorum_state(missing, QuorumState(leader_epoch=1, voters=VOTERS))


def test_the_last_epoch_an_election_can_reach_is_stored_and_no_later_one(
    tmp_path: Path,
) -> None:
    top = QuorumState(leader_epoch=LAST_EPOCH, voters=VOTERS)
    write_quorum_state(tmp_path, top)
    assert read_quorum_state(tmp_path, voters=VOTERS) == top
    path = tmp_path / QUORUM_STATE_NAME
    data = json.loads(path.read_text())
    assert data["appliedOffset"] == 0  # Kafka's file: this field is always 0 in KRaft
    path.write_text(json.dumps({**data, "leaderEpoch": -1}))
    with pytest.raises(QuorumStateError, match="out of range"):
        read_quorum_state(tmp_path, voters=VOTERS)
    for epoch in (LAST_EPOCH + 1, 2**63 - 1):
        path.write_text(json.dumps({**data, "leaderEpoch": epoch}))
        with pytest.raises(QuorumStateError) as info:
            read_quorum_state(tmp_path, voters=VOTERS)
        message = str(info.value)
        assert "\n" not in message and f"leader epoch {epoch}, past the last" in message
        assert "move it aside" in message and "catches up from the leader" in message


def test_a_quorum_state_file_of_the_size_bound_is_read(tmp_path: Path) -> None:
    write_quorum_state(tmp_path, QuorumState(leader_epoch=3, voters=VOTERS))
    path = tmp_path / QUORUM_STATE_NAME
    text = path.read_bytes().rstrip(b"\n")
    path.write_bytes(text + b" " * (MAX_FILE_BYTES - len(text)))
    assert read_quorum_state(tmp_path, voters=VOTERS) == QuorumState(leader_epoch=3, voters=VOTERS)
    path.write_bytes(text + b" " * (MAX_FILE_BYTES + 1 - len(text)))
    with pytest.raises(QuorumStateError, match="is over"):
        read_quorum_state(tmp_path, voters=VOTERS)


def test_voters_listed_as_anything_but_objects_are_a_damaged_file(tmp_path: Path) -> None:
    write_quorum_state(tmp_path, QuorumState(leader_epoch=3, voters=VOTERS))
    path = tmp_path / QUORUM_STATE_NAME
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "currentVoters": [1, 2, 3]}))
    with pytest.raises(QuorumStateError, match="'currentVoters' is malformed"):
        read_quorum_state(tmp_path, voters=VOTERS)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (OSError(28, "No space left on device"), ": No space left on device [ENOSPC];"),
        (OSError("no errno"), ": no errno [None];"),
    ],
)
def test_a_quorum_state_that_cannot_be_written_names_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, says: str
) -> None:
    def failing(*_args: object) -> None:
        raise error

    monkeypatch.setattr(quorum_state_file, "replace_file", failing)
    with pytest.raises(QuorumStateError) as info:
        write_quorum_state(tmp_path, QuorumState(leader_epoch=1, voters=VOTERS))
    assert says in str(info.value)
