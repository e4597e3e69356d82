"""The quorum's settings, with Kafka's keys and defaults (`controller.quorum.*`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from api.raft.core.errors import RaftConfigError
from records.fields import INT32_MAX

MAX_NODE_ID = INT32_MAX
MAX_TIMEOUT_MS = 24 * 3600 * 1000
_VOTER = re.compile(r"(\d{1,10})@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})")


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterAddress:
    """Where a voter listens for the controller protocol."""

    host: str
    port: int


def parse_voters(text: str) -> dict[int, VoterAddress]:
    """Parse `controller.quorum.voters` (`1@host:port,2@host:port,...`) into id -> address."""
    voters: dict[int, VoterAddress] = {}
    for raw in text.split(","):
        item = raw.strip()
        match = _VOTER.fullmatch(raw.strip(" "))
        if match is None:
            raise RaftConfigError(
                f"controller.quorum.voters: {item[:60]!r} is not id@host:port; write it like "
                "1@controller1:9093,2@controller2:9093,3@controller3:9093"
            )
        node_id, host, port = int(match.group(1)), match.group(2), int(match.group(3))
        if node_id > MAX_NODE_ID:
            raise RaftConfigError(
                f"controller.quorum.voters: node id {node_id} is above {MAX_NODE_ID}"
            )
        if not 1 <= port <= 65535:
            raise RaftConfigError(
                f"controller.quorum.voters: port {port} of voter {node_id} is not in 1..65535"
            )
        if node_id in voters:
            raise RaftConfigError(
                f"controller.quorum.voters names node {node_id} twice; give each voter one entry"
            )
        voters[node_id] = VoterAddress(host=host.strip("[]"), port=port)
    return voters


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumConfig:
    """One node's view of the static quorum and its timers (Kafka's defaults)."""

    node_id: int
    """This node (`node.id`); a voter if it is in `voters`, an observer otherwise."""
    voters: frozenset[int]
    """The ids named by `controller.quorum.voters`."""
    election_timeout_ms: int = 1000
    """`controller.quorum.election.timeout.ms`: elections start after [t, 2t) without a leader."""
    fetch_timeout_ms: int = 2000
    """`controller.quorum.fetch.timeout.ms`: a follower without a good fetch for this long
    gives up on the leader; a leader gives up after 1.5 times it (`check_quorum_timeout_ms`)."""
    election_backoff_max_ms: int = 1000
    """`controller.quorum.election.backoff.max.ms`: a lost election retries after [0, this)."""
    append_linger_ms: int = 0
    """`controller.quorum.append.linger.ms`: how long the leader waits after an append before
    it flushes. Kafka's default is 25; here 0: the leader's flush runs behind its loop (one
    at a time, each covering what came meanwhile), so it costs no turn and lets the leader
    count toward the majority at once (docs/replication.md)."""
    request_timeout_ms: int = 2000
    """`controller.quorum.request.timeout.ms`: an unanswered request is sent again after this."""
    retry_backoff_ms: int = 20
    """`controller.quorum.retry.backoff.ms`: the wait before asking again after a refusal."""
    fetch_max_wait_ms: int = 500
    """How long the leader parks a Fetch that has nothing new (Kafka's `MaxWaitMs`)."""
    fetch_snapshot_max_bytes: int = 1 << 20
    """The most snapshot bytes one FetchSnapshot answer carries (Kafka's `MaxBytes`)."""
    addresses: dict[int, VoterAddress] = field(default_factory=dict, compare=False)
    """The voters' addresses, for the shell (the core uses ids only)."""

    def __post_init__(self) -> None:
        if not self.voters:
            raise RaftConfigError("controller.quorum.voters is empty; name at least one voter")
        for voter in self.voters:
            if not 0 <= voter <= MAX_NODE_ID:
                raise RaftConfigError(f"controller.quorum.voters: bad node id {voter}")
        if not 0 <= self.node_id <= MAX_NODE_ID:
            raise RaftConfigError(f"node.id must be in 0..{MAX_NODE_ID}, got {self.node_id}")
        for key, value in (
            ("controller.quorum.election.timeout.ms", self.election_timeout_ms),
            ("controller.quorum.fetch.timeout.ms", self.fetch_timeout_ms),
            ("controller.quorum.election.backoff.max.ms", self.election_backoff_max_ms),
            ("controller.quorum.request.timeout.ms", self.request_timeout_ms),
            ("fetch max wait", self.fetch_max_wait_ms),
            ("controller.quorum.retry.backoff.ms", self.retry_backoff_ms),
            ("fetch snapshot max bytes", self.fetch_snapshot_max_bytes),
        ):
            if not 1 <= value <= MAX_TIMEOUT_MS:
                raise RaftConfigError(f"{key} must be in 1..{MAX_TIMEOUT_MS} ms, got {value}")
        if not 0 <= self.append_linger_ms <= MAX_TIMEOUT_MS:
            raise RaftConfigError(
                f"controller.quorum.append.linger.ms must be in 0..{MAX_TIMEOUT_MS}, "
                f"got {self.append_linger_ms}"
            )

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> QuorumConfig:
        """Build from Kafka-style properties (`node.id`, `controller.quorum.voters`, ...)."""

        def number(key: str, default: int) -> int:
            text = properties.get(key)
            if text is None:
                return default
            if not text.strip().isdigit():
                raise RaftConfigError(f"{key} must be a whole number of ms, got {text[:40]!r}")
            return int(text)

        if "controller.quorum.voters" not in properties:
            raise RaftConfigError(
                "controller.quorum.voters is not set; set it to 1@host:port,2@host:port,..."
            )
        if "node.id" not in properties:
            raise RaftConfigError("node.id is not set; set it to this controller's id")
        addresses = parse_voters(properties["controller.quorum.voters"])
        return cls(
            node_id=number("node.id", -1),
            voters=frozenset(addresses),
            addresses=addresses,
            election_timeout_ms=number("controller.quorum.election.timeout.ms", 1000),
            fetch_timeout_ms=number("controller.quorum.fetch.timeout.ms", 2000),
            election_backoff_max_ms=number("controller.quorum.election.backoff.max.ms", 1000),
            append_linger_ms=number("controller.quorum.append.linger.ms", 0),
            request_timeout_ms=number("controller.quorum.request.timeout.ms", 2000),
            retry_backoff_ms=number("controller.quorum.retry.backoff.ms", 20),
        )

    @property
    def check_quorum_timeout_ms(self) -> int:
        """How long a leader leads without fetches from a majority: 1.5 fetch timeouts.

        Kafka's `CHECK_QUORUM_TIMEOUT_FACTOR`. The half timeout more lets a follower that a
        loaded host held back for about one fetch timeout keep its leader: a leader cut off for
        good still resigns, and one its majority no longer hears is voted out after the fetch
        timeout whether or not it has resigned (it commits nothing meanwhile).
        """
        return self.fetch_timeout_ms * 3 // 2

    @property
    def is_voter(self) -> bool:
        """Whether this node votes (else it is an observer)."""
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        """How many voters make a majority."""
        return len(self.voters) // 2 + 1
