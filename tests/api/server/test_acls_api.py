"""ACL and SCRAM credential APIs: the controller's rules, the handlers' bytes, real clients.

The controller is checked against Kafka's rules (`AclControlManager`, `ScramControlManager`)
and, for filters, against a plain reference of `AclBindingFilter.matches`. The v0 frames are
written byte by byte from Kafka 3.9's JSON definitions. kafka-python and confluent-kafka drive
a real server; every change they make must be in the log, as the connection's principal.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkType
from confluent_kafka.admin import ScramMechanism as CkMechanism
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from api.client import AdminClient as OurClient
from api.protocol import codec
from api.protocol.connection import Connection, Request
from api.server.kafka.base import Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.server.server import MetadataServer
from api.service.service import MetadataService
from metadata_log.reader import LogReader
from records.codec import RecordCodec
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ScramMechanism,
    UserScramCredentialRecord,
)
from records.model import ResourceType as Rt
from records.uuids import Uuid
from replay.controller.acls import MAX_NAME_LENGTH, MAX_RECORDS_PER_REQUEST
from replay.controller.authorizer import Authorizer, AuthorizerConfig
from replay.controller.commands import (
    AclBinding,
    AclFilter,
    ScramDeletion,
    ScramUpsertion,
)
from replay.controller.controller import Controller
from replay.controller.credentials import MAX_USER_NAME_LENGTH
from replay.controller.errors import ApiError, ErrorCode, StorageError
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.security.scram_keys import new_credential, salted_password
from tests.support.server_thread import running_server

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def acl(
    name: str = "orders",
    *,
    resource_type: int = Rt.TOPIC,
    pattern_type: int = PatternType.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    operation: int = AclOperation.READ,
    permission_type: int = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern_type,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission_type,
    )


def applied(image: MetadataImage, records: tuple[Any, ...]) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    delta.finish_batch()
    return delta.apply(
        Provenance(offset=image.provenance.offset + len(records), epoch=1, timestamp=0)
    )


def with_acls(*bindings: AclBinding) -> MetadataImage:
    result = Controller().create_acls(EMPTY_IMAGE, list(bindings))
    assert all(r.outcome.ok for r in result.response)
    return applied(EMPTY_IMAGE, result.records)


# ----------------------------------------------------------------------------- CreateAcls


def test_each_created_acl_gets_a_fresh_id_and_the_fields_it_was_given() -> None:
    bindings = [
        acl(),
        acl("org:apache", resource_type=Rt.NAMESPACE, pattern_type=PatternType.PREFIXED),
        acl("kafka-cluster", resource_type=Rt.CLUSTER, operation=AclOperation.ALTER),
        acl("*", principal="User:*", host="192.0.2.7", permission_type=AclPermissionType.DENY),
        acl("g", resource_type=Rt.GROUP, host="2001:db8::7"),
    ]
    result = Controller().create_acls(EMPTY_IMAGE, bindings)
    assert [r.outcome.ok for r in result.response] == [True] * 5
    records = [r for r in result.records if isinstance(r, AccessControlEntryRecord)]
    assert len(records) == len(result.records)
    assert len({r.id for r in records}) == 5 and Uuid.ZERO not in {r.id for r in records}
    image = applied(EMPTY_IMAGE, result.records)
    assert sorted(
        (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation)
        for a in image.acls.by_id.values()
    ) == sorted(
        (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation)
        for b in bindings
    )


def test_an_acl_that_exists_or_repeats_succeeds_without_a_record() -> None:
    image = with_acls(acl())
    result = Controller().create_acls(image, [acl(), acl("other"), acl("other")])
    assert all(r.outcome.ok for r in result.response)
    assert [r.resource_name for r in result.records] == ["other"]  # type: ignore[attr-defined]


def test_a_colliding_random_id_is_drawn_again() -> None:
    image = with_acls(acl())
    (taken,) = image.acls.by_id
    fresh = Uuid.random()
    ids = iter([taken, Uuid.ZERO, fresh])
    result = Controller(new_id=lambda: next(ids)).create_acls(image, [acl("x")])
    assert [r.id for r in result.records] == [fresh]  # type: ignore[attr-defined]


def test_an_id_drawn_twice_in_one_request_is_drawn_again() -> None:
    # Two ACLs of one batch under one id: the second record would replace the first.
    same, fresh = Uuid.random(), Uuid.random()
    ids = iter([same, same, fresh])
    result = Controller(new_id=lambda: next(ids)).create_acls(EMPTY_IMAGE, [acl("x"), acl("y")])
    assert [r.id for r in result.records] == [same, fresh]  # type: ignore[attr-defined]
    assert len(applied(EMPTY_IMAGE, result.records).acls.by_id) == 2


BAD_BINDINGS = [
    (acl(resource_type=Rt.UNKNOWN), "resourceType"),
    (acl(resource_type=Rt.ANY), "resourceType"),
    (acl(resource_type=99), "resourceType 99"),
    (acl(pattern_type=PatternType.ANY), "patternType"),
    (acl(pattern_type=PatternType.MATCH), "patternType"),
    (acl(pattern_type=PatternType.UNKNOWN), "patternType"),
    (acl(pattern_type=-1), "patternType"),
    (acl(operation=AclOperation.ANY), "operation"),
    (acl(operation=AclOperation.UNKNOWN), "operation"),
    (acl(operation=127), "operation"),
    (acl(permission_type=AclPermissionType.ANY), "permissionType"),
    (acl(permission_type=AclPermissionType.UNKNOWN), "permissionType"),
    (acl(""), "Resource name should not be empty"),
    (acl("   "), "resource name cannot be empty"),
    (acl("t\x00"), "control character"),
    (acl("t\nUser:mallory ALLOW"), "control character"),
    (acl("x" * 1_000_000), "longer than 1000"),
    (acl("\ud800"), "not valid Unicode"),
    (acl("other", resource_type=Rt.CLUSTER), "kafka-cluster"),
    (acl(principal="alice"), "User:<name>"),
    (acl(principal="User:"), "User:<name>"),
    (acl(principal="Group:admins"), "User:<name>"),
    (acl(principal="User:a\tb"), "control character"),
    (acl(principal=""), "principal cannot be empty"),
    (acl(host=""), "host cannot be empty"),
    (acl(host="localhost"), "not an IP address"),
    (acl(host="10.0.0.256"), "not an IP address"),
    (acl(host="::0001"), "write '::1'"),
    (acl(host="h" * 10_000), "longer than"),
    (acl(host="1" * 65), "longer than 64"),
]


@pytest.mark.parametrize(("binding", "message"), BAD_BINDINGS)
def test_a_bad_acl_is_refused_alone_with_invalid_request(binding: AclBinding, message: str) -> None:
    result = Controller().create_acls(EMPTY_IMAGE, [acl("before"), binding, acl("after")])
    first, refused, last = result.response
    assert first.outcome.ok and last.outcome.ok
    assert refused.outcome.error_code == ErrorCode.INVALID_REQUEST
    assert refused.outcome.error_message is not None and message in refused.outcome.error_message
    assert len(refused.outcome.error_message) <= 600
    assert [r.resource_name for r in result.records] == ["before", "after"]  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(max_size=30),
    principal=st.sampled_from(["User:", "user:", "", "Group:"]).flatmap(
        lambda prefix: st.text(max_size=12).map(lambda rest: prefix + rest)
    ),
    host=st.sampled_from(["*", "10.0.0.1", "::1"]) | st.text(max_size=12),
    codes=st.tuples(*[st.integers(-128, 127)] * 4),
)
def test_whatever_a_client_sends_is_refused_or_stored_intact(
    name: str, principal: str, host: str, codes: tuple[int, int, int, int]
) -> None:
    resource_type, pattern_type, operation, permission = codes
    binding = acl(
        name,
        resource_type=resource_type,
        pattern_type=pattern_type,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )
    result = Controller().create_acls(EMPTY_IMAGE, [binding])
    (answer,) = result.response
    if not answer.outcome.ok:
        assert answer.outcome.error_code == ErrorCode.INVALID_REQUEST and not result.records
        return
    (record,) = result.records
    codec = RecordCodec()
    assert codec.decode_record(*codec.encode_record(record)) == record
    assert applied(EMPTY_IMAGE, result.records).acls.get(record.id) == record  # type: ignore[attr-defined]
    assert principal.startswith("User:") and name.strip() and "\n" not in name


def test_a_request_creates_at_most_the_bounded_number_of_acls() -> None:
    bindings = [acl(f"t{i}") for i in range(MAX_RECORDS_PER_REQUEST + 2)]
    result = Controller().create_acls(EMPTY_IMAGE, [*bindings, bindings[0]])
    codes = [r.outcome.error_code for r in result.response]
    assert codes[:MAX_RECORDS_PER_REQUEST] == [ErrorCode.NONE] * MAX_RECORDS_PER_REQUEST
    assert codes[MAX_RECORDS_PER_REQUEST:-1] == [ErrorCode.INVALID_REQUEST] * 2
    assert codes[-1] == ErrorCode.NONE  # a repeat needs no record
    assert len(result.records) == MAX_RECORDS_PER_REQUEST


# ----------------------------------------------------------------------------- filters


def reference_matches(f: AclFilter, a: AccessControlEntryRecord) -> bool:
    """Kafka's AclBindingFilter.matches, spelled out case by case."""
    type_ok = f.resource_type in (Rt.ANY, a.resource_type)
    if f.pattern_type == PatternType.ANY:
        pattern_ok = f.resource_name is None or f.resource_name == a.resource_name
    elif f.pattern_type == PatternType.MATCH:
        if f.resource_name is None:
            pattern_ok = True
        elif a.pattern_type == PatternType.LITERAL:
            pattern_ok = a.resource_name in (f.resource_name, "*")
        else:
            pattern_ok = f.resource_name[: len(a.resource_name)] == a.resource_name
    else:
        pattern_ok = f.pattern_type == a.pattern_type and (
            f.resource_name is None or f.resource_name == a.resource_name
        )
    entry_ok = (
        (f.principal is None or f.principal == a.principal)
        and (f.host is None or f.host == a.host)
        and (f.operation in (AclOperation.ANY, a.operation))
        and (f.permission_type in (AclPermissionType.ANY, a.permission_type))
    )
    return type_ok and pattern_ok and entry_ok


