"""The authorizer: Kafka's StandardAuthorizer rules plus namespace ACLs, against a reference.

`reference` reads the rules literally and scans every ACL; a Hypothesis property checks that
the indexed `Authorizer` decides every request as it does, over random ACL sets of every kind
(literal, prefixed, wildcard names; namespace ACLs; DENY and ALLOW; `User:*` and host `*`) and
while the ACLs change under one authorizer (its cached index). Named examples pin each rule.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from immutables import Map

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.acl_index import CONCRETE_OPERATIONS, AclIndex
from replay.controller.authorizer import (
    CLUSTER_NAME,
    TOPIC_OPERATIONS,
    Authorizer,
    AuthorizerConfig,
    namespace_chain,
)
from replay.image import AclsImage, MetadataImage

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, NAMESPACE, CLUSTER, GROUP = (
    ResourceType.TOPIC,
    ResourceType.NAMESPACE,
    ResourceType.CLUSTER,
    ResourceType.GROUP,
)
Op = AclOperation

ALICE, BOB = "User:alice", "User:bob"
HERE, THERE = "10.0.0.1", "10.0.0.2"


# ---------------------------------------------------------------------- the reference


def _chain(resource_type: ResourceType, name: str) -> list[str]:
    """The namespaces over a resource, nearest first, spelled out from the rules."""
    if resource_type == TOPIC:
        namespace = name.rpartition(":")[0]
    elif resource_type == NAMESPACE:
        namespace = name
    else:
        return []
    parts = namespace.split(":") if namespace else []
    return [":".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _pattern_matches(acl: AccessControlEntryRecord, kind: ResourceType, name: str) -> bool:
    if acl.resource_type != kind:
        return False
    if acl.pattern_type == LITERAL:
        return acl.resource_name in (name, "*")
    if acl.pattern_type == PREFIXED:
        return name.startswith(acl.resource_name)
    return False


def _denies(acl: AccessControlEntryRecord, op: AclOperation) -> bool:
    return acl.permission_type == DENY and acl.operation in (Op.ALL, op)


def _allows(acl: AccessControlEntryRecord, op: AclOperation) -> bool:
    if acl.permission_type != ALLOW:
        return False
    if acl.operation in (Op.ALL, op):
        return True
    if op == Op.DESCRIBE:
        return acl.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    if op == Op.DESCRIBE_CONFIGS:
        return acl.operation == Op.ALTER_CONFIGS
    return False


def reference(  # noqa: PLR0917 - the ACLs, the config, then the request as authorize takes it
    acls: Iterable[AccessControlEntryRecord],
    config: AuthorizerConfig,
    principal: str,
    host: str,
    op: AclOperation,
    kind: ResourceType,
    name: str,
) -> bool:
    """The rules as issue #20 states them, checked ACL by ACL (a linear scan)."""
    if principal in config.super_users:
        return True
    chain = _chain(kind, name)
    everything = list(acls)

    def on_entity(acl: AccessControlEntryRecord) -> bool:
        return _pattern_matches(acl, kind, name)

    def on_chain(acl: AccessControlEntryRecord) -> bool:
        return any(_pattern_matches(acl, NAMESPACE, n) for n in chain)

    def mine(acl: AccessControlEntryRecord) -> bool:
        return acl.principal in (principal, "User:*") and acl.host in (host, "*")

    # 1. the namespace gate: a DENY anywhere on the chain
    if any(on_chain(a) and mine(a) and _denies(a, op) for a in everything):
        return False
    # 2. a DENY on the entity
    if any(on_entity(a) and mine(a) and _denies(a, op) for a in everything):
        return False
    # 3. an ALLOW on the entity or anywhere on the chain
    if any((on_entity(a) or on_chain(a)) and mine(a) and _allows(a, op) for a in everything):
        return True
    # 4. ACLs on the resource, none for this request: deny; none at all: the config decides
    if any(on_entity(a) or on_chain(a) for a in everything):
        return False
    return config.allow_everyone_if_no_acl_found


# ---------------------------------------------------------------------- helpers


