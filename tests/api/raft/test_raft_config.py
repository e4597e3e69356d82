"""The quorum's Kafka-style settings (`api/raft/core/config.py`): voters and timers."""

from __future__ import annotations

import pytest

from api.raft.core import QuorumConfig, RaftConfigError, parse_voters

VOTERS = frozenset({1, 2, 3})


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
    # A leader resigns after 1.5 fetch timeouts without a majority (Kafka's factor).
    assert config.check_quorum_timeout_ms == 3000
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