NAMES = st.sampled_from(["*", "o", "or", "orders", "org:apache", "org:apache:t", "kafka-cluster"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1"])
STORED_TYPES = st.sampled_from([Rt.TOPIC, Rt.GROUP, Rt.NAMESPACE])
OPERATIONS = st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL])
PERMISSIONS = st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])

BINDINGS = st.builds(
    acl,
    NAMES,
    resource_type=STORED_TYPES,
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principal=PRINCIPALS,
    host=HOSTS,
    operation=OPERATIONS,
    permission_type=PERMISSIONS,
)
FILTERS = st.builds(
    AclFilter,
    resource_type=st.sampled_from([Rt.ANY, Rt.TOPIC, Rt.GROUP, Rt.NAMESPACE]),
    resource_name=st.none() | NAMES | st.sampled_from(["orders-2", "org:apache:t:x"]),
    pattern_type=st.sampled_from(
        [PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]
    ),
    principal=st.none() | PRINCIPALS,
    host=st.none() | HOSTS,
    operation=st.sampled_from([AclOperation.ANY]) | OPERATIONS,
    permission_type=st.sampled_from([AclPermissionType.ANY]) | PERMISSIONS,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(BINDINGS, max_size=12), st.lists(FILTERS, min_size=1, max_size=3))
