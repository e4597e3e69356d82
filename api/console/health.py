"""The health and trust page: the quorum, the brokers, and the history's integrity.

What it shows is what the CLI's commands answer, read through the session's `Metadata`
handle, so a principal sees what the service lets it DESCRIBE and nothing else: the quorum
(`mlog quorum describe`: DescribeQuorum, DESCRIBE on the cluster), the brokers and their
sessions (`mlog brokers list`: the image and DescribeBrokerLiveness), the digest at the
committed offset (`mlog log digest`: DescribeLogDigest, CLUSTER_ACTION on the cluster). A
section the principal may not read says so; the others still show.

An auditor pastes a digest token they kept (`digest=`): on a data directory the log's files
are checked as `mlog log verify --digest` does (every block recomputed, the first block that
does not follow named); through servers the node's chain value at the token's offset is
compared with the token's (the node's files are checked on its host by `mlog log verify`).
The chain is verified over the whole data directory when asked (`verify=1`: it reads every
block, as `mlog log verify` does).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from aiohttp import web

from api.console import views
from api.console.errors import BadInput
from api.console.state import session_of
from api.raft.core import QuorumStateError
from api.raft.quorum_state_file import read_quorum_state
from api.targets import QUORUM_STATE
from metadata_log.digest import DigestError, LogDigest, parse_digest
from records.errors import MetadataLogError
from replay.controller.errors import ApiError

if TYPE_CHECKING:
    from api.protocol.quorum.messages import ReplicaState
    from api.python_api import Metadata

MAX_TOKEN = 300
"""The longest digest token the form takes (a v2 token is about 160 characters)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Replica:
    """A voter or observer as DescribeQuorum tells it."""

    replica_id: int
    log_end_offset: int
    lag: int
    last_fetch: str
    """How long ago it last fetched (`-` when never)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuorumView:
    """The quorum section: DescribeQuorum's answer, or what a data directory knows."""

    described: bool
    """Whether a running quorum answered (else `note` says why or what the directory knows)."""
    note: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    high_watermark: int = -1
    voters: tuple[Replica, ...] = ()
    observers: tuple[Replica, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Broker:
    """A registered broker and its session on the active controller."""

    broker_id: int
    rack: str
    state: str
    epoch: int
    heartbeat: str
    offset: str
    why: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A pasted digest checked against the log."""

    token: str
    matches: bool | None
    """None: it cannot be checked here (refused, or the log no longer holds its offset)."""
    text: str
    first_block: str | None
    """The first block whose stored chain value does not follow (data directory only)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """Everything the page shows."""

    quorum: QuorumView
    brokers: tuple[Broker, ...] | None
    brokers_note: str
    sessions_note: str
    committed_offset: int
    digest: str | None
    digest_offset: int
    digest_note: str
    chain: str | None
    """The chain's verification in one line (None: not run on this request)."""
    chain_ok: bool
    verdict: Verdict | None


def parse_token(text: str | None) -> LogDigest | None:
    """The `digest` parameter as a token (None when not given); `BadInput` says what is wrong."""
    if text is None or not text.strip():
        return None
    if len(text) > MAX_TOKEN:
        raise BadInput(
            f"the digest is {len(text)} characters long: paste the token `mlog log digest` "
            f"printed (at most {MAX_TOKEN})"
        )
    try:
        return parse_digest(text)
    except DigestError as exc:
        raise BadInput(f"digest: {exc}") from None


def _refused(exc: ApiError) -> bool:
    return exc.error_code.name.endswith("AUTHORIZATION_FAILED")


def _ago(now_ms: int, then_ms: int) -> str:
    return "-" if then_ms < 0 else f"{max(now_ms - then_ms, 0) / 1000:.1f} s ago"


def _replicas(states: tuple[ReplicaState, ...], end: int, now_ms: int) -> tuple[Replica, ...]:
    return tuple(
        Replica(
            replica_id=s.replica_id,
            log_end_offset=s.log_end_offset,
            lag=max(0, end - s.log_end_offset),
            last_fetch=_ago(now_ms, s.last_fetch_timestamp),
        )
        for s in states
    )


def read_quorum(md: Metadata) -> QuorumView:
    """DescribeQuorum through a server; on a data directory, its stored election state."""
    if not md.remote:
        return _directory_quorum(md)
    try:
        answer = md.describe_quorum()
    except ApiError as exc:
        if _refused(exc):
            return QuorumView(described=False, note="this principal may not describe the quorum")
        return QuorumView(described=False, note=f"the quorum was not described: {exc}")
    now_ms = int(time.time() * 1000)
    end = max((r.log_end_offset for r in answer.current_voters), default=0)
    return QuorumView(
        described=True,
        leader_id=answer.leader_id,
        leader_epoch=answer.leader_epoch,
        high_watermark=answer.high_watermark,
        voters=_replicas(answer.current_voters, end, now_ms),
        observers=_replicas(answer.observers, end, now_ms),
    )


def _directory_quorum(md: Metadata) -> QuorumView:
    data_dir = md.settings.data_dir
    if not (data_dir / QUORUM_STATE).exists():
        return QuorumView(
            described=False,
            note=(
                f"a data directory ({data_dir}), not a quorum: a standalone log, no leader "
                "or voters to describe"
            ),
        )
    try:
        state = read_quorum_state(data_dir, voters=None)
    except QuorumStateError as exc:
        return QuorumView(described=False, note=f"a quorum node's data directory: {exc}")
    if state is None:
        return QuorumView(described=False, note="a quorum node's data directory, never elected")
    voters = ", ".join(str(v) for v in sorted(state.voters)) or "none stored"
    return QuorumView(
        described=False,
        note=(
            f"a quorum node's data directory ({data_dir}), read from its files, not a running "
            f"quorum: it last knew epoch {state.leader_epoch}, leader {state.leader_id}, voted "
            f"for {state.voted_id}, voters {voters}. Start the console with --bootstrap-server "
            "to see the quorum live"
        ),
        leader_id=state.leader_id,
        leader_epoch=state.leader_epoch,
    )


def read_brokers(md: Metadata) -> tuple[tuple[Broker, ...] | None, str, str]:
    """(the brokers or None if refused, why not, about their sessions)."""
    try:
        image = md.image()
    except ApiError as exc:
        if not _refused(exc):
            raise
        return None, "this principal may not describe the cluster's brokers", ""
    sessions_note = ""
    try:
        sessions = md.broker_liveness()
    except ApiError as exc:
        if not _refused(exc):
            raise
        sessions, sessions_note = {}, "this principal may not describe the brokers' sessions"
    if not md.remote:
        sessions_note = "a data directory keeps no sessions: only a running controller does"
    now_ms = time.time_ns() // 1_000_000
    brokers = []
    for b in image.cluster.sorted():
        session = sessions.get(b.broker_id)
        down = b.fenced or b.in_controlled_shutdown
        brokers.append(
            Broker(
                broker_id=b.broker_id,
                rack=b.rack or "-",
                state="fenced"
                if b.fenced
                else "shutting down"
                if b.in_controlled_shutdown
                else "active",
                epoch=b.broker_epoch,
                heartbeat="-" if session is None else _ago(now_ms, session.last_heartbeat_ms),
                offset="-"
                if session is None or session.metadata_offset < 0
                else str(session.metadata_offset),
                why=(session.fenced_reason or "-") if down and session is not None else "-",
            )
        )
    return tuple(brokers), "", sessions_note


def _committed_digest(md: Metadata) -> tuple[str | None, int, str]:
    try:
        digest = md.digest()
    except ApiError as exc:
        if _refused(exc):
            return None, -1, "this principal may not read the log's digest (CLUSTER_ACTION)"
        return None, -1, f"no digest: {exc}"
    except DigestError as exc:
        return None, -1, f"no digest: {exc}"
    return digest.token(), digest.offset, ""


def _check_remote(md: Metadata, digest: LogDigest) -> Verdict:
    token = digest.token()
    try:
        theirs = md.digest(digest.offset)
    except ApiError as exc:
        if _refused(exc):
            return Verdict(
                token=token,
                matches=None,
                text="this principal may not read the log's digests (CLUSTER_ACTION)",
                first_block=None,
            )
        return Verdict(
            token=token,
            matches=False,
            text=f"the node has no digest at offset {digest.offset}: {exc}",
            first_block=None,
        )
    except MetadataLogError as exc:
        return Verdict(
            token=token,
            matches=False,
            text=f"the node has no digest at offset {digest.offset}: {exc}",
            first_block=None,
        )
    root = (
        " (the token's Merkle root is checked on a node's data directory)"
        if digest.root is not None
        else ""
    )
    if theirs.chain == digest.chain:
        return Verdict(
            token=token,
            matches=True,
            text=f"the node's hash chain at offset {digest.offset} is the token's{root}",
            first_block=None,
        )
    return Verdict(
        token=token,
        matches=False,
        text=(
            f"the node's hash chain at offset {digest.offset} is "
            f"{theirs.chain.hex()[:16]}..., not the token's {digest.chain.hex()[:16]}...; "
            "`mlog log verify --digest TOKEN` on a node's data directory names the first "
            "block that differs"
        ),
        first_block=None,
    )


def _plain(text: str) -> str:
    """`mlog log verify`'s digest line without its `digest TOKEN: MATCHES: ` head."""
    if text.startswith("digest "):
        text = text.split(": ", 1)[-1]
    for head in ("MATCHES: ", "DOES NOT MATCH: ", "CANNOT BE CHECKED: "):
        text = text.removeprefix(head)
    return text


def read_health(md: Metadata, *, digest: LogDigest | None, verify: bool) -> Health:
    """The page's values (blocking: run on a worker thread)."""
    quorum = read_quorum(md)
    brokers, brokers_note, sessions_note = read_brokers(md)
    token, token_offset, token_note = _committed_digest(md)
    committed = md.image().provenance.offset
    chain, chain_ok, verdict = None, True, None
    if md.remote:
        if digest is not None:
            verdict = _check_remote(md, digest)
    elif verify or digest is not None:
        outcome = md.verify(digest)
        report = outcome.report
        chain_ok = report.ok
        chain = "no hash chain" if report.chain is None else report.chain.describe()
        if not report.ok and report.chain is not None and report.chain.ok:
            damage = report.errors[0] if report.errors else "run `mlog log verify`"
            chain += f"; the log is DAMAGED: {damage}"
        if digest is not None:
            breaks = () if report.chain is None else report.chain.breaks
            first = next((str(b) for b in breaks if b.first_offset <= digest.offset), None)
            text = outcome.digest_text or ""
            unchecked = ": CANNOT BE CHECKED: " in text
            verdict = Verdict(
                token=digest.token(),
                matches=None if unchecked and not outcome.digest_ok else outcome.digest_ok,
                text=_plain(text),
                first_block=first,
            )
    return Health(
        quorum=quorum,
        brokers=brokers,
        brokers_note=brokers_note,
        sessions_note=sessions_note,
        committed_offset=committed,
        digest=token,
        digest_offset=token_offset,
        digest_note=token_note,
        chain=chain,
        chain_ok=chain_ok,
        verdict=verdict,
    )


async def health_page(request: web.Request) -> web.StreamResponse:
    """`/health`: the quorum, the brokers, the digest; `digest=` checks a pasted token."""
    pasted = request.query.get("digest")
    digest = parse_token(pasted)
    verify = request.query.get("verify", "") == "1"
    if request.query.get("verify", "") not in ("", "0", "1"):
        raise BadInput("verify takes 1 (check the whole chain now) or 0")
    session = session_of(request)
    health = await session.source.call(lambda md: read_health(md, digest=digest, verify=verify))
    return views.render(
        request,
        "health.html",
        health=health,
        pasted=(pasted or "").strip(),
        verified=verify or digest is not None,
    )
