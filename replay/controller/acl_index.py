"""The ACLs of an image, indexed so that an authorization decision is a few dict lookups.

`AclIndex` holds, per resource type, the ACLs by LITERAL name and by PREFIXED prefix (with the
prefix lengths in use), then by principal, each entry holding the operations denied and
allowed as bit masks (ALL and the implied operations expanded), host-specific ACLs apart. A
decision looks up the resource's name, `*` and each prefix length, then the requester and
`User:*`: its cost does not grow with the number of ACLs. `replay.controller.authorizer` states
the rules; this module only makes them fast.

An index is immutable once made. `updated` makes the index of a changed ACL map from the one
before it, sharing everything the change does not touch: after one ACL change among 100,000
it costs a pass over the map's ids instead of a whole build.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.image import NAMESPACE_SEPARATOR
from replay.rules import WILDCARD_RESOURCE

WILDCARD = WILDCARD_RESOURCE
"""A LITERAL resource name or an ACL host that matches every name or host."""

WILDCARD_PRINCIPAL = "User:*"
"""An ACL principal that matches every principal."""

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
"""The ALLOWed operations that grant an operation besides itself and ALL (Kafka's table);
implication never applies to DENY."""

CONCRETE_OPERATIONS: tuple[AclOperation, ...] = tuple(
    op for op in AclOperation if op > AclOperation.ALL
)
"""The operations a request asks for (not UNKNOWN, ANY or ALL)."""

_EVERY_OPERATION = sum(1 << op for op in CONCRETE_OPERATIONS)
_TOPIC = int(ResourceType.TOPIC)
_NAMESPACE = int(ResourceType.NAMESPACE)
_LITERAL = int(PatternType.LITERAL)
_PREFIXED = int(PatternType.PREFIXED)


def _granted_mask(operation: AclOperation) -> int:
    """The requested operations an ALLOW of `operation` grants, as a bit mask."""
    if operation == AclOperation.ALL:
        return _EVERY_OPERATION
    mask = 1 << operation
    for implied, by in IMPLIED_BY.items():
        if operation in by:
            mask |= 1 << implied
    return mask


def _denied_mask(operation: AclOperation) -> int:
    """The requested operations a DENY of `operation` refuses (no implication), as a bit mask."""
    return _EVERY_OPERATION if operation == AclOperation.ALL else 1 << operation


class _Masks:
    """One principal's ACLs on one resource pattern: operations denied and granted (bit masks).

    `deny`/`allow` hold the ACLs from any host (`*`); `hosts` those of named hosts, if any.
    Filled while its pattern's grants are made, never changed after.
    """

    __slots__ = ("allow", "deny", "hosts")

    def __init__(self) -> None:
        self.deny = 0
        self.allow = 0
        self.hosts: dict[str, list[int]] | None = None

    def add(self, host: str, deny: int, allow: int) -> None:
        if host == WILDCARD:
            self.deny |= deny
            self.allow |= allow
            return
        if self.hosts is None:
            self.hosts = {}
        both = self.hosts.setdefault(host, [0, 0])
        both[0] |= deny
        both[1] |= allow


_Grants = dict[str, _Masks]
"""The ACLs of one resource pattern, by principal (`User:*` included)."""

_Pattern = tuple[int, int, str]
"""(resource type, pattern type, name): the ACLs that share one are indexed together."""


def _grants(acls: Iterable[AccessControlEntryRecord]) -> _Grants:
    """The grants of the ACLs of one pattern."""
    grants: _Grants = {}
    for acl in acls:
        masks = grants.get(acl.principal)
        if masks is None:
            masks = grants[acl.principal] = _Masks()
        # Another permission type matches nothing, but its (empty) masks put the ACL on the
        # resource all the same (it counts against allow.everyone.if.no.acl.found, as in Kafka).
        if acl.permission_type == AclPermissionType.DENY:
            masks.add(acl.host, _denied_mask(acl.operation), 0)
        elif acl.permission_type == AclPermissionType.ALLOW:
            masks.add(acl.host, 0, _granted_mask(acl.operation))
    return grants


def _pattern(acl: AccessControlEntryRecord) -> _Pattern | None:
    """The pattern an ACL is indexed under, or None for one that matches nothing.

    Replay admits only LITERAL and PREFIXED ACLs; another pattern type matches no name.
    """
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return None
    return (int(acl.resource_type), int(acl.pattern_type), acl.resource_name)


class AclIndex:
    """The ACLs of one image, indexed for decisions (see the module docstring)."""

    __slots__ = (
        "_held",
        "_literal",
        "_literal_namespace_lengths",
        "_namespaced",
        "_patterns",
        "_prefixed",
        "size",
    )

    REBUILD_SHARE = 8
    """`updated` builds afresh when more than 1/REBUILD_SHARE of the ACLs changed (and more
    than a few): copying what did not change would then cost about as much."""

    def __init__(self, acls: Iterable[AccessControlEntryRecord]) -> None:
        # By identity (`updated`): holding the records keeps their id()s from being reused.
        self._held: dict[int, AccessControlEntryRecord] = {}
        self._patterns: dict[_Pattern, list[AccessControlEntryRecord]] = {}
        for acl in acls:
            self._held[id(acl)] = acl
            pattern = _pattern(acl)
            if pattern is not None:
                self._patterns.setdefault(pattern, []).append(acl)
        self._literal: dict[int, dict[str, _Grants]] = {}
        self._prefixed: dict[int, tuple[tuple[int, ...], dict[str, _Grants]]] = {}
        prefixed: dict[int, dict[str, _Grants]] = {}
        for (kind, pattern_type, name), members in self._patterns.items():
            table = self._literal if pattern_type == _LITERAL else prefixed
            table.setdefault(kind, {})[name] = _grants(members)
        for kind, by_prefix in prefixed.items():
            self._prefixed[kind] = (_lengths(by_prefix), by_prefix)
        self._finish()

    def _finish(self) -> None:
        self._namespaced = _NAMESPACE in self._literal or _NAMESPACE in self._prefixed
        self._literal_namespace_lengths = frozenset(
            len(n) for n in self._literal.get(_NAMESPACE, ())
        )
        self.size = len(self._held)
        """How many ACLs the index holds."""

    def updated(self, acls: Mapping[Uuid, AccessControlEntryRecord]) -> AclIndex:
        """The index of `acls`, made from this one when they differ by a few ACLs.

        ACLs are told apart by identity: the records of an image's map are shared with the
        maps after it, and this index holds its records alive, so a record of `acls` that is
        not one of them is new (a record replaced under the same id is new too, and the one
        it replaced gone). Only the patterns the changes touch are indexed again; the rest is
        shared with this index, which stays as it is.
        """
        held = self._held
        current = {id(acl): acl for acl in acls.values()}  # the one pass over the map
        added = [current[key] for key in current.keys() - held.keys()]
        removed = [held[key] for key in held.keys() - current.keys()]
        changes = len(added) + len(removed)
        if changes > max(64, len(acls) // self.REBUILD_SHARE):
            return AclIndex(acls.values())
        made = AclIndex.__new__(AclIndex)
        made._held = dict(held)
        made._patterns = dict(self._patterns)
        touched: set[_Pattern] = set()
        for acl in removed:
            del made._held[id(acl)]
            pattern = _pattern(acl)
            if pattern is not None:
                made._patterns[pattern] = [a for a in made._patterns[pattern] if a is not acl]
                touched.add(pattern)
        for acl in added:
            made._held[id(acl)] = acl
            pattern = _pattern(acl)
            if pattern is not None:
                made._patterns[pattern] = [*made._patterns.get(pattern, ()), acl]
                touched.add(pattern)
        made._literal = dict(self._literal)
        prefixed = {kind: by_prefix for kind, (_, by_prefix) in self._prefixed.items()}
        copied: set[tuple[int, int]] = set()
        for pattern in touched:
            kind, pattern_type, name = pattern
            table = made._literal if pattern_type == _LITERAL else prefixed
            if (kind, pattern_type) not in copied:  # copy on write, once per table
                table[kind] = dict(table.get(kind, {}))
                copied.add((kind, pattern_type))
            members = made._patterns[pattern]
            if members:
                table[kind][name] = _grants(members)
            else:
                del made._patterns[pattern]
                del table[kind][name]
        for table in (made._literal, prefixed):
            for kind in [k for k, by_name in table.items() if not by_name]:
                del table[kind]
        made._prefixed = {
            kind: (
                _lengths(by_prefix) if (kind, _PREFIXED) in copied else self._prefixed[kind][0],
                by_prefix,
            )
            for kind, by_prefix in prefixed.items()
        }
        made._finish()
        return made

    def resource_grants(self, resource_type: int, name: str, found: list[_Grants]) -> None:
        """Append the ACLs whose pattern matches a resource: LITERAL name and `*`, PREFIXED."""
        by_name = self._literal.get(resource_type)
        if by_name is not None:
            grants = by_name.get(name)
            if grants is not None:
                found.append(grants)
            if name != WILDCARD:
                grants = by_name.get(WILDCARD)
                if grants is not None:
                    found.append(grants)
        self._prefixed_grants(resource_type, name, found)

    def _prefixed_grants(self, resource_type: int, name: str, found: list[_Grants]) -> None:
        prefixed = self._prefixed.get(resource_type)
        if prefixed is not None:
            lengths, by_prefix = prefixed
            size = len(name)
            for length in lengths:
                if length > size:
                    break
                grants = by_prefix.get(name[:length])
                if grants is not None:
                    found.append(grants)

    def chain_grants(self, namespace: str, found: list[_Grants]) -> None:
        """Append the NAMESPACE ACLs matching any link of a namespace's chain.

        The links are `namespace` and each enclosing one (each prefix ending before a
        separator, as `enclosing_namespaces`), so each is a prefix of `namespace`: a PREFIXED
        ACL matches a link exactly when it matches `namespace` itself (one lookup per prefix
        length), `*` matches them all, and a link is cut out of the name for a LITERAL lookup
        only when a LITERAL namespace ACL of its length exists. A name with many separators
        costs no quadratic copying.
        """
        if not namespace:
            return  # the default namespace: no chain
        by_name = self._literal.get(_NAMESPACE)
        if by_name is not None:
            lengths = self._literal_namespace_lengths
            end = len(namespace)
            while end >= 0:
                if end in lengths:
                    grants = by_name.get(namespace[:end])
                    if grants is not None:
                        found.append(grants)
                end = namespace.rfind(NAMESPACE_SEPARATOR, 0, end)
            grants = by_name.get(WILDCARD)
            if grants is not None:
                found.append(grants)
        self._prefixed_grants(_NAMESPACE, namespace, found)

    def decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool | None:
        """The ACLs' decision on a request, or None when no ACL is on the resource or its chain.

        True: an ALLOW applies and no DENY; False: a DENY applies, or ACLs are on the resource
        and its chain but none allows this request.
        """
        kind = int(resource_type)
        # The namespace gate first: the chain's ACLs, then the entity's. Both kinds of DENY
        # refuse, so the order only says which one a reader should think of first.
        found: list[_Grants] = []
        if kind == _TOPIC:
            if self._namespaced:
                self.chain_grants(name.rpartition(NAMESPACE_SEPARATOR)[0], found)
            self.resource_grants(kind, name, found)
        elif kind == _NAMESPACE and name:
            # A namespace is the first link of its own chain: its ACLs are looked up there.
            self.chain_grants(name, found)
        else:
            self.resource_grants(kind, name, found)
        if not found:
            return None
        bit = 1 << operation
        allowed = False
        for grants in found:
            for who in (principal, WILDCARD_PRINCIPAL):
                masks = grants.get(who)
                if masks is None:
                    continue
                if masks.deny & bit:
                    return False
                if masks.allow & bit:
                    allowed = True
                hosts = masks.hosts
                if hosts is not None:
                    both = hosts.get(host)
                    if both is not None:
                        if both[0] & bit:
                            return False
                        if both[1] & bit:
                            allowed = True
        return allowed


def _lengths(by_prefix: Mapping[str, object]) -> tuple[int, ...]:
    """The prefix lengths in use, shortest first."""
    return tuple(sorted({len(prefix) for prefix in by_prefix}))