def test_describe_and_delete_match_as_kafkas_filters(
    bindings: list[AclBinding], filters: list[AclFilter]
) -> None:
    image = with_acls(*bindings)
    stored = list(image.acls.by_id.values())
    for f in filters:
        expected = {a.id for a in stored if reference_matches(f, a)}
        described = Controller.describe_acls(image, f)
        assert len(described) == len(expected)
    result = Controller.delete_acls(image, filters)
    for f, answer in zip(filters, result.response, strict=True):
        assert answer.outcome.ok
        assert len(answer.matching) == sum(reference_matches(f, a) for a in stored)
    removed = {r.id for r in result.records}  # type: ignore[attr-defined]
    assert removed == {a.id for a in stored if any(reference_matches(f, a) for f in filters)}
    assert len(removed) == len(result.records)  # matched by two filters, removed once
    after = applied(image, result.records)
    assert {a.id for a in after.acls.by_id.values()} == {a.id for a in stored} - removed


@pytest.mark.parametrize(
    "bad",
    [
        AclFilter(resource_type=Rt.UNKNOWN),
        AclFilter(pattern_type=PatternType.UNKNOWN),
        AclFilter(operation=AclOperation.UNKNOWN),
        AclFilter(permission_type=AclPermissionType.UNKNOWN),
        AclFilter(resource_type=42),
        AclFilter(operation=-7),
    ],
)
def test_a_filter_with_an_unknown_part_is_refused_alone(bad: AclFilter) -> None:
    image = with_acls(acl(), acl("other"))
    result = Controller.delete_acls(image, [bad, AclFilter(resource_name="other")])
    refused, ok = result.response
    assert refused.outcome.error_code == ErrorCode.INVALID_REQUEST and refused.matching == ()
    assert ok.outcome.ok and [b.resource_name for b in ok.matching] == ["other"]
    assert len(result.records) == 1
    with pytest.raises(ApiError) as caught:
        Controller.describe_acls(image, bad)
    assert caught.value.error_code == ErrorCode.INVALID_REQUEST


def filter_of(field: str, text: str) -> AclFilter:
    """A filter naming `text` as its resource name, principal or host."""
    return AclFilter(
        resource_name=text if field == "resource_name" else None,
        principal=text if field == "principal" else None,
        host=text if field == "host" else None,
    )


@pytest.mark.parametrize("field", ["resource_name", "principal", "host"])
def test_a_filters_strings_may_be_as_long_as_a_stored_acls(field: str) -> None:
    image = with_acls(acl())
    longest = filter_of(field, "x" * MAX_NAME_LENGTH)
    assert Controller.describe_acls(image, longest) == []
    result = Controller.delete_acls(image, [longest, filter_of(field, "x" * 1001)])
    fits, too_long = result.response
    assert fits.outcome.ok and result.records == ()
    assert too_long.outcome.error_code == ErrorCode.INVALID_REQUEST
    assert too_long.outcome.error_message is not None
    assert "longer than 1000" in too_long.outcome.error_message
    with pytest.raises(ApiError, match="longer than 1000"):
        Controller.describe_acls(image, filter_of(field, "x" * 1001))


