"""Authorization: Kafka's `StandardAuthorizer` rules over the ACLs of the image, plus namespaces.

Turned on by the server's `authorizer.class.name`; `AuthorizerConfig` holds the settings the
server config gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's class name for the authorizer; `authorizer.class.name` accepts it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerConfig:
    """The authorizer's settings, under Kafka's keys."""

    super_users: frozenset[str] = field(default_factory=frozenset)
    """`super.users`: principals (`User:<name>`) allowed everything, whatever the ACLs say."""
    allow_everyone_if_no_acl_found: bool = False
    """`allow.everyone.if.no.acl.found`: with no ACL on a resource (or its namespaces),
    allow instead of deny."""
