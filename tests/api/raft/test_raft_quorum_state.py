"""The persisted quorum-state file and the quorum's Kafka-style settings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.raft.core import QuorumConfig, QuorumState, parse_voters
from api.raft.core.errors import QuorumStateError, RaftConfigError
from api.raft.core.quorum_state import (
    QUORUM_STATE_NAME,
    read_quorum_state,
    write_quorum_state,
)

VOTERS = frozenset({1, 2, 3})
BASE = {"node.id": "1", "controller.quorum.voters": "1@a:1"}


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


def test_voters_parse_with_kafkas_syntax() -> None:
    voters = parse_voters("1@controller1:9093, 2@10.0.0.2:9093,3@[::1]:9094")
    assert sorted(voters) == [1, 2, 3]
    assert voters[3].host == "::1" and voters[3].port == 9094


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is not id@host:port"),
        ("1@host", "is not id@host:port"),
        ("a@host:1", "is not id@host:port"),
        ("1@host:0", "port 0"),
        ("1@host:70000", "port 70000"),
        ("1@a:1,1@b:2", "names node 1 twice"),
        ("9999999999@h:1", "is above"),
        ("1@h:1\n", "is not id@host:port"),
        ("1@bad\nhost:1", "is not id@host:port"),
        ("1@h:1;rm -rf /", "is not id@host:port"),
    ],
)
def test_bad_voters_are_refused(text: str, says: str) -> None:
    with pytest.raises(RaftConfigError, match=says):
        parse_voters(text)


def test_config_keeps_kafkas_keys_and_defaults() -> None:
    config = QuorumConfig.from_properties(
        {"node.id": "2", "controller.quorum.voters": "1@a:9093,2@b:9093,3@c:9093"}
    )
    assert config.voters == VOTERS and config.is_voter and config.majority == 2
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (1000, 2000)
    # The append linger is 0, not Kafka's 25: the leader's flush runs behind its loop.
    assert (config.election_backoff_max_ms, config.append_linger_ms) == (1000, 0)
    observer = QuorumConfig.from_properties(
        {
            "node.id": "9",
            "controller.quorum.voters": "1@a:9093",
            "controller.quorum.election.timeout.ms": "300",
        }
    )
    assert not observer.is_voter and observer.election_timeout_ms == 300


@pytest.mark.parametrize(
    ("properties", "says"),
    [
        ({"node.id": "1"}, "controller.quorum.voters is not set"),
        ({"controller.quorum.voters": "1@a:1"}, "node.id is not set"),
        (
            {
                "node.id": "1",
                "controller.quorum.voters": "1@a:1",
                "controller.quorum.fetch.timeout.ms": "-5",
            },
            "whole number",
        ),
        (
            {
                "node.id": "1",
                "controller.quorum.voters": "1@a:1",
                "controller.quorum.election.timeout.ms": "0",
            },
            "must be in 1..",
        ),
    ],
)
def test_bad_settings_are_refused(properties: dict[str, str], says: str) -> None:
    with pytest.raises(RaftConfigError, match=says):
        QuorumConfig.from_properties(properties)