def many_acls(count: int, *, principal: str) -> list[AccessControlEntryRecord]:
    """`count` distinct ALLOW READ ACLs of one principal (records: no request limit)."""
    return [
        AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=Rt.TOPIC,
            resource_name=f"t{i}",
            pattern_type=PatternType.LITERAL,
            principal=principal,
            host="*",
            operation=AclOperation.READ,
            permission_type=AclPermissionType.ALLOW,
        )
        for i in range(count)
    ]


def test_a_request_deletes_at_most_the_bounded_number_of_acls() -> None:
    half = MAX_RECORDS_PER_REQUEST // 2
    image = applied(
        EMPTY_IMAGE,
        (
            *many_acls(MAX_RECORDS_PER_REQUEST + 1, principal="User:many"),
            *many_acls(half, principal="User:alice"),
            *many_acls(half, principal="User:bob"),
        ),
    )
    alice, bob, many = (AclFilter(principal=f"User:{who}") for who in ("alice", "bob", "many"))
    # one filter over the bound: refused, nothing written for it
    result = Controller.delete_acls(image, [many, bob])
    refused, ok = result.response
    assert refused.outcome.error_code == ErrorCode.INVALID_REQUEST and refused.matching == ()
    assert ok.outcome.ok and len(ok.matching) == half == len(result.records)
    # exactly the bound, over two filters (a repeat counts once): done
    result = Controller.delete_acls(image, [alice, bob, alice])
    assert all(r.outcome.ok for r in result.response)
    assert len(result.records) == MAX_RECORDS_PER_REQUEST
    # the bound is on the whole request: the filter that passes it is refused
    result = Controller.delete_acls(image, [bob, alice, AclFilter(resource_name="t0")])
    assert [r.outcome.ok for r in result.response] == [True, True, False]
    assert len(result.records) == MAX_RECORDS_PER_REQUEST


def test_deleting_what_matches_nothing_writes_nothing() -> None:
    image = with_acls(acl())
    result = Controller.delete_acls(image, [AclFilter(principal="User:nobody")])
    assert result.records == () and result.response[0].outcome.ok


# ----------------------------------------------------------------------------- SCRAM credentials


def upsertion(
    name: str = "alice",
    *,
    mechanism: int = SHA256,
    iterations: int = 4096,
    password: bytes = b"secret",
    salt: bytes = b"0123456789abcdef",
) -> ScramUpsertion:
    known = ScramMechanism(mechanism) if mechanism in (1, 2) else SHA256
    return ScramUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(known, password, salt, iterations),
    )


