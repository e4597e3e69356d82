"""Which broker ids each broker principal may act for (`broker.principals`).

Kafka lets any holder of CLUSTER_ACTION register, heartbeat and change ISRs as any broker id:
one broker's principal can fence another (BrokerHeartbeat with WantFence) or register a made-up
broker whose endpoint Metadata then advertises. Here a broker's principal is bound to the ids it
may act for, and BrokerRegistration (62), BrokerHeartbeat (63) and AlterPartition (56) name
only those (`BrokerBindings.require`); an unbound id is refused with
CLUSTER_AUTHORIZATION_FAILED before anything is written.

The key's syntax, entries separated by `;`, each `User:<name>=<ids>` with ids a comma-separated
list of ids and inclusive ranges:

    broker.principals=User:broker-a=1,2;User:broker-b=10-19

The ids are taken after an entry's last `=` (ids never hold one), so a principal that holds `=`
or `,` (a certificate's DN, `User:CN=broker-a,O=example`) is written as it is; a principal with
`;` cannot be bound. A broker id is bound to one principal at most. Who is checked:

- no `broker.principals` and no authorizer: every principal acts for every id (a server without
  an authorizer trusts its clients; docs/security.md);
- `broker.principals` set: only the ids bound to the request's principal, authorizer or not;
- an authorizer and no `broker.principals`: nobody but a super user (`super.users`), who may act
  for every id whatever the binding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from records.fields import INT32_MAX
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import clip

if TYPE_CHECKING:  # the server config parses the key without loading the handlers
    from api.server.kafka.authorization import Gate
    from api.server.kafka.base import Session

BROKER_PRINCIPALS_KEY = "broker.principals"
"""The server key binding broker principals to broker ids."""

_IDS = re.compile(r"^[0-9]+(-[0-9]+)?$")


class BrokerBindingsError(ValueError):
    """A `broker.principals` value is not a valid binding (the message names the key)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerBindings:
    """The broker ids each principal may act for; `configured` False when the key is unset."""

    ranges: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    """Inclusive id ranges by principal (`User:<name>`)."""
    configured: bool = False
    """Whether `broker.principals` was given (even bindings that bind nothing are checked)."""

    def bound(self, principal: str, broker_id: int) -> bool:
        """Whether `principal` is bound to `broker_id`."""
        return any(lo <= broker_id <= hi for lo, hi in self.ranges.get(principal, ()))

    def ids_text(self, principal: str) -> str:
        """The ids bound to `principal` as the key spells them (`1,2,10-19`), or `none`."""
        spans = self.ranges.get(principal, ())
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in spans) or "none"

    def refusal(self, gate: Gate, session: Session, broker_id: int) -> ApiError | None:
        """The CLUSTER_AUTHORIZATION_FAILED error for acting as `broker_id`, or None if allowed."""
        authorizer = gate.authorizer
        if authorizer is None and not self.configured:
            return None  # no authorizer, no binding: every client is trusted
        if authorizer is not None and session.principal in authorizer.config.super_users:
            return None
        principal = session.principal
        if not self.configured:
            return ApiError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"{principal} may not act as broker {broker_id}: no broker id is bound to any "
                f"principal; bind it in the server config ({BROKER_PRINCIPALS_KEY}="
                f"{principal}={broker_id})",
            )
        if self.bound(principal, broker_id):
            return None
        return ApiError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{principal} may not act as broker {broker_id}: its bound broker ids are "
            f"{self.ids_text(principal)} ({BROKER_PRINCIPALS_KEY} in the server config)",
        )

    def require(self, gate: Gate, session: Session, broker_id: int) -> None:
        """Refuse (CLUSTER_AUTHORIZATION_FAILED) unless the session may act as `broker_id`."""
        error = self.refusal(gate, session, broker_id)
        if error is not None:
            raise error


NO_BINDINGS = BrokerBindings()
"""`broker.principals` unset."""


def parse_broker_principals(text: str) -> BrokerBindings:
    """The bindings of a `broker.principals` value; `BrokerBindingsError` (one line) if invalid."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    owner: list[tuple[int, int, str]] = []
    entries = [entry.strip() for entry in text.split(";")]
    if not any(entries):
        raise _error("is empty; give User:<name>=<ids>, e.g. User:broker-a=1,2;User:broker-b=3")
    for entry in entries:
        if not entry:
            raise _error("has an empty entry (two ';' in a row, or one at an end); remove it")
        principal, sep, ids = entry.rpartition("=")
        principal = principal.strip()
        kind, colon, name = principal.partition(":")
        if not sep or kind != "User" or not colon or not name.strip():
            raise _error(
                f"{clip(entry)} is not User:<name>=<ids> (ids: 1,2 or 10-19; entries "
                "separated by ';')"
            )
        if principal in ranges:
            raise _error(f"{clip(principal)} is bound twice; list all its ids in one entry")
        spans = [_span(entry, part.strip()) for part in ids.split(",")]
        for lo, hi in spans:
            for other_lo, other_hi, other in owner:
                if lo <= other_hi and other_lo <= hi:
                    shared = max(lo, other_lo)
                    raise _error(
                        f"broker id {shared} is bound to both {clip(other)} and "
                        f"{clip(principal)}; bind each id to one principal"
                    )
            owner.append((lo, hi, principal))
        ranges[principal] = sorted(spans)
    return BrokerBindings(
        ranges={principal: tuple(spans) for principal, spans in ranges.items()},
        configured=True,
    )


def _span(entry: str, part: str) -> tuple[int, int]:
    """One `id` or `lo-hi` of an entry, checked."""
    if not _IDS.match(part):
        raise _error(
            f"{clip(part)} in {clip(entry)} is not a broker id or a range lo-hi "
            f"(ids 0..{INT32_MAX})"
        )
    lo_text, _, hi_text = part.partition("-")
    lo = int(lo_text)
    hi = int(hi_text) if hi_text else lo
    if hi > INT32_MAX or lo > INT32_MAX:
        raise _error(f"{clip(part)} in {clip(entry)} is past the largest broker id {INT32_MAX}")
    if lo > hi:
        raise _error(f"the range {clip(part)} in {clip(entry)} is empty; write it low-high")
    return lo, hi


def _error(what: str) -> BrokerBindingsError:
    return BrokerBindingsError(f"{BROKER_PRINCIPALS_KEY}: {what}")
