"""Voter changes in the core (KIP-853), directed on a reliable simulated network."""

from __future__ import annotations

from api.protocol.quorum.messages import BeginQuorumEpochRequest, ErrorCode
from api.raft.core.ready import OffsetRange, VoterChangeRefused
from api.raft.core.roles import Role
from api.raft.core.voters import Voter, VoterHistory, VoterSet, snapshot_voters
from tests.support.raft_core import drain, elect, make
from tests.support.raft_sim import Cluster, SimNode


def _cluster(seed: int = 1) -> Cluster:
    c = Cluster(seed, voters=3, observers=2, dynamic=True, faults=False)
    c.run_until(3000)
    return c


def _leader(c: Cluster) -> SimNode:
    node = c.leader()
    assert node is not None and node.core is not None
    return node


def _change(c: Cluster, **kw: object) -> OffsetRange | VoterChangeRefused:
    node = _leader(c)
    assert node.core is not None
    answer = node.core.change_voters(**kw)  # type: ignore[arg-type] # keyword pass-through
    c.process(node)
    assert not isinstance(answer, OffsetRange) or answer.first == answer.last
    return answer  # type: ignore[return-value] # the leader never answers NotLeader here


def role_of(node: SimNode) -> Role | None:
    """The node's role now (None while it is down)."""
    return None if node.core is None else node.core.role


def test_a_static_quorum_refuses_voter_changes() -> None:
    core = make(1)
    elect(core)
    drain(core)
    answer = core.change_voters(add=Voter(id=4))
    assert isinstance(answer, VoterChangeRefused)
    assert answer.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert "controller.quorum.voters" in answer.message


def test_a_caught_up_observer_is_added_and_becomes_a_follower() -> None:
    c = _cluster()
    assert isinstance(_change(c, add=Voter(id=4, directory_id="d4")), OffsetRange)
    c.run_until(c.now + 500)
    assert c.checker.committed_voters == {1, 2, 3, 4}
    core = c.nodes[4].core
    assert core is not None and core.role is Role.FOLLOWER and core.voters == {1, 2, 3, 4}
    assert c.nodes[5].core is not None and c.nodes[5].core.role is Role.OBSERVER


def test_one_change_at_a_time_and_kafkas_refusals() -> None:
    c = _cluster()
    assert isinstance(_change(c, add=Voter(id=4)), OffsetRange)
    pending = _change(c, add=Voter(id=5))
    assert isinstance(pending, VoterChangeRefused)
    assert pending.error_code is ErrorCode.REQUEST_TIMED_OUT and "not committed" in pending.message
    c.run_until(c.now + 500)
    duplicate = _change(c, add=Voter(id=4))
    assert isinstance(duplicate, VoterChangeRefused)
    assert duplicate.error_code is ErrorCode.DUPLICATE_VOTER
    missing = _change(c, remove=9)
    assert isinstance(missing, VoterChangeRefused)
    assert missing.error_code is ErrorCode.VOTER_NOT_FOUND
    other_directory = _change(c, remove=4, directory_id="not-its-directory")
    assert isinstance(other_directory, VoterChangeRefused)
    assert other_directory.error_code is ErrorCode.VOTER_NOT_FOUND


def test_a_node_that_has_not_caught_up_is_not_added() -> None:
    c = _cluster()
    c.kill(c.nodes[5])
    c.run_until(c.now + 2500)  # longer than the fetch timeout
    answer = _change(c, add=Voter(id=5))
    assert isinstance(answer, VoterChangeRefused)
    assert answer.error_code is ErrorCode.REQUEST_TIMED_OUT and "caught up" in answer.message


def test_a_leader_that_removes_itself_resigns_once_the_change_commits() -> None:
    c = _cluster()
    old = _leader(c)
    assert isinstance(_change(c, remove=old.id), OffsetRange)
    core = old.core
    assert core is not None and core.role is Role.LEADER  # until it commits
    c.run_until(c.now + 3000)
    assert role_of(old) is Role.OBSERVER
    assert c.checker.committed_voters == {1, 2, 3} - {old.id}
    new = _leader(c)
    assert new.id != old.id and new.core is not None and new.core.voters == {1, 2, 3} - {old.id}
    c.propose()
    c.run_until(c.now + 500)
    assert c.checker.committed[-1].payload.startswith(str(c.seed).encode())


def test_a_removed_leader_never_leads_on_in_a_newer_epoch_before_its_removal_commits() -> None:
    """Seed 43060: it must not take the newer epoch and lead on in it (two leaders).

    A BeginQuorumEpoch of another leader while it still hears its quorum is refused (leader
    stickiness: it may be forged), so it leads on in its own epoch until check-quorum ends it.
    """
    c = _cluster()
    old = _leader(c)
    core = old.core
    assert core is not None
    assert isinstance(_change(c, remove=old.id), OffsetRange)
    epoch = core.epoch
    other = min({1, 2, 3} - {old.id})
    core.step(
        other, BeginQuorumEpochRequest(correlation_id=1, leader_id=other, leader_epoch=epoch + 1)
    )
    c.process(old)  # the checker fails a node that leads an epoch it was not elected in
    assert core.role is Role.LEADER and core.epoch == epoch and core.leader_id == old.id