def test_an_upsertion_stores_the_keys_of_the_password_never_the_salted_password() -> None:
    up = upsertion(mechanism=SHA512, iterations=8192)
    result = Controller.alter_user_scram_credentials(EMPTY_IMAGE, [], [up])
    assert [(r.user, r.outcome.ok) for r in result.response] == [("alice", True)]
    (record,) = result.records
    expected = new_credential(SHA512, "secret", iterations=8192, salt=b"0123456789abcdef")
    assert record == UserScramCredentialRecord(
        name="alice",
        mechanism=SHA512,
        salt=expected.salt,
        stored_key=expected.stored_key,
        server_key=expected.server_key,
        iterations=8192,
    )
    assert up.salted_password not in (record.salt, record.stored_key, record.server_key)
    assert repr(up.salted_password) not in repr(up) and repr(up.salt) not in repr(up)


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (upsertion(iterations=4095), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (upsertion(iterations=100), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (upsertion(iterations=16385), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        (upsertion(mechanism=0), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsertion(mechanism=3), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsertion(""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        (upsertion("a\nb"), ErrorCode.UNACCEPTABLE_CREDENTIAL, "control character"),
        (upsertion("u" * 5000), ErrorCode.UNACCEPTABLE_CREDENTIAL, "longer than"),
        (upsertion(salt=b""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt"),
        (upsertion(salt=b"s" * 5000), ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt"),
        (
            ScramUpsertion(
                name="alice", mechanism=SHA256, iterations=4096, salt=b"s", salted_password=b"x"
            ),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "32 bytes",
        ),
        (ScramDeletion(name="alice", mechanism=SHA256), ErrorCode.RESOURCE_NOT_FOUND, "exist"),
        (ScramDeletion(name="", mechanism=SHA256), ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty"),
        (ScramDeletion(name="bob", mechanism=9), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown"),
    ],
)
def test_kafkas_per_user_errors(
    change: ScramUpsertion | ScramDeletion, code: ErrorCode, message: str
) -> None:
    deletions = [change] if isinstance(change, ScramDeletion) else []
    upsertions = [change] if isinstance(change, ScramUpsertion) else []
    result = Controller.alter_user_scram_credentials(
        EMPTY_IMAGE, deletions, [*upsertions, upsertion("carol")]
    )
    refused, ok = result.response
    assert refused.user == change.name and refused.outcome.error_code == code
    assert refused.outcome.error_message is not None and message in refused.outcome.error_message
    assert ok.user == "carol" and ok.outcome.ok
    assert [r.name for r in result.records] == ["carol"]  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(max_size=20),
    mechanism=st.sampled_from([1, 2]) | st.integers(-128, 127),
    iterations=st.integers(4000, 17000) | st.integers(-(2**31), 2**31 - 1),
    salt=st.binary(min_size=1, max_size=40) | st.binary(max_size=2000),
    salted=st.sampled_from([32, 64]).map(lambda n: bytes(range(n))) | st.binary(max_size=70),
)
def test_whatever_an_upsertion_carries_is_refused_with_kafkas_codes_or_stored(
    name: str, mechanism: int, iterations: int, salt: bytes, salted: bytes
) -> None:
    up = ScramUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )
    result = Controller.alter_user_scram_credentials(EMPTY_IMAGE, [], [up])
    (answer,) = result.response
    assert answer.user == name
    if not answer.outcome.ok:
        assert answer.outcome.error_code in (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        )
        assert not result.records
        return
    (record,) = result.records
    assert isinstance(record, UserScramCredentialRecord)
    assert 4096 <= record.iterations <= 16384 and record.mechanism in (SHA256, SHA512)
    codec = RecordCodec()
    assert codec.decode_record(*codec.encode_record(record)) == record
    assert applied(EMPTY_IMAGE, result.records).scram.get(name, record.mechanism) == record


def test_a_user_named_twice_gets_duplicate_resource_and_nothing_is_written_for_it() -> None:
    image = applied(
        EMPTY_IMAGE,
        Controller.alter_user_scram_credentials(EMPTY_IMAGE, [], [upsertion("dave")]).records,
    )
    result = Controller.alter_user_scram_credentials(
        image,
        [ScramDeletion(name="dave", mechanism=SHA256), ScramDeletion(name="erin", mechanism=1)],
        [upsertion("dave"), upsertion("erin"), upsertion("erin"), upsertion("frank")],
    )
    outcomes = {r.user: r.outcome.error_code for r in result.response}
    assert outcomes == {
        "dave": ErrorCode.DUPLICATE_RESOURCE,
        "erin": ErrorCode.DUPLICATE_RESOURCE,
        "frank": ErrorCode.NONE,
    }
    assert [r.name for r in result.records] == ["frank"]  # type: ignore[attr-defined]


def test_a_user_deleted_twice_or_three_times_gets_duplicate_resource_and_keeps_it() -> None:
    image = applied(
        EMPTY_IMAGE,
        Controller.alter_user_scram_credentials(
            EMPTY_IMAGE, [], [upsertion("dave"), upsertion("erin")]
        ).records,
    )
    dave, erin = (ScramDeletion(name=name, mechanism=SHA256) for name in ("dave", "erin"))
    result = Controller.alter_user_scram_credentials(image, [dave, dave, erin, erin, erin], [])
    assert [(r.user, r.outcome.error_code) for r in result.response] == [
        ("dave", ErrorCode.DUPLICATE_RESOURCE),
        ("erin", ErrorCode.DUPLICATE_RESOURCE),
    ]
    assert result.records == ()


def test_the_largest_credential_kafka_allows_is_stored_and_one_more_is_refused() -> None:
    longest_name = "u" * MAX_USER_NAME_LENGTH
    largest = [
        upsertion(longest_name),
        upsertion("bob", iterations=16384),
        upsertion("carol", salt=b"s" * 1024),  # docs/controller.md: "over 1024 bytes"
    ]
    result = Controller.alter_user_scram_credentials(EMPTY_IMAGE, [], largest)
    assert all(r.outcome.ok for r in result.response) and len(result.records) == 3
    # the longest user name is still an ACL's principal
    assert with_acls(acl(principal=f"User:{longest_name}")).acls.by_id
    one_more = [
        upsertion(longest_name + "u"),
        upsertion("bob", iterations=16385),
        upsertion("carol", salt=b"s" * 1025),
    ]
    result = Controller.alter_user_scram_credentials(EMPTY_IMAGE, [], one_more)
    assert [r.outcome.error_code for r in result.response] == [
        ErrorCode.UNACCEPTABLE_CREDENTIAL
    ] * 3
    assert result.records == ()


def test_delete_then_describe_credentials() -> None:
    records = Controller.alter_user_scram_credentials(
        EMPTY_IMAGE,
        [],
        [upsertion("alice"), upsertion("bob", mechanism=SHA512, iterations=10_000)],
    ).records
    image = applied(EMPTY_IMAGE, records)
    image = applied(
        image,
        Controller.alter_user_scram_credentials(
            image, [], [upsertion("alice", mechanism=SHA512)]
        ).records,
    )
    everyone = Controller.describe_user_scram_credentials(image, None)
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credentials]) for r in everyone] == [
        ("alice", [(SHA256, 4096), (SHA512, 4096)]),
        ("bob", [(SHA512, 10_000)]),
    ]
    assert Controller.describe_user_scram_credentials(image, []) == everyone
    named = Controller.describe_user_scram_credentials(image, ["bob", "zed", "alice", "alice"])
    assert [(r.user, r.outcome.error_code) for r in named] == [
        ("bob", ErrorCode.NONE),
        ("zed", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", ErrorCode.DUPLICATE_RESOURCE),
    ]
    deleted = Controller.alter_user_scram_credentials(
        image, [ScramDeletion(name="bob", mechanism=SHA512)], []
    )
    assert deleted.records == (RemoveUserScramCredentialRecord(name="bob", mechanism=SHA512),)
    after = applied(image, deleted.records)
    assert [r.user for r in Controller.describe_user_scram_credentials(after, None)] == ["alice"]


# ----------------------------------------------------------------------------- the handlers


def _i8(value: int) -> bytes:
    return struct.pack(">b", value)


def _i16(value: int) -> bytes:
    return struct.pack(">h", value)


def _i32(value: int) -> bytes:
    return struct.pack(">i", value)


def _str(value: str | None) -> bytes:
    if value is None:
        return _i16(-1)
    data = value.encode()
    return _i16(len(data)) + data


def _array(*items: bytes) -> bytes:
    return _i32(len(items)) + b"".join(items)


CORRELATION = 77


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    payload = _i16(api_key) + _i16(version) + _i32(CORRELATION) + _str("sarama") + body
    return _i32(len(payload)) + payload


def _response(body: bytes) -> bytes:
    payload = _i32(CORRELATION) + body
    return _i32(len(payload)) + payload


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    opened = MetadataService.open(tmp_path / "log")
    yield opened
    opened.close()


SESSION = Session(principal="User:admin", host="10.1.2.3")
# The ACL APIs need an authorizer (SECURITY_DISABLED without one); the session's principal is a
# super user, so what is tested here is the APIs themselves.
ADMIN_AUTHORIZER = Authorizer(AuthorizerConfig(super_users=frozenset({SESSION.principal})))


def _answer(service: MetadataService, frame: bytes) -> bytes:
    (event,) = Connection().receive(frame)
    assert isinstance(event, Request), event
    listener = Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c")
    apis = KafkaApis(service, listener, ADMIN_AUTHORIZER)
    body = asyncio.run(apis.handle(event.request, SESSION))
    data = codec.encode_response(event.request.header.correlation_id, body)
    assert data == codec.encode_response_with_kio(event.request.header.correlation_id, body)
    return data


def test_v0_create_describe_delete_as_sarama_sends_them(service: MetadataService) -> None:
    def creation(name: str, principal: str) -> bytes:
        # resource type, name, principal, host, operation, permission (no pattern type in v0)
        return _i8(2) + _str(name) + _str(principal) + _str("*") + _i8(3) + _i8(3)

    created = _answer(
        service, _frame(30, 0, _array(creation("t0", "User:a"), creation("t0", "alice")))
    )
    message = (
        "principal 'alice' is not of the form User:<name>; write User:alice, or User:* for "
        "every user"
    )
    assert created == _response(_i32(0) + _array(_i16(0) + _str(None), _i16(42) + _str(message)))
    (stored,) = service.image.acls.by_id.values()
    assert stored.pattern_type == PatternType.LITERAL and stored.principal == "User:a"

    # A prefixed ACL is not LITERAL: a v0 filter (LITERAL) neither describes nor deletes it.
    asyncio.run(
        service.submit(
            lambda image: service.controller.create_acls(
                image, [acl("t", pattern_type=PatternType.PREFIXED, principal="User:a")]
            )
        )
    )
    filter_v0 = _i8(1) + _str(None) + _str("User:a") + _str(None) + _i8(1) + _i8(1)
    described = _answer(service, _frame(29, 0, filter_v0))
    entry = _str("User:a") + _str("*") + _i8(3) + _i8(3)
    assert described == _response(
        _i32(0) + _i16(0) + _str(None) + _array(_i8(2) + _str("t0") + _array(entry))
    )
    deleted = _answer(service, _frame(31, 0, _array(filter_v0)))
    matching = _i16(0) + _str(None) + _i8(2) + _str("t0") + entry
    assert deleted == _response(_i32(0) + _array(_i16(0) + _str(None) + _array(matching)))
    (left,) = service.image.acls.by_id.values()
    assert left.pattern_type == PatternType.PREFIXED


def test_v1_describe_with_an_unknown_filter_answers_invalid_request(
    service: MetadataService,
) -> None:
    body = _i8(0) + _str(None) + _i8(1) + _str(None) + _str(None) + _i8(1) + _i8(1)
    answer = _answer(service, _frame(29, 1, body))
    (_, _, code) = struct.unpack_from(">iih", answer, 4)
    assert code == ErrorCode.INVALID_REQUEST


def test_writes_are_appended_as_the_sessions_principal(service: MetadataService) -> None:
    body = _array(_i8(2) + _str("t") + _str("User:a") + _str("*") + _i8(3) + _i8(3))
    _answer(service, _frame(30, 0, body))
    log = service.log
    entries = list(log.read())
    assert entries[-1].principal == "User:admin"
    assert isinstance(entries[-1].record, AccessControlEntryRecord)


# ----------------------------------------------------------------------------- real clients


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetadataServer]:
    # A PLAINTEXT client is User:ANONYMOUS: a super user here (the ACL APIs need an authorizer).
    anonymous = AuthorizerConfig(super_users=frozenset({"User:ANONYMOUS"}))
    log_dir = tmp_path_factory.mktemp("acls") / "log"
    with running_server(log_dir, brokers=1, authorizer=anonymous) as running:
        yield running


def _log_records(server: MetadataServer) -> list[tuple[str | None, Any]]:
    with LogReader.open(server.service.log.directory) as log:
        return [(e.principal, e.record) for e in log.read()]


@pytest.mark.interop
def test_kafka_python_creates_describes_and_deletes_acls(server: MetadataServer) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.address, request_timeout_ms=10_000)
    try:
        topic = ResourcePattern(ResourceType.TOPIC, "kp-orders", ACLResourcePatternType.LITERAL)
        prefixed = ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        good = [
            ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic),
            ACL("User:kp", "10.0.0.9", ACLOperation.WRITE, ACLPermissionType.DENY, prefixed),
        ]
        bad = ACL("kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic)
        result = admin.create_acls([*good, bad])
        assert result["succeeded"] == good
        assert [e.errno for e in result["failed"]] == [42]

        match = ResourcePatternFilter(ResourceType.TOPIC, "kp-orders", ACLResourcePatternType.MATCH)
        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, match)
        found, error = admin.describe_acls(every)
        assert set(found) == set(good) and error.errno == 0

        literal = ACLFilter(
            "User:kp",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.LITERAL),
        )
        ((_, removed, error),) = admin.delete_acls([literal])
        assert removed == [good[0]] and error.errno == 0
        found, _ = admin.describe_acls(every)
        assert found == [good[1]]
    finally:
        admin.close()
    records = [(p, type(r)) for p, r in _log_records(server)]
    assert ("User:ANONYMOUS", AccessControlEntryRecord) in records
    assert ("User:ANONYMOUS", RemoveAccessControlEntryRecord) in records


