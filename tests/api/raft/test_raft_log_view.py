"""The core's view of the log (epoch cache, end and flushed offsets) and the quorum's config."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from api.raft.core import LogView, QuorumConfig
from api.raft.core.config import MAX_NODE_ID, MAX_TIMEOUT_MS, VoterAddress, parse_voters
from api.raft.core.errors import RaftConfigError, RaftError


def test_an_opened_log_must_have_an_increasing_epoch_cache_from_offset_0() -> None:
    view = LogView.from_log(end_offset=9, epochs=[(1, 0), (3, 4), (4, 8)])
    assert (view.end_offset, view.flushed_offset, view.last_epoch) == (9, 9, 4)
    assert LogView.from_log(end_offset=0, epochs=[]).last_epoch == 0
    for bad in (
        [(1, 0), (1, 4)],  # an epoch twice
        [(2, 0), (1, 4)],  # epochs going down
        [(1, 0), (2, 0)],  # two epochs starting at one offset
        [(1, 0), (2, 9)],  # an epoch starting at the end: it has no entry
        [(1, 0), (2, 12)],
    ):
        with pytest.raises(RaftError, match="not increasing"):
            LogView.from_log(end_offset=9, epochs=bad)
    with pytest.raises(RaftError, match="does not start at offset 0"):
        LogView.from_log(end_offset=9, epochs=[(1, 2)])
    with pytest.raises(RaftError, match="does not start at offset 0"):
        LogView.from_log(end_offset=9, epochs=[])


def test_the_epoch_of_each_offset() -> None:
    view = LogView.from_log(end_offset=9, epochs=[(1, 0), (3, 4), (4, 8)])
    assert [view.epoch_at(offset) for offset in range(9)] == [1, 1, 1, 1, 3, 3, 3, 3, 4]


def test_end_offset_for_epoch_is_kafkas() -> None:
    view = LogView.from_log(end_offset=9, epochs=[(1, 0), (3, 4), (4, 8)])
    assert view.end_offset_for_epoch(0) == (0, 0)
    assert view.end_offset_for_epoch(1) == (1, 4)
    assert view.end_offset_for_epoch(2) == (1, 4)  # the largest epoch <= 2
    assert view.end_offset_for_epoch(3) == (3, 8)
    assert view.end_offset_for_epoch(4) == (4, 9)
    assert view.end_offset_for_epoch(7) == (4, 9)
    late = LogView.from_log(end_offset=3, epochs=[(5, 0)])
    assert late.end_offset_for_epoch(4) == (0, 0)


def test_appends_extend_the_cache_and_refuse_an_older_epoch() -> None:
    view = LogView()
    view.append(2, 0)  # nothing appended: no epoch entry
    assert view.epochs == [] and view.end_offset == 0
    view.append(2, 3)
    view.append(2, 1)
    view.append(5, 2)
    assert view.epochs == [(2, 0), (5, 4)] and view.end_offset == 6
    with pytest.raises(RaftError, match="appending epoch 4 after epoch 5"):
        view.append(4, 1)
    view.append(4, -1)  # a negative count appends nothing, and is not checked
    assert view.end_offset == 6


def test_truncation_drops_the_epochs_it_empties_and_the_unflushed_count() -> None:
    view = LogView.from_log(end_offset=9, epochs=[(1, 0), (3, 4), (4, 8)])
    view.truncate(9)  # at the end: nothing
    view.truncate(12)
    assert view.end_offset == 9 and len(view.epochs) == 3
    view.truncate(8)
    assert view.epochs == [(1, 0), (3, 4)] and (view.end_offset, view.flushed_offset) == (8, 8)
    view.truncate(5)
    assert view.epochs == [(1, 0), (3, 4)] and view.end_offset == 5
    view.truncate(4)
    assert view.epochs == [(1, 0)] and view.flushed_offset == 4
    view.flushed_offset = 2
    view.truncate(3)
    assert view.flushed_offset == 2  # never raised by a truncation
    view.truncate(-3)
    assert (view.end_offset, view.epochs) == (0, [])


def test_node_ids_and_timers_are_bounded() -> None:
    voters = frozenset({1, 2, 3})
    assert QuorumConfig(node_id=0, voters=frozenset({0, MAX_NODE_ID})).majority == 2
    assert QuorumConfig(node_id=MAX_NODE_ID, voters=voters).majority == 2
    assert QuorumConfig(node_id=1, voters=frozenset(range(1, 5))).majority == 3
    for bad_voters in (frozenset({-1, 1}), frozenset({1, MAX_NODE_ID + 1})):
        with pytest.raises(RaftConfigError, match="bad node id"):
            QuorumConfig(node_id=1, voters=bad_voters)
    for node in (-1, MAX_NODE_ID + 1):
        with pytest.raises(RaftConfigError, match=r"node\.id must be in"):
            QuorumConfig(node_id=node, voters=voters)
    with pytest.raises(RaftConfigError, match="is empty"):
        QuorumConfig(node_id=1, voters=frozenset())
    timers: list[Callable[[int], QuorumConfig]] = [
        lambda ms: QuorumConfig(node_id=1, voters=voters, election_timeout_ms=ms),
        lambda ms: QuorumConfig(node_id=1, voters=voters, fetch_timeout_ms=ms),
        lambda ms: QuorumConfig(node_id=1, voters=voters, election_backoff_max_ms=ms),
        lambda ms: QuorumConfig(node_id=1, voters=voters, request_timeout_ms=ms),
        lambda ms: QuorumConfig(node_id=1, voters=voters, fetch_max_wait_ms=ms),
        lambda ms: QuorumConfig(node_id=1, voters=voters, retry_backoff_ms=ms),
    ]
    for build in timers:
        build(1)
        build(MAX_TIMEOUT_MS)
        for bad in (0, MAX_TIMEOUT_MS + 1):
            with pytest.raises(RaftConfigError, match=rf"must be in 1\.\.{MAX_TIMEOUT_MS} ms"):
                build(bad)
    QuorumConfig(node_id=1, voters=voters, append_linger_ms=0)
    QuorumConfig(node_id=1, voters=voters, append_linger_ms=MAX_TIMEOUT_MS)
    for bad in (-1, MAX_TIMEOUT_MS + 1):
        with pytest.raises(RaftConfigError, match=r"append\.linger\.ms must be in 0\.\."):
            QuorumConfig(node_id=1, voters=voters, append_linger_ms=bad)
    assert MAX_TIMEOUT_MS == 86_400_000 and MAX_NODE_ID == 2**31 - 1


def test_the_timers_default_to_kafkas_but_the_linger_in_the_config_and_its_properties() -> None:
    kafka = {
        "election_timeout_ms": 1000,
        "fetch_timeout_ms": 2000,
        "election_backoff_max_ms": 1000,
        "append_linger_ms": 0,  # Kafka's is 25: the leader's flush runs behind its loop
        "request_timeout_ms": 2000,
        "retry_backoff_ms": 20,
        "fetch_max_wait_ms": 500,
    }
    built = QuorumConfig(node_id=1, voters=frozenset({1}))
    parsed = QuorumConfig.from_properties({"node.id": "1", "controller.quorum.voters": "1@h:1"})
    for config in (built, parsed):
        assert {name: getattr(config, name) for name in kafka} == kafka


def test_voter_ids_and_ports_at_their_bounds() -> None:
    voters = parse_voters(f"{MAX_NODE_ID}@h:65535,0@h:1")
    assert voters[MAX_NODE_ID] == VoterAddress(host="h", port=65535)
    with pytest.raises(RaftConfigError, match=f"node id {MAX_NODE_ID + 1} is above"):
        parse_voters(f"{MAX_NODE_ID + 1}@h:1")
    with pytest.raises(RaftConfigError, match="port 65536 of voter 1"):
        parse_voters("1@h:65536")


def test_bad_values_are_quoted_short() -> None:
    with pytest.raises(RaftConfigError) as info:
        parse_voters("x" * 100)
    assert f"{'x' * 60!r} is not id@host:port" in str(info.value)
    with pytest.raises(RaftConfigError) as info:
        QuorumConfig.from_properties(
            {
                "node.id": "1",
                "controller.quorum.voters": "1@h:1",
                "controller.quorum.fetch.timeout.ms": "y" * 100,
            }
        )
    assert str(info.value).endswith(f"got {'y' * 40!r}")


def test_addresses_are_not_part_of_a_configs_identity() -> None:
    a = QuorumConfig.from_properties({"node.id": "1", "controller.quorum.voters": "1@a:1"})
    b = QuorumConfig.from_properties({"node.id": "1", "controller.quorum.voters": "1@b:2"})
    assert a == b and a.addresses != b.addresses


def test_an_epoch_cache_with_negative_numbers_or_without_offset_0_is_refused() -> None:
    for end, epochs in ((0, [(1, -1)]), (3, [(-1, 0)]), (1, [])):
        with pytest.raises(RaftError):
            LogView.from_log(end_offset=end, epochs=epochs)
    assert LogView().flushed_offset == 0 == LogView().end_offset


def test_a_bad_epoch_cache_is_quoted_up_to_8_epochs() -> None:
    epochs = [(e, e) for e in range(10, 0, -1)]
    with pytest.raises(RaftError) as info:
        LogView.from_log(end_offset=20, epochs=epochs)
    assert str(epochs[:8]) in str(info.value) and str(epochs[:9]) not in str(info.value)