def acl(
    kind: ResourceType,
    name: str,
    op: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = ALICE,
    host: str = "*",
    pattern: PatternType = LITERAL,
) -> AccessControlEntryRecord:
    """An ACL record with a fresh id."""
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=kind,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=permission,
    )


def image_of(acls: Sequence[AccessControlEntryRecord]) -> MetadataImage:
    """An image holding these ACLs (nothing else: the authorizer reads only ACLs)."""
    return MetadataImage(acls=AclsImage(by_id=Map({a.id: a for a in acls})))


def decide(
    acls: Sequence[AccessControlEntryRecord],
    op: AclOperation,
    kind: ResourceType,
    name: str,
    *,
    principal: str = ALICE,
    host: str = HERE,
    config: AuthorizerConfig | None = None,
) -> bool:
    """The authorizer's decision, checked against the reference's."""
    config = config or AuthorizerConfig()
    got = Authorizer(config).authorize(image_of(acls), principal, host, op, kind, name)
    assert got == reference(acls, config, principal, host, op, kind, name)
    return got


# ---------------------------------------------------------------------- named rules


def test_no_acl_denies_by_default_and_allows_with_allow_everyone() -> None:
    assert not decide([], Op.READ, TOPIC, "t")
    everyone = AuthorizerConfig(allow_everyone_if_no_acl_found=True)
    assert decide([], Op.READ, TOPIC, "t", config=everyone)
    assert decide([], Op.CREATE, CLUSTER, CLUSTER_NAME, config=everyone)
    # ACLs on another resource do not count: still "no ACL found" for this one
    assert decide(
        [acl(TOPIC, "other", Op.READ, principal=BOB)], Op.READ, TOPIC, "t", config=everyone
    )


def test_allow_everyone_does_not_apply_once_a_resource_has_acls() -> None:
    everyone = AuthorizerConfig(allow_everyone_if_no_acl_found=True)
    # an ACL on the topic for someone else: alice is no longer "everyone"
    acls = [acl(TOPIC, "t", Op.READ, principal=BOB)]
    assert not decide(acls, Op.READ, TOPIC, "t", config=everyone)
    # an ACL on its namespace counts as an ACL on the topic
    acls = [acl(NAMESPACE, "org", Op.READ, principal=BOB)]
    assert not decide(acls, Op.READ, TOPIC, "org:apache:t", config=everyone)
    assert decide(acls, Op.READ, TOPIC, "com:t", config=everyone)


def test_super_users_may_do_everything_even_when_denied() -> None:
    config = AuthorizerConfig(super_users=frozenset({"User:root"}))
    acls = [acl(TOPIC, "*", Op.ALL, DENY, principal="User:*")]
    for op in CONCRETE_OPERATIONS:
        assert decide(acls, op, TOPIC, "t", principal="User:root", config=config)
        assert not decide(acls, op, TOPIC, "t", principal=ALICE, config=config)
    # a super user's name is matched whole: User:roo and User:root2 are not super users
    assert not decide([], Op.READ, TOPIC, "t", principal="User:root2", config=config)


def test_deny_beats_allow() -> None:
    acls = [acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.READ, DENY)]
    assert not decide(acls, Op.READ, TOPIC, "t")
    # a DENY for everyone from everywhere beats alice's own ALLOW from her host
    acls = [acl(TOPIC, "t", Op.ALL, host=HERE), acl(TOPIC, "*", Op.WRITE, DENY, principal="User:*")]
    assert not decide(acls, Op.WRITE, TOPIC, "t")
    assert decide(acls, Op.READ, TOPIC, "t")


def test_all_matches_every_operation_both_ways() -> None:
    allow_all = [acl(TOPIC, "t", Op.ALL)]
    deny_all = [acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.ALL, DENY)]
    for op in CONCRETE_OPERATIONS:
        assert decide(allow_all, op, TOPIC, "t")
        assert not decide(deny_all, op, TOPIC, "t")