@pytest.mark.interop
def test_kafka_python_alters_and_describes_scram_credentials(server: MetadataServer) -> None:
    from kafka.admin import (
        ScramMechanism as KpMechanism,
    )
    from kafka.admin import (
        UserScramCredentialDeletion as KpDeletion,
    )
    from kafka.admin import (
        UserScramCredentialUpsertion as KpUpsertion,
    )

    admin = KafkaAdminClient(bootstrap_servers=server.address, request_timeout_ms=10_000)
    try:
        result = admin.alter_user_scram_credentials(
            [
                KpUpsertion("kp-user", KpMechanism.SCRAM_SHA_256, "pw", iterations=4096),
                KpUpsertion("kp-weak", KpMechanism.SCRAM_SHA_256, "pw", iterations=1000),
                KpDeletion("kp-nobody", KpMechanism.SCRAM_SHA_512),
            ]
        )
        assert result["kp-user"] is None
        assert "Too few iterations" in result["kp-weak"]
        assert "does not exist" in result["kp-nobody"]
        described = admin.describe_user_scram_credentials(["kp-user", "kp-weak"])
        assert described["kp-user"]["credential_infos"] == [
            {"mechanism": KpMechanism.SCRAM_SHA_256, "iterations": 4096}
        ]
        assert "does not exist" in described["kp-weak"]["error"]
    finally:
        admin.close()