def test_a_removed_leader_with_the_newest_log_stands_to_commit_its_removal() -> None:
    """Seeds 16974, 41499: a leader removes itself, loses its quorum before that commits and
    holds the only copy; another voter is down. The rest cannot win without its vote (their
    logs are behind), so it stands (its own vote uncounted), commits its removal, steps aside."""
    c = _cluster()
    assert isinstance(_change(c, add=Voter(id=4, directory_id="d4")), OffsetRange)
    c.run_until(c.now + 500)
    assert c.checker.committed_voters == {1, 2, 3, 4}
    old = _leader(c)
    assert isinstance(_change(c, remove=old.id), OffsetRange)
    c.partition({old.id})
    down = c.nodes[max({1, 2, 3, 4} - {old.id})]
    c.kill(down)
    c.run_until(c.now + 3000)  # check-quorum: it resigns, its removal not committed
    assert role_of(old) is not Role.LEADER
    c.blocked.clear()
    c.run_until(c.now + 6000)
    remaining = {1, 2, 3, 4} - {old.id}
    assert c.checker.committed_voters == remaining
    assert role_of(old) is Role.OBSERVER
    new = _leader(c)
    assert new.id in remaining - {down.id}
    c.propose()
    c.run_until(c.now + 500)
    assert c.checker.committed[-1].payload.startswith(str(c.seed).encode())


def test_voter_sets_round_trip_and_name_their_voters_once() -> None:
    voters = VoterSet.of([Voter(id=3, directory_id="d3", host="h", port=9093), 1])
    assert VoterSet.decode(voters.encode()) == voters
    assert voters.ids == {1, 3} and voters.adding(Voter(id=2)).ids == {1, 2, 3}
    assert voters.removing(1).ids == {3}
    header = b'{"format":"x","voters":' + str(voters.to_json()).replace("'", '"').encode()
    assert snapshot_voters(header + b"}\nbody" + bytes(4)) == voters
    assert snapshot_voters(b"[1,2]" + bytes(4)) is None


def test_a_cut_puts_the_previous_voter_set_back() -> None:
    history = VoterHistory(base=VoterSet.of([1, 2, 3]))
    history.append(5, VoterSet.of([1, 2, 3, 4]))
    history.append(9, VoterSet.of([2, 3, 4]))
    assert history.at(9).ids == {1, 2, 3, 4} and history.at(10).ids == {2, 3, 4}
    history.truncate(9)
    assert history.latest.ids == {1, 2, 3, 4} and history.latest_offset == 5
    history.truncate(3)
    assert history.latest.ids == {1, 2, 3} and history.latest_offset == -1


def test_a_static_quorum_upgraded_in_place_then_changes_its_voters() -> None:
    """kraft.version 1 (KIP-853): the static voters appended into the log, then changed."""
    c = Cluster(1, voters=3, observers=2, faults=False)
    c.run_until(3000)
    c.propose()
    c.run_until(c.now + 500)
    assert not c.change_voters(add=4)  # UNSUPPORTED_VERSION: static
    follower = next(n for n in c.nodes.values() if n.core is not None and n is not c.leader())
    assert not c.upgrade_voters(at=follower)  # NotLeader
    assert c.upgrade_voters()
    again = _leader(c).core.upgrade_voters(VoterSet.of([1, 2, 3]))  # type: ignore[union-attr]
    assert isinstance(again, VoterChangeRefused) and again.error_code is ErrorCode.INVALID_REQUEST
    c.run_until(c.now + 500)
    for node in c.nodes.values():  # the observers too: every log holds the voters now
        assert node.core is not None and node.core.dynamic and node.core.voters == {1, 2, 3}
    assert c.change_voters(add=4)
    c.run_until(c.now + 500)
    assert c.change_voters(remove=1)
    c.run_until(c.now + 3000)
    assert c.checker.committed_voters == {2, 3, 4}
    restarted = c.nodes[2]
    c.kill(restarted)
    c.start(restarted)  # its config still names 1, 2, 3: the log's voters win
    assert restarted.core is not None and restarted.core.voters == {2, 3, 4}
    for _ in range(10):  # a leader again, among {2, 3, 4}: writes go on
        c.propose()
        c.run_until(c.now + 500)
        if c.checker.committed[-1].payload.startswith(str(c.seed).encode()):
            break
    assert c.checker.committed[-1].payload.startswith(str(c.seed).encode())
    assert _leader(c).id in {2, 3, 4}


def test_an_upgrade_not_yet_committed_waits_and_a_cut_makes_the_quorum_static_again() -> None:
    core = make(1)
    elect(core)  # its LeaderChange marker is not committed yet
    early = core.upgrade_voters(VoterSet.of([1, 2, 3]))
    assert isinstance(early, VoterChangeRefused)
    assert early.error_code is ErrorCode.REQUEST_TIMED_OUT
    other = core.upgrade_voters(VoterSet.of([1, 2]))
    assert isinstance(other, VoterChangeRefused) and other.error_code is ErrorCode.INVALID_REQUEST
    history = VoterHistory(base=VoterSet.of([1, 2, 3]), dynamic=False)
    assert not history.in_log
    history.append(7, VoterSet.of([1, 2, 3]))
    assert history.in_log and not history.in_log_at(7) and history.in_log_at(8)
    history.truncate(7)
    assert not history.in_log and history.latest.ids == {1, 2, 3}