@pytest.mark.parametrize("granting", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(granting: AclOperation) -> None:
    assert decide([acl(TOPIC, "t", granting)], Op.DESCRIBE, TOPIC, "t")


@pytest.mark.parametrize(
    "other", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE]
)
def test_describe_is_not_implied_by_other_operations(other: AclOperation) -> None:
    assert not decide([acl(TOPIC, "t", other)], Op.DESCRIBE, TOPIC, "t")


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert decide([acl(TOPIC, "t", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not decide([acl(TOPIC, "t", Op.ALTER)], Op.DESCRIBE_CONFIGS, TOPIC, "t")
    # implication goes one way only: DESCRIBE grants neither READ nor ALTER
    assert not decide([acl(TOPIC, "t", Op.DESCRIBE)], Op.READ, TOPIC, "t")
    assert not decide([acl(TOPIC, "t", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS, TOPIC, "t")


def test_implication_never_applies_to_deny() -> None:
    # DENY READ does not deny DESCRIBE (Kafka: implied operations are for ALLOW only)
    acls = [acl(TOPIC, "t", Op.DESCRIBE), acl(TOPIC, "t", Op.READ, DENY)]
    assert decide(acls, Op.DESCRIBE, TOPIC, "t")
    assert not decide(acls, Op.READ, TOPIC, "t")
    acls = [acl(TOPIC, "t", Op.DESCRIBE_CONFIGS), acl(TOPIC, "t", Op.ALTER_CONFIGS, DENY)]
    assert decide(acls, Op.DESCRIBE_CONFIGS, TOPIC, "t")


def test_wildcard_principal_and_host() -> None:
    acls = [acl(TOPIC, "t", Op.READ, principal="User:*")]
    assert decide(acls, Op.READ, TOPIC, "t", principal=BOB)
    acls = [acl(TOPIC, "t", Op.READ, host=HERE)]
    assert decide(acls, Op.READ, TOPIC, "t", host=HERE)
    assert not decide(acls, Op.READ, TOPIC, "t", host=THERE)
    acls = [acl(TOPIC, "t", Op.READ, host="*")]
    assert decide(acls, Op.READ, TOPIC, "t", host=THERE)
    # a DENY from one host only refuses that host
    acls = [acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.READ, DENY, host=THERE)]
    assert decide(acls, Op.READ, TOPIC, "t", host=HERE)
    assert not decide(acls, Op.READ, TOPIC, "t", host=THERE)
    # principals are matched whole, case and all
    acls = [acl(TOPIC, "t", Op.READ, principal="User:Alice")]
    assert not decide(acls, Op.READ, TOPIC, "t", principal=ALICE)


def test_literal_wildcard_and_prefixed_names() -> None:
    literal = [acl(TOPIC, "orders", Op.READ)]
    assert decide(literal, Op.READ, TOPIC, "orders")
    assert not decide(literal, Op.READ, TOPIC, "orders2")
    assert not decide(literal, Op.READ, TOPIC, "order")
    wildcard = [acl(TOPIC, "*", Op.READ)]
    assert decide(wildcard, Op.READ, TOPIC, "anything")
    assert not decide(wildcard, Op.READ, GROUP, "anything")  # of its resource type only
    prefixed = [acl(TOPIC, "ord", Op.READ, pattern=PREFIXED)]
    assert decide(prefixed, Op.READ, TOPIC, "ord")
    assert decide(prefixed, Op.READ, TOPIC, "orders")
    assert not decide(prefixed, Op.READ, TOPIC, "or")
    assert not decide(prefixed, Op.READ, TOPIC, "xorders")
    # a PREFIXED `*` is a prefix like any other, not a wildcard
    star = [acl(TOPIC, "*", Op.READ, pattern=PREFIXED)]
    assert not decide(star, Op.READ, TOPIC, "orders")


def test_cluster_resource() -> None:
    acls = [acl(CLUSTER, CLUSTER_NAME, Op.CREATE)]
    assert decide(acls, Op.CREATE, CLUSTER, CLUSTER_NAME)
    assert not decide(acls, Op.ALTER, CLUSTER, CLUSTER_NAME)
    # a cluster ACL says nothing about topics
    assert not decide(acls, Op.CREATE, TOPIC, "t")


# ---------------------------------------------------------------------- namespaces


def test_namespace_chain() -> None:
    assert namespace_chain(TOPIC, "org:apache:t") == ["org:apache", "org"]
    assert namespace_chain(TOPIC, "t") == []
    assert namespace_chain(NAMESPACE, "org:apache") == ["org:apache", "org"]
    assert namespace_chain(NAMESPACE, "org") == ["org"]
    assert namespace_chain(CLUSTER, CLUSTER_NAME) == []
    assert namespace_chain(GROUP, "a:b") == []


def test_namespace_allow_grants_everything_below_it() -> None:
    acls = [acl(NAMESPACE, "org", Op.READ)]
    assert decide(acls, Op.READ, TOPIC, "org:t")
    assert decide(acls, Op.READ, TOPIC, "org:apache:kafka:t")
    assert decide(acls, Op.DESCRIBE, TOPIC, "org:apache:t")  # implied, as on the entity
    assert decide(acls, Op.READ, NAMESPACE, "org:apache")
    assert decide(acls, Op.READ, NAMESPACE, "org")
    assert not decide(acls, Op.READ, TOPIC, "t")  # the default namespace is not below it
    assert not decide(acls, Op.READ, TOPIC, "com:t")
    assert not decide(acls, Op.READ, TOPIC, "organic:t")  # a LITERAL namespace is whole
    assert not decide(acls, Op.WRITE, TOPIC, "org:t")
    # a namespace ACL applies to what lies below it, not above: nothing on `org` from `org:a`
    acls = [acl(NAMESPACE, "org:apache", Op.READ)]
    assert not decide(acls, Op.READ, NAMESPACE, "org")
    assert not decide(acls, Op.READ, TOPIC, "org:t")
    assert decide(acls, Op.READ, TOPIC, "org:apache:t")


def test_namespace_gate_refuses_whatever_the_topic_allows() -> None:
    acls = [
        acl(TOPIC, "org:apache:t", Op.ALL),
        acl(NAMESPACE, "org", Op.WRITE, DENY),
    ]
    assert not decide(acls, Op.WRITE, TOPIC, "org:apache:t")
    assert decide(acls, Op.READ, TOPIC, "org:apache:t")
    # the gate is for the principal and host it names
    assert decide(acls, Op.WRITE, TOPIC, "org:apache:t", principal=BOB) is False  # no ALLOW
    acls.append(acl(TOPIC, "org:apache:t", Op.ALL, principal=BOB))
    assert decide(acls, Op.WRITE, TOPIC, "org:apache:t", principal=BOB)
    # an ALLOW on the namespace does not lift a DENY on the topic
    acls = [acl(NAMESPACE, "org", Op.ALL), acl(TOPIC, "org:apache:t", Op.DELETE, DENY)]
    assert not decide(acls, Op.DELETE, TOPIC, "org:apache:t")
    assert decide(acls, Op.DELETE, TOPIC, "org:apache:u")


def test_namespace_prefixed_and_wildcard() -> None:
    acls = [acl(NAMESPACE, "org:a", Op.CREATE, pattern=PREFIXED)]
    assert decide(acls, Op.CREATE, NAMESPACE, "org:apache")
    assert decide(acls, Op.CREATE, TOPIC, "org:apache:t")
    assert decide(acls, Op.CREATE, TOPIC, "org:a:t")
    assert not decide(acls, Op.CREATE, TOPIC, "org:t")
    acls = [acl(NAMESPACE, "*", Op.DESCRIBE)]
    assert decide(acls, Op.DESCRIBE, TOPIC, "x:y:t")
    assert not decide(acls, Op.DESCRIBE, TOPIC, "t")  # a default-namespace topic has no chain


def test_moving_a_topic_changes_the_namespace_acls_that_apply() -> None:
    acls = [acl(NAMESPACE, "org", Op.ALL), acl(NAMESPACE, "com", Op.DELETE, DENY)]
    authorizer = Authorizer(AuthorizerConfig())
    image = image_of(acls)
    assert authorizer.authorize(image, ALICE, HERE, Op.DELETE, TOPIC, "org:apache:t")
    # the same topic after `mlog topics move` to `com`: its qualified name is `com:t`
    assert not authorizer.authorize(image, ALICE, HERE, Op.DELETE, TOPIC, "com:t")
    # and after a move to the default namespace no namespace ACL applies
    assert not authorizer.authorize(image, ALICE, HERE, Op.DELETE, TOPIC, "t")


# ---------------------------------------------------------------------- the index


def test_index_is_built_once_per_acl_map_and_rebuilt_when_it_changes() -> None:
    authorizer = Authorizer(AuthorizerConfig())
    first = image_of([acl(TOPIC, "t", Op.READ)])
    index = authorizer.index(first)
    # another image sharing the ACL map (any change but an ACL one) shares the index
    same_acls = MetadataImage(acls=first.acls)
    assert authorizer.index(same_acls) is index
    assert authorizer.authorize(same_acls, ALICE, HERE, Op.READ, TOPIC, "t")
    # an ACL change is a new map: a new index, which sees the change
    removed = MetadataImage(acls=AclsImage(by_id=Map()))
    assert authorizer.index(removed) is not index
    assert not authorizer.authorize(removed, ALICE, HERE, Op.READ, TOPIC, "t")
    # the committed and the working image take turns without rebuilding
    assert authorizer.index(first) is index
    assert authorizer.index(removed) is authorizer.index(removed)
    assert authorizer.index(first) is index


def test_the_authorizer_keeps_only_the_last_two_acl_maps_alive() -> None:
    # A server runs for months through ACL changes: each change must not pin another map.
    authorizer = Authorizer(AuthorizerConfig())
    images = [image_of([acl(TOPIC, f"t{i}", Op.READ)]) for i in range(3)]
    held = [weakref.ref(image.acls.by_id) for image in images]
    for image in images:
        authorizer.index(image)
    oldest = images.pop(0)
    del oldest
    gc.collect()
    assert held[0]() is None
    assert all(ref() is not None for ref in held[1:])


def test_index_size_and_unknown_permission_or_pattern() -> None:
    index = AclIndex([acl(TOPIC, "t", Op.READ), acl(TOPIC, "u", Op.READ, pattern=PREFIXED)])
    assert index.size == 2
    # a permission type a stored ACL never has matches nothing but still marks the resource
    odd = acl(TOPIC, "t", Op.READ, AclPermissionType.UNKNOWN)
    assert AclIndex([odd]).decide(ALICE, HERE, Op.READ, TOPIC, "t") is False
    assert AclIndex([odd]).decide(ALICE, HERE, Op.READ, TOPIC, "u") is None


def test_authorized_operations_bit_field() -> None:
    authorizer = Authorizer(AuthorizerConfig())
    image = image_of([acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.ALTER_CONFIGS)])
    bits = authorizer.authorized_operations(
        image, ALICE, HERE, TOPIC, "t", operations=TOPIC_OPERATIONS
    )
    expected = (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS)
    assert bits == expected | (1 << Op.DESCRIBE_CONFIGS)
    assert (
        authorizer.authorized_operations(image, BOB, HERE, TOPIC, "t", operations=TOPIC_OPERATIONS)
        == 0
    )


def test_hostile_names_and_principals_decide_without_error() -> None:
    acls = [acl(TOPIC, "t", Op.READ), acl(NAMESPACE, "org", Op.READ, pattern=PREFIXED)]
    acls += [acl(NAMESPACE, "", Op.WRITE), acl(NAMESPACE, "org:", Op.ALTER)]
    names = ["", ":", "::", ":a:t", "org::t", "org:\x00:t", "org:" + ":" * 1000 + "t", "*"]
    for name in [*names, "a" * 100_000, "org:" + "a:" * 1000 + "t"]:
        decide(acls, Op.READ, TOPIC, name)
        decide(acls, Op.READ, NAMESPACE, name)
    for op in (Op.READ, Op.WRITE, Op.ALTER):
        for name in names:
            decide(acls, op, TOPIC, name)
            decide(acls, op, NAMESPACE, name)
    for principal in ["", "User:", "User:*", "alice", "User:alice\n", "User:" + "x" * 10_000]:
        decide(acls, Op.READ, TOPIC, "t", principal=principal)
    for host in ["", "*", "::1", "10.0.0.1 "]:
        decide(acls, Op.READ, TOPIC, "t", host=host)


def test_a_name_of_many_separators_costs_no_quadratic_work() -> None:
    # Each link of the chain is not copied out of the name unless a LITERAL namespace ACL of
    # its length exists: 200,000 separators would otherwise copy ~20 GB.
    acls = [acl(NAMESPACE, "org", Op.READ), acl(NAMESPACE, "or", Op.READ, pattern=PREFIXED)]
    authorizer = Authorizer(AuthorizerConfig())
    image = image_of(acls)
    name = "org" + ":" * 200_000 + "t"
    assert authorizer.authorize(image, ALICE, HERE, Op.READ, TOPIC, name)
    assert not authorizer.authorize(image, ALICE, HERE, Op.WRITE, NAMESPACE, name)


# ---------------------------------------------------------------------- the property

# A small vocabulary, so that random ACLs meet on the same resource, principal and operation.
NAMESPACES = ["org", "org:apache", "org:apachex", "or", "com:x:y"]
TOPICS = ["t", "tt"] + [f"{ns}:t" for ns in NAMESPACES] + ["org:apache:tt"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = [HERE, THERE, "*"]
# The operations implication links, often; every operation, sometimes.
FREQUENT = [Op.ALL, Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
acl_operations = st.one_of(
    st.sampled_from(FREQUENT), st.sampled_from([op for op in AclOperation if op >= Op.ALL])
)
asked_operations = st.one_of(
    st.sampled_from([Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]),
    st.sampled_from(CONCRETE_OPERATIONS),
)


def _prefix_of(names: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(names).flatmap(lambda n: st.integers(1, len(n)).map(lambda k: n[:k]))


resources = st.one_of(
    st.tuples(st.just(TOPIC), st.sampled_from([*TOPICS, "*"]), st.just(LITERAL)),
    st.tuples(st.just(TOPIC), _prefix_of(TOPICS), st.just(PREFIXED)),
    st.tuples(
        st.just(NAMESPACE), st.sampled_from([*NAMESPACES, "*", "", "org:"]), st.just(LITERAL)
    ),
    st.tuples(st.just(NAMESPACE), _prefix_of(NAMESPACES), st.just(PREFIXED)),
    st.tuples(st.just(CLUSTER), st.sampled_from([CLUSTER_NAME, "*"]), st.just(LITERAL)),
    st.tuples(st.just(GROUP), st.sampled_from(["g", "*"]), st.just(LITERAL)),
    st.tuples(st.just(GROUP), st.just("g"), st.just(PREFIXED)),
)

acls_strategy = st.builds(
    lambda resource, principal, host, op, permission: acl(
        resource[0],
        resource[1],
        op,
        permission,
        principal=principal,
        host=host,
        pattern=resource[2],
    ),
    resources,
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    acl_operations,
    st.sampled_from([ALLOW, DENY]),
)

requests = st.tuples(
    st.sampled_from([ALICE, BOB, "User:carol", "User:root"]),
    st.sampled_from([HERE, THERE, "10.0.0.3"]),
    asked_operations,
    st.one_of(
        st.tuples(
            st.just(TOPIC),
            st.sampled_from([*TOPICS, "organic:t", "org:apache:kafka:t", "org::t", ":t", ":a:t"]),
        ),
        st.tuples(
            st.just(NAMESPACE), st.sampled_from([*NAMESPACES, "org:apache:kafka", "", "org:", ":a"])
        ),
        st.tuples(st.just(CLUSTER), st.just(CLUSTER_NAME)),
        st.tuples(st.just(GROUP), st.sampled_from(["g", "gx", "h"])),
    ),
)

configs = st.builds(
    AuthorizerConfig,
    super_users=st.sampled_from([frozenset(), frozenset({"User:root"})]),
    allow_everyone_if_no_acl_found=st.booleans(),
)


@settings(max_examples=500)
@given(
    st.lists(acls_strategy, max_size=25),
    st.lists(acls_strategy, max_size=10),
    st.lists(requests, min_size=1, max_size=20),
    configs,
)
def test_authorizer_decides_as_the_reference(
    acls: list[AccessControlEntryRecord],
    added: list[AccessControlEntryRecord],
    asked: list[tuple[str, str, AclOperation, tuple[ResourceType, str]]],
    config: AuthorizerConfig,
) -> None:
    # One authorizer through three ACL states (more ACLs, then some removed, then the first
    # again by the same map): its cached index must follow every change.
    authorizer = Authorizer(config)
    first = image_of(acls)
    states = [first, image_of(acls + added), image_of(added), first]
    for image in states:
        held = list(image.acls.by_id.values())
        for principal, host, op, (kind, name) in asked:
            want = reference(held, config, principal, host, op, kind, name)
            got = authorizer.authorize(image, principal, host, op, kind, name)
            assert got == want, (principal, host, op.name, kind.name, name, held)


@settings(max_examples=300)
def contents(index: AclIndex) -> object:
    """Everything an index holds, comparable (its grants by value, its records by identity)."""

    def grants(by_name: dict[str, Any]) -> object:
        return {
            name: {who: (m.deny, m.allow, m.hosts) for who, m in by_who.items()}
            for name, by_who in by_name.items()
        }

    return (
        {pattern: sorted(map(id, acls)) for pattern, acls in index._patterns.items()},
        {kind: grants(by_name) for kind, by_name in index._literal.items()},
        {kind: (lengths, grants(by)) for kind, (lengths, by) in index._prefixed.items()},
        index._namespaced,
        index._literal_namespace_lengths,
    )


@given(
    st.lists(acls_strategy, max_size=30),
    st.lists(st.integers(0, 29), max_size=15),
    st.lists(acls_strategy, max_size=10),
    st.lists(requests, min_size=1, max_size=20),
)
def test_an_updated_index_decides_as_a_fresh_one_and_leaves_its_source_alone(
    acls: list[AccessControlEntryRecord],
    removed_at: list[int],
    added: list[AccessControlEntryRecord],
    asked: list[tuple[str, str, AclOperation, tuple[ResourceType, str]]],
) -> None:
    before = Map({a.id: a for a in acls})
    gone = {acls[i].id for i in removed_at if i < len(acls)}
    after = Map({a.id: a for a in [*acls, *added] if a.id not in gone})
    source = AclIndex(before.values())
    updated = source.updated(after)
    fresh_before, fresh_after = AclIndex(before.values()), AclIndex(after.values())
    assert updated.size == fresh_after.size == len(after)
    # nothing left behind by what was removed: a server whose ACLs come and go does not grow
    assert contents(updated) == contents(fresh_after)
    for principal, host, op, (kind, name) in asked:
        request = (principal, host, op, kind, name)
        assert updated.decide(*request) == fresh_after.decide(*request), request
        assert source.decide(*request) == fresh_before.decide(*request), request


def test_an_index_is_updated_for_a_few_changes_and_built_for_many() -> None:
    acls = [acl(TOPIC, f"t{i}", Op.ALL) for i in range(1000)]
    source = AclIndex(acls)
    one_more = Map({a.id: a for a in [*acls, acl(TOPIC, "t0", Op.WRITE, DENY)]})
    updated = source.updated(one_more)
    assert updated.decide(ALICE, HERE, Op.WRITE, TOPIC, "t0") is False
    assert source.decide(ALICE, HERE, Op.WRITE, TOPIC, "t0") is True  # unchanged
    # untouched patterns are shared, not copied
    assert updated._literal[int(TOPIC)]["t5"] is source._literal[int(TOPIC)]["t5"]
    # a record replaced under the same id (replay never does it) is still seen as a change
    replaced = acl(TOPIC, "t1", Op.ALL, DENY)
    swapped = Map({a.id: a for a in acls}).set(acls[1].id, replaced)
    assert source.updated(swapped).decide(ALICE, HERE, Op.READ, TOPIC, "t1") is False
    # half of them gone: built afresh, same decisions
    half = Map({a.id: a for a in acls[::2]})
    rebuilt = source.updated(half)
    assert rebuilt.size == 500 and rebuilt.decide(ALICE, HERE, Op.READ, TOPIC, "t1") is None
    assert rebuilt.decide(ALICE, HERE, Op.READ, TOPIC, "t2") is True
    assert rebuilt._literal[int(TOPIC)]["t2"] is not source._literal[int(TOPIC)]["t2"]