@pytest.mark.interop
def test_confluent_creates_describes_and_deletes_acls(server: MetadataServer) -> None:
    ck = AdminClient({"bootstrap.servers": server.address})
    allow = CkBinding(
        CkType.TOPIC, "ck-orders", CkPattern.LITERAL, "User:ck", "*", CkOp.READ, CkPerm.ALLOW
    )
    cluster = CkBinding(
        CkType.BROKER, "kafka-cluster", CkPattern.LITERAL, "User:ck", "*", CkOp.ALTER, CkPerm.ALLOW
    )
    wrong_cluster = CkBinding(
        CkType.BROKER, "my-cluster", CkPattern.LITERAL, "User:ck", "*", CkOp.ALTER, CkPerm.ALLOW
    )
    futures = ck.create_acls([allow, cluster, wrong_cluster])
    assert futures[allow].result(timeout=20) is None
    assert futures[cluster].result(timeout=20) is None
    with pytest.raises(KafkaException) as caught:
        futures[wrong_cluster].result(timeout=20)
    assert caught.value.args[0].code() == 42

    # confluent-kafka's stubs type the filter's strings as str; None is its "any".
    everything = CkFilter(CkType.ANY, None, CkPattern.ANY, "User:ck", None, CkOp.ANY, CkPerm.ANY)  # type: ignore[arg-type]
    found = ck.describe_acls(everything).result(timeout=20)
    assert set(found) == {allow, cluster}
    topics = CkFilter(CkType.TOPIC, None, CkPattern.ANY, "User:ck", None, CkOp.ANY, CkPerm.ANY)  # type: ignore[arg-type]
    removed = ck.delete_acls([topics])
    assert removed[topics].result(timeout=20) == [allow]
    assert ck.describe_acls(everything).result(timeout=20) == [cluster]


