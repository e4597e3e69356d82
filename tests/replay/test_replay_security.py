"""Replay holds ACLs and SCRAM credentials to the rules `acl.*` and `scram.*` of `RULES`.

Every such rule has a refused example (with the rule and the error type named), the edges just
inside each rule replay, and what replay accepts round-trips through a snapshot. A property
test checks `acl_problem` against a plain restatement of the rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    Record,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta
from replay.errors import AclReplayError, ReplayError, ScramReplayError
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, MetadataImage
from replay.rules import RULES, acl_problem, scram_problem
from replay.security.scram_keys import new_credential
from replay.security.scram_rules import MAX_ITERATIONS, MIN_ITERATIONS

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
ACL_1 = Uuid(bytes(range(1, 17)))
ACL_2 = Uuid(bytes(range(2, 18)))
SECRET_SALT = b"\xa5salt-never-shown\x5a"
SECRET_KEY = b"K" * 32


def _acl(**changes: object) -> AccessControlEntryRecord:
    fields: dict[str, object] = {
        "id": ACL_2,
        "resource_type": ResourceType.TOPIC,
        "resource_name": "orders",
        "pattern_type": PatternType.LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": AclOperation.READ,
        "permission_type": AclPermissionType.ALLOW,
        **changes,
    }
    return AccessControlEntryRecord(**fields)  # type: ignore[arg-type]  # test keywords


def _scram(**changes: object) -> UserScramCredentialRecord:
    fields: dict[str, object] = {
        "name": "alice",
        "mechanism": SHA256,
        "salt": SECRET_SALT,
        "stored_key": SECRET_KEY,
        "server_key": SECRET_KEY,
        "iterations": 4096,
        **changes,
    }
    return UserScramCredentialRecord(**fields)  # type: ignore[arg-type]  # test keywords


def replay_batch(records: list[Record], image: MetadataImage | None = None) -> MetadataImage:
    """`records` as one batch on `image` (default `BASE`)."""
    delta = MetadataDelta(BASE if image is None else image)
    delta.replay_all(records)
    delta.finish_batch()
    return delta.apply(EMPTY_PROVENANCE)


BASE_RECORDS: list[Record] = [
    _acl(id=ACL_1),
    _scram(name="bob", mechanism=SHA512, stored_key=b"s" * 64, server_key=b"v" * 64),
]
BASE = replay_batch(BASE_RECORDS, EMPTY_IMAGE)

REFUSED: list[tuple[str, type[ReplayError], list[Record]]] = [
    ("acl.id-unique", AclReplayError, [_acl(id=ACL_1)]),
    ("acl.id-unique", AclReplayError, [_acl(), _acl(principal="User:bob")]),
    ("acl.exists", AclReplayError, [RemoveAccessControlEntryRecord(id=ACL_2)]),
    (
        "acl.exists",
        AclReplayError,
        [RemoveAccessControlEntryRecord(id=ACL_1), RemoveAccessControlEntryRecord(id=ACL_1)],
    ),
    ("acl.resource-type", AclReplayError, [_acl(resource_type=ResourceType.UNKNOWN)]),
    ("acl.resource-type", AclReplayError, [_acl(resource_type=ResourceType.ANY)]),
    ("acl.resource-name", AclReplayError, [_acl(resource_name="")]),
    ("acl.pattern", AclReplayError, [_acl(pattern_type=PatternType.MATCH)]),
    ("acl.pattern", AclReplayError, [_acl(pattern_type=PatternType.ANY)]),
    ("acl.pattern", AclReplayError, [_acl(pattern_type=PatternType.UNKNOWN)]),
    (
        "acl.cluster-resource",
        AclReplayError,
        [_acl(resource_type=ResourceType.CLUSTER, resource_name="my-cluster")],
    ),
    (
        "acl.cluster-resource",
        AclReplayError,
        [_acl(resource_type=ResourceType.CLUSTER, resource_name="*")],
    ),
    (
        "acl.cluster-resource",
        AclReplayError,
        [
            _acl(
                resource_type=ResourceType.CLUSTER,
                resource_name="kafka",
                pattern_type=PatternType.PREFIXED,
            )
        ],
    ),
    ("acl.operation", AclReplayError, [_acl(operation=AclOperation.ANY)]),
    ("acl.operation", AclReplayError, [_acl(operation=AclOperation.UNKNOWN)]),
    ("acl.permission", AclReplayError, [_acl(permission_type=AclPermissionType.ANY)]),
    ("acl.permission", AclReplayError, [_acl(permission_type=AclPermissionType.UNKNOWN)]),
    ("acl.principal", AclReplayError, [_acl(principal="alice")]),
    ("acl.principal", AclReplayError, [_acl(principal="User:")]),
    ("acl.principal", AclReplayError, [_acl(principal=":alice")]),
    ("acl.principal", AclReplayError, [_acl(principal="")]),
    ("acl.host", AclReplayError, [_acl(host="")]),
    ("acl.no-control-characters", AclReplayError, [_acl(resource_name="or\nders")]),
    ("acl.no-control-characters", AclReplayError, [_acl(principal="User:al\x1bice")]),
    ("acl.no-control-characters", AclReplayError, [_acl(host="10.0.0.1\r")]),
    ("acl.no-control-characters", AclReplayError, [_acl(principal="User:a\u2028b")]),
    ("acl.no-control-characters", AclReplayError, [_acl(resource_name="x\x00")]),
    ("acl.no-control-characters", AclReplayError, [_acl(host="\x85")]),
    ("scram.name", ScramReplayError, [_scram(name="")]),
    ("scram.name", ScramReplayError, [_scram(name="ali\nce")]),
    ("scram.name", ScramReplayError, [_scram(name="\x7f")]),
    ("scram.mechanism", ScramReplayError, [_scram(mechanism=ScramMechanism.UNKNOWN)]),
    ("scram.iterations", ScramReplayError, [_scram(iterations=4095)]),
    ("scram.iterations", ScramReplayError, [_scram(iterations=16385)]),
    ("scram.iterations", ScramReplayError, [_scram(iterations=0)]),
    ("scram.iterations", ScramReplayError, [_scram(iterations=-4096)]),
    ("scram.iterations", ScramReplayError, [_scram(iterations=2**62)]),
    ("scram.salt", ScramReplayError, [_scram(salt=b"")]),
    ("scram.key-size", ScramReplayError, [_scram(stored_key=b"k" * 31)]),
    ("scram.key-size", ScramReplayError, [_scram(server_key=b"k" * 33)]),
    ("scram.key-size", ScramReplayError, [_scram(stored_key=b"")]),
    ("scram.key-size", ScramReplayError, [_scram(mechanism=SHA512)]),  # 32-byte keys
    (
        "scram.key-size",
        ScramReplayError,
        [_scram(stored_key=b"k" * 64, server_key=b"k" * 64)],  # 64-byte keys for SHA-256
    ),
    (
        "scram.exists",
        ScramReplayError,
        [RemoveUserScramCredentialRecord(name="alice", mechanism=SHA256)],
    ),
    (
        "scram.exists",
        ScramReplayError,
        [RemoveUserScramCredentialRecord(name="bob", mechanism=SHA256)],
    ),
    (
        "scram.exists",
        ScramReplayError,
        [
            RemoveUserScramCredentialRecord(name="bob", mechanism=SHA512),
            RemoveUserScramCredentialRecord(name="bob", mechanism=SHA512),
        ],
    ),
]

SECURITY_RULES = {rule for rule in RULES if rule.startswith(("acl.", "scram."))}


@pytest.mark.parametrize(
    ("rule", "error", "records"),
    REFUSED,
    ids=[f"{rule}-{i}" for i, (rule, _, _) in enumerate(REFUSED)],
)
def test_a_record_breaking_a_security_rule_is_refused_naming_the_rule(
    rule: str, error: type[ReplayError], records: list[Record]
) -> None:
    with pytest.raises(error) as caught:
        replay_batch(records)
    assert caught.value.rule == rule
    assert str(caught.value).endswith(f"(rule {rule})")
    # The message names what is wrong but never a credential's secret bytes.
    text = str(caught.value)
    assert repr(SECRET_SALT)[2:-1] not in text and "KKKK" not in text


def test_every_security_rule_has_a_refused_example() -> None:
    assert {rule for rule, _, _ in REFUSED} == SECURITY_RULES
    assert {"acl.pattern", "scram.iterations", "acl.id-unique"} <= SECURITY_RULES


def test_a_located_error_names_offset_record_and_rule() -> None:
    with pytest.raises(ScramReplayError) as caught:
        replay_batch([_scram(iterations=100)])
    caught.value.locate(42, caught.value.record or _scram())
    assert str(caught.value) == (
        "the UserScramCredentialRecord at offset 42 breaks rule scram.iterations: user 'alice' "
        "SCRAM-SHA-256: 100 iterations is outside 4096..16384"
    )


ACCEPTED: list[tuple[str, list[Record]]] = [
    ("another ACL", [_acl()]),
    ("the same ACL under another id", [_acl(id=ACL_2)]),
    ("prefixed topic ACL", [_acl(pattern_type=PatternType.PREFIXED, resource_name="ord")]),
    ("wildcard topic ACL", [_acl(resource_name="*")]),
    # As Kafka (and the controller): a PREFIXED '*' is stored; it matches names starting '*'.
    ("prefixed '*'", [_acl(resource_name="*", pattern_type=PatternType.PREFIXED)]),
    (
        "prefixed cluster ACL",
        [
            _acl(
                resource_type=ResourceType.CLUSTER,
                resource_name="kafka-cluster",
                pattern_type=PatternType.PREFIXED,
            )
        ],
    ),
    ("wildcard principal", [_acl(principal="User:*")]),
    ("principal with a colon in its name", [_acl(principal="User:CN=a:b,O=c")]),
    ("another principal type", [_acl(principal="Group:admins")]),
    (
        "cluster ACL",
        [_acl(resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster")],
    ),
    (
        "namespace ACL, prefixed",
        [
            _acl(
                resource_type=ResourceType.NAMESPACE,
                resource_name="org:apa",
                pattern_type=PatternType.PREFIXED,
            )
        ],
    ),
    ("an ACL on a topic that does not exist", [_acl(resource_name="not-yet")]),
    (
        "every concrete type and operation",
        [
            _acl(
                id=Uuid(bytes([n, o] + [9] * 14)),
                resource_type=rt,
                resource_name="kafka-cluster" if rt == ResourceType.CLUSTER else "x",
                operation=op,
                permission_type=AclPermissionType.DENY,
            )
            for n, rt in enumerate(ResourceType)
            if rt not in (ResourceType.UNKNOWN, ResourceType.ANY)
            for o, op in enumerate(AclOperation)
            if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
        ],
    ),
    ("IPv6 host", [_acl(host="::1")]),
    ("unicode names", [_acl(resource_name="caf\u00e9", principal="User:\u00e9l\u00e8ve")]),
    ("remove an ACL", [RemoveAccessControlEntryRecord(id=ACL_1)]),
    (
        "remove and create again under the same id, in one batch",
        [RemoveAccessControlEntryRecord(id=ACL_1), _acl(id=ACL_1, principal="User:carol")],
    ),
    ("credential at 4096 iterations", [_scram(iterations=MIN_ITERATIONS)]),
    ("credential at 16384 iterations", [_scram(iterations=MAX_ITERATIONS)]),
    ("a one-byte salt", [_scram(salt=b"\x00")]),
    (
        "SHA-512 credential",
        [_scram(mechanism=SHA512, stored_key=b"s" * 64, server_key=b"v" * 64)],
    ),
    (
        "a credential replaced",
        [_scram(name="bob", mechanism=SHA512, stored_key=b"n" * 64, server_key=b"m" * 64)],
    ),
    ("remove a credential", [RemoveUserScramCredentialRecord(name="bob", mechanism=SHA512)]),
    (
        "remove a credential set in the same batch",
        [_scram(), RemoveUserScramCredentialRecord(name="alice", mechanism=SHA256)],
    ),
    ("a name with spaces and unicode", [_scram(name="J\u00fcrgen M\u00fcller")]),
]


@pytest.mark.parametrize(("name", "records"), ACCEPTED, ids=[n for n, _ in ACCEPTED])
def test_records_inside_every_security_rule_replay(name: str, records: list[Record]) -> None:
    image = replay_batch(records)
    again = replay_batch(list(image.write()), EMPTY_IMAGE)
    assert again.same_state(image)


def test_replay_keeps_what_the_records_say() -> None:
    image = replay_batch([_acl(), _scram(iterations=8192)])
    assert image.acls.get(ACL_2) == _acl()
    assert [a.id for a in image.acls.sorted()] == [ACL_1, ACL_2]
    assert image.scram.users() == ["alice", "bob"]
    credential = image.scram.get("alice", SHA256)
    assert credential is not None and credential.iterations == 8192
    replaced = replay_batch(
        [
            _scram(
                name="bob",
                mechanism=SHA512,
                iterations=5000,
                stored_key=b"n" * 64,
                server_key=b"m" * 64,
            )
        ]
    )
    bob = replaced.scram.get("bob", SHA512)
    assert bob is not None and bob.iterations == 5000 and bob.stored_key == b"n" * 64
    gone = replay_batch(
        [
            RemoveAccessControlEntryRecord(id=ACL_1),
            RemoveUserScramCredentialRecord(name="bob", mechanism=SHA512),
        ]
    )
    assert not gone.acls.by_id and not gone.scram.credentials and gone.is_empty


def test_a_refused_security_record_leaves_the_base_image_as_it_was() -> None:
    delta = MetadataDelta(BASE)
    delta.replay(_acl())
    with pytest.raises(AclReplayError):
        delta.replay(_acl(principal="nobody"))
    assert BASE.acls.get(ACL_2) is None
    assert delta.acl(ACL_2) == _acl()


def test_the_image_areas_make_images_differ() -> None:
    assert not replay_batch([_acl()]).same_state(BASE)
    assert not replay_batch([_scram()]).same_state(BASE)
    assert not BASE.is_empty


def test_a_real_credential_replays() -> None:
    for mechanism in (SHA256, SHA512):
        made = new_credential(mechanism, "pa\u00dfword", iterations=4096)
        record = UserScramCredentialRecord(
            name="alice",
            mechanism=mechanism,
            salt=made.salt,
            stored_key=made.stored_key,
            server_key=made.server_key,
            iterations=made.iterations,
        )
        assert scram_problem(record) is None
        assert replay_batch([record]).scram.get("alice", mechanism) == record


_CONTROL = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]] + ["\u2028", "\u2029"]
_text = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(
    ["*", "kafka-cluster", "User:*", "User:alice", "alice", ":", "", "x:"]
)


def _reference_acl_ok(acl: AccessControlEntryRecord) -> bool:
    """The rules, restated plainly."""
    texts = (acl.resource_name, acl.principal, acl.host)
    kind, _, name = acl.principal.partition(":")
    return (
        not any(c in text for text in texts for c in _CONTROL)
        and acl.resource_type not in (ResourceType.UNKNOWN, ResourceType.ANY)
        and acl.resource_name != ""
        and acl.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
        and (acl.resource_type != ResourceType.CLUSTER or acl.resource_name == "kafka-cluster")
        and acl.operation not in (AclOperation.UNKNOWN, AclOperation.ANY)
        and acl.permission_type in (AclPermissionType.ALLOW, AclPermissionType.DENY)
        and ":" in acl.principal
        and kind != ""
        and name != ""
        and acl.host != ""
    )


_acls = st.builds(
    _acl,
    resource_type=st.sampled_from(ResourceType),
    resource_name=_text,
    pattern_type=st.sampled_from(PatternType),
    principal=_text,
    host=_text,
    operation=st.sampled_from(AclOperation),
    permission_type=st.sampled_from(AclPermissionType),
)


@given(acl=_acls)
def test_acl_rules_match_a_plain_reference(acl: AccessControlEntryRecord) -> None:
    problem = acl_problem(acl)
    assert (problem is None) == _reference_acl_ok(acl)
    if problem is not None:
        assert problem[0] in RULES
        with pytest.raises(AclReplayError) as caught:
            replay_batch([acl])
        assert caught.value.rule == problem[0]
    else:
        assert replay_batch([acl]).acls.get(acl.id) == acl


@given(
    name=_text,
    mechanism=st.sampled_from(ScramMechanism),
    salt=st.binary(max_size=3),
    key_size=st.sampled_from([0, 1, 31, 32, 33, 63, 64, 65]),
    iterations=st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.integers(min_value=4000, max_value=17000),
)
def test_scram_rules_match_a_plain_reference(
    name: str, mechanism: ScramMechanism, salt: bytes, key_size: int, iterations: int
) -> None:
    record = _scram(
        name=name,
        mechanism=mechanism,
        salt=salt,
        stored_key=b"k" * key_size,
        server_key=b"k" * key_size,
        iterations=iterations,
    )
    expected_ok = (
        name != ""
        and not any(c in name for c in _CONTROL)
        and mechanism in (SHA256, SHA512)
        and 4096 <= iterations <= 16384
        and salt != b""
        and key_size == {SHA256: 32, SHA512: 64}.get(mechanism)
    )
    assert (scram_problem(record) is None) == expected_ok


def test_a_removal_of_an_unknown_credential_names_the_user_not_a_key() -> None:
    with pytest.raises(ScramReplayError, match="user 'carol' has no SCRAM-SHA-512 credential"):
        replay_batch([RemoveUserScramCredentialRecord(name="carol", mechanism=SHA512)])