@pytest.mark.interop
def test_confluent_alters_and_describes_scram_credentials(server: MetadataServer) -> None:
    ck = AdminClient({"bootstrap.servers": server.address})
    salt = b"confluent-salt-0"
    futures = ck.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "ck-user", ScramCredentialInfo(CkMechanism.SCRAM_SHA_512, 8192), b"pw", salt
            ),
            UserScramCredentialUpsertion(
                "ck-weak", ScramCredentialInfo(CkMechanism.SCRAM_SHA_256, 100), b"pw"
            ),
        ]
    )
    assert futures["ck-user"].result(timeout=20) is None
    with pytest.raises(KafkaException) as caught:
        futures["ck-weak"].result(timeout=20)
    assert caught.value.args[0].code() == 93

    stored = server.service.image.scram.get("ck-user", SHA512)
    expected = new_credential(SHA512, "pw", iterations=8192, salt=salt)
    assert stored is not None
    assert (stored.stored_key, stored.server_key) == (expected.stored_key, expected.server_key)
    assert ("User:ANONYMOUS", stored) in _log_records(server)

    # Named users: a dict of futures (the stubs give the union with the all-users future).
    described = ck.describe_user_scram_credentials(["ck-user"])["ck-user"].result(timeout=20)  # type: ignore[index]
    (info,) = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (CkMechanism.SCRAM_SHA_512, 8192)

    deleted = ck.alter_user_scram_credentials(
        [UserScramCredentialDeletion("ck-user", CkMechanism.SCRAM_SHA_512)]
    )
    assert deleted["ck-user"].result(timeout=20) is None
    missing = ck.describe_user_scram_credentials(["ck-user"])["ck-user"]  # type: ignore[index]
    with pytest.raises(KafkaException) as caught:
        missing.result(timeout=20)
    assert caught.value.args[0].code() == 91


def test_our_client_round_trips_every_call(server: MetadataServer) -> None:
    async def scenario() -> None:
        async with await OurClient.connect(server.address) as client:
            created = await client.create_acls(
                [acl("ours", resource_type=Rt.NAMESPACE), acl("ours", host="bad")]
            )
            assert [r.outcome.error_code for r in created] == [0, ErrorCode.INVALID_REQUEST]
            found = await client.describe_acls(AclFilter(resource_type=Rt.NAMESPACE))
            assert found == [acl("ours", resource_type=Rt.NAMESPACE)]
            (deleted,) = await client.delete_acls([AclFilter(resource_type=Rt.NAMESPACE)])
            assert deleted.matching == (acl("ours", resource_type=Rt.NAMESPACE),)
            with pytest.raises(ApiError, match="INVALID_REQUEST"):
                await client.describe_acls(AclFilter(operation=AclOperation.UNKNOWN))
            (altered,) = await client.alter_user_scram_credentials([], [upsertion("ours")])
            assert altered.outcome.ok
            (described,) = await client.describe_user_scram_credentials(["ours"])
            assert [(c.mechanism, c.iterations) for c in described.credentials] == [(SHA256, 4096)]

    asyncio.run(scenario())


def test_a_write_the_service_refuses_whole_answers_its_code_on_every_item(
    service: MetadataService, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing_submit(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("the log's disk is full; writes resume once it has room")

    monkeypatch.setattr(service, "submit", failing_submit)
    creation = _i8(2) + _str("t") + _str("User:a") + _str("*") + _i8(3) + _i8(3)
    created = _answer(service, _frame(30, 0, _array(creation, creation)))
    message = _str("the log's disk is full; writes resume once it has room")
    assert created == _response(_i32(0) + _array(_i16(56) + message, _i16(56) + message))

    filter_v0 = _i8(1) + _str(None) + _str(None) + _str(None) + _i8(1) + _i8(1)
    deleted = _answer(service, _frame(31, 0, _array(filter_v0)))
    assert deleted == _response(_i32(0) + _array(_i16(56) + message + _array()))

    # AlterUserScramCredentials v0 is flexible: compact strings and arrays, tagged fields.
    def compact(text: str) -> bytes:
        data = text.encode()
        return bytes([len(data) + 1]) + data

    deletion = compact("u") + _i8(1) + b"\x00"
    body = bytes([2]) + deletion + bytes([1]) + b"\x00"  # one deletion, no upsertions
    altered = _answer(service, _frame_flexible(51, 0, body))
    (error_code,) = struct.unpack_from(">h", altered, 4 + 4 + 1 + 4 + 1 + 2)
    assert error_code == 56
    assert service.image.scram.users() == [] and len(service.image.acls.by_id) == 0


def _frame_flexible(api_key: int, version: int, body: bytes) -> bytes:
    """A request frame with header v2 (client id as a nullable string, then tagged fields)."""
    payload = _i16(api_key) + _i16(version) + _i32(CORRELATION) + _str("t") + b"\x00" + body
    return _i32(len(payload)) + payload
