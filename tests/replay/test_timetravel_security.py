"""ACLs and SCRAM credentials in time travel: image at an offset, diff, history, image tree, CLI.

Credentials are shown by user, mechanism and iteration count; a salt or a key shows nowhere
(text, JSON, tree), which every test here checks on what it prints.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

from api.cli.image_tree import Directory, PathError, lookup, path_name, walk
from api.cli.main import main
from metadata_log.reader import LogReader
from records.json_form import record_to_json
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    NamespaceRecord,
    PartitionRecord,
    PatternType,
    Record,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    TopicRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.changes import Change
from replay.loader import load_image
from replay.timetravel import Entity, TimeTravelError, diff, history, image_at
from replay.timetravel.security import acl_applies, describe_security, redacted
from tests.support.cli import ok
from tests.support.timetravel_logs import acl, timed_log

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
A1, A2, A3, A4 = (Uuid(bytes([n] * 16)) for n in range(1, 5))
TOPIC, NS = Uuid(bytes([9] * 16)), Uuid(bytes([8] * 16))
SALT = b"\x00\x01secret-salt\xfe"
KEY = bytes(range(200, 232))
KEY2 = bytes(range(1, 33))
SECRETS = [SALT, KEY, KEY2]


def _acl(acl_id: Uuid, **fields: object) -> AccessControlEntryRecord:
    """User:alice's ACL on topic org:orders, but for `fields`."""
    return acl(acl_id, **{"resource_name": "org:orders", "principal": "User:alice", **fields})


def _credential(name: str, key: bytes = KEY, iterations: int = 4096) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=name,
        mechanism=SHA256,
        salt=SALT,
        stored_key=key,
        server_key=key,
        iterations=iterations,
    )


# One record per append, so entry i is at offset i.
STORY: list[tuple[str, Record]] = [
    ("User:admin", FeatureLevelRecord(name="metadata.version", feature_level=1)),
    ("User:admin", NamespaceRecord(namespace_id=NS, name="org")),
    ("User:admin", TopicRecord(name="orders", topic_id=TOPIC, namespace="org")),
    ("User:admin", _credential("alice")),  # 3
    ("User:admin", _acl(A1)),  # 4: literal on the topic
    (
        "User:sec",
        _acl(
            A2,
            resource_type=ResourceType.NAMESPACE,
            resource_name="or",
            pattern_type=PatternType.PREFIXED,
            principal="User:*",
            operation=AclOperation.ALL,
            permission_type=AclPermissionType.DENY,
        ),
    ),  # 5: prefixed on namespaces starting "or"
    ("User:sec", _acl(A3, resource_name="*", principal="User:bob")),  # 6: every topic
    ("User:sec", _acl(A4, resource_name="other", principal="User:alice")),  # 7: not the topic
    ("User:sec", _credential("alice", key=KEY2, iterations=8192)),  # 8: replaced
    ("User:admin", RemoveAccessControlEntryRecord(id=A1)),  # 9
    ("User:admin", _acl(A1, resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster")),
    ("User:admin", RemoveUserScramCredentialRecord(name="alice", mechanism=SHA256)),  # 11
    ("User:admin", _credential("a/b")),  # 12: a name that is not a path component
]


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret.hex() not in text
        assert base64.b64encode(secret).decode() not in text
        assert repr(secret)[2:-1] not in text


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    with timed_log(tmp_path / "log") as log:
        for principal, record in STORY:
            records: list[Record] = [record]
            if isinstance(record, TopicRecord):
                records.append(
                    PartitionRecord(
                        partition_id=0, topic_id=TOPIC, replicas=(1,), isr=(1,), leader=1
                    )
                )
            log.append(records, principal=principal)
    return tmp_path


def _offset(index: int) -> int:
    """The offset of STORY[index] (the topic's append holds a partition too)."""
    return index if index <= 2 else index + 1


def mlog(data_dir: Path, *args: str) -> str:
    """Run a command that must succeed and whose output names no secret; its stdout."""
    text = ok(data_dir, *args)
    _no_secret(text)
    return text


def test_image_at_an_offset_holds_the_acls_and_credentials_of_then(data_dir: Path) -> None:
    with LogReader.open(data_dir / "log") as log:
        early = image_at(log, at_offset=_offset(4))
        late = image_at(log)
        assert early == load_image(log, lte=_offset(4))
    assert set(early.acls.by_id) == {A1}
    credential = early.scram.get("alice", SHA256)
    assert credential is not None and credential.iterations == 4096
    assert set(late.acls.by_id) == {A1, A2, A3, A4}
    assert late.acls.get(A1) == _acl(
        A1, resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster"
    )
    assert late.scram.users() == ["a/b"]


def test_diff_shows_acl_and_credential_changes_without_secrets(data_dir: Path) -> None:
    with LogReader.open(data_dir / "log") as log:
        before = image_at(log, at_offset=_offset(4))
        after = image_at(log, at_offset=_offset(9))
        replaced = image_at(log, at_offset=_offset(8))
        end = image_at(log)
    texts = [c.text() for c in diff(before, after)]
    assert texts == [
        "~ credential alice SCRAM-SHA-256: iterations 4096 -> 8192; keys (hidden) -> (hidden)",
        f"- acl topic org:orders (id {A1}): permission ALLOW; principal User:alice; operation "
        "READ; pattern LITERAL; host *",
        f"+ acl namespace or (id {A2}): permission DENY; principal User:*; operation ALL; "
        "pattern PREFIXED; host *",
        f"+ acl topic * (id {A3}): permission ALLOW; principal User:bob; operation READ; "
        "pattern LITERAL; host *",
        f"+ acl topic other (id {A4}): permission ALLOW; principal User:alice; operation READ; "
        "pattern LITERAL; host *",
    ]
    # The reused id A1: removed as the topic ACL, added as the cluster one.
    changes = diff(replaced, end)
    assert [(c.op, c.kind, c.name) for c in changes] == [
        ("+", "credential", "a/b SCRAM-SHA-256"),
        ("-", "credential", "alice SCRAM-SHA-256"),
        ("-", "acl", "topic org:orders"),
        ("+", "acl", "cluster kafka-cluster"),
    ]
    assert changes[1].text() == "- credential alice SCRAM-SHA-256: iterations 8192"
    everything = json.dumps([c.to_json() for c in diff(before, end)]) + repr(changes)
    _no_secret(everything)
    assert diff(end, end) == []
    # Backwards: what was added is removed.
    assert [c.op for c in diff(after, before) if c.kind == "acl"] == ["-", "-", "-", "+"]


def test_the_same_credential_set_again_is_no_change(data_dir: Path) -> None:
    with LogReader.open(data_dir / "log") as log:
        image = image_at(log, at_offset=_offset(3))
    from replay.delta import replay_records

    again = replay_records(image, [_credential("alice")], image.provenance)
    assert diff(image, again) == []
    iterations_only = replay_records(
        image, [_credential("alice", iterations=5000)], image.provenance
    )
    (change,) = diff(image, iterations_only)
    assert change.fields == (("iterations", 4096, 5000),)


def _history(data_dir: Path, entity: Entity) -> list[tuple[int, str | None, str]]:
    with LogReader.open(data_dir / "log") as log:
        return [(h.offset, h.principal, h.description) for h in history(log, entity)]


def test_history_of_a_user(data_dir: Path) -> None:
    entries = _history(data_dir, Entity(user="alice"))
    assert [offset for offset, _, _ in entries] == [_offset(i) for i in (3, 4, 5, 7, 8, 9, 10, 11)]
    descriptions = [d for _, _, d in entries]
    assert descriptions[0] == "set SCRAM-SHA-256 credential of user alice (4096 iterations)"
    assert descriptions[1] == (
        f"added ACL {A1}: ALLOW User:alice READ on topic org:orders (LITERAL) from host *"
    )
    assert descriptions[5] == (
        f"removed ACL {A1}: ALLOW User:alice READ on topic org:orders (LITERAL) from host *"
    )
    assert descriptions[7] == "removed SCRAM-SHA-256 credential of user alice"
    assert entries[4][1] == "User:sec"
    _no_secret(repr(entries))
    assert [o for o, _, _ in _history(data_dir, Entity(user="bob"))] == [_offset(5), _offset(6)]
    # Anyone is concerned by the ACLs for User:*.
    assert [o for o, _, _ in _history(data_dir, Entity(user="nobody"))] == [_offset(5)]


def test_history_of_a_topic_and_a_namespace_shows_the_acls_on_them(data_dir: Path) -> None:
    acl_offsets = {_offset(i) for i in (4, 6, 9)}  # literal, '*', the removal of the literal
    for entity in (Entity(topic="org:orders"), Entity(topic_id=TOPIC)):
        entries = _history(data_dir, entity)
        assert {o for o, _, d in entries if "ACL" in d} == acl_offsets
    namespace = _history(data_dir, Entity(namespace="org"))
    assert [o for o, _, d in namespace if "ACL" in d] == [_offset(5)]
    assert "DENY User:* ALL on namespace or (PREFIXED)" in namespace[-1][2]
    broker = _history(data_dir, Entity(broker=1))
    assert broker and not [d for _, _, d in broker if "ACL" in d or "credential" in d]


def test_an_entity_is_exactly_one_thing() -> None:
    with pytest.raises(TimeTravelError, match="a broker or a user"):
        Entity(user="alice", broker=1)
    with pytest.raises(TimeTravelError, match="a broker or a user"):
        Entity()
    with pytest.raises(TimeTravelError, match="needs a name"):
        Entity(user="")


def _leaves(image: Any, path: str) -> dict[str, Any]:
    prefix = "" if path == "/" else path.rstrip("/")
    return dict(walk(lookup(image, path), prefix))


def test_the_image_tree_has_acls_and_users_but_no_secrets(data_dir: Path) -> None:
    with LogReader.open(data_dir / "log") as log:
        image = image_at(log, at_offset=_offset(8))
    root = lookup(image, "/")
    assert isinstance(root, Directory)
    assert {"acls", "users"} <= set(root.list_children())
    acls = _leaves(image, "/acls")
    # In `AclsImage.sorted` order: topics (by name) before namespaces.
    assert list(acls) == [f"/acls/{a}" for a in (A3, A1, A4, A2)]
    assert acls[f"/acls/{A1}"] == record_to_json(_acl(A1))["data"]
    assert _leaves(image, f"/acls/{A2}")[f"/acls/{A2}"]["permission_type"] == "DENY"
    users = _leaves(image, "/users")
    assert users == {
        "/users/alice": {
            "name": "alice",
            "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}],
        }
    }
    _no_secret(json.dumps(_leaves(image, "/")))
    for missing in ("/acls/nope", "/acls/" + str(Uuid(bytes(16))), "/users/bob", "/users/Alice"):
        with pytest.raises(PathError):
            lookup(image, missing)


@pytest.mark.parametrize("name", ["a/b", "..", ".", "100%", "a%2Fb", "J\u00fcrgen M"])
def test_user_names_are_one_path_component(name: str) -> None:
    from replay.delta import replay_records
    from replay.image import EMPTY_IMAGE, Provenance

    image = replay_records(
        EMPTY_IMAGE, [_credential(name)], Provenance(offset=0, epoch=1, timestamp=1)
    )
    shown = path_name(name)
    assert "/" not in shown and shown not in (".", "..")
    (path,) = _leaves(image, "/users")
    assert path == f"/users/{shown}"
    node = lookup(image, path)
    assert not isinstance(node, Directory) and node.value["name"] == name


def test_cli_image_show_diff_and_history(data_dir: Path) -> None:
    at = str(_offset(8))
    text = mlog(data_dir, "image", "show", "--at-offset", at, "/acls")
    assert text.count("/acls/") == 4 and "User:bob" in text
    one = json.loads(mlog(data_dir, "image", "show", "--at-offset", at, f"/acls/{A1}"))
    assert one["principal"] == "User:alice" and one["resource_name"] == "org:orders"
    users = mlog(data_dir, "image", "show", "--at-offset", at, "/users")
    assert '"iterations":8192' in users and "salt" not in users and "key" not in users
    listing = mlog(data_dir, "image", "show", "--at-offset", at, "/")
    assert "/acls/" in listing and "/users/alice" in listing
    as_json = json.loads(mlog(data_dir, "--output", "json", "image", "show", "/users"))
    assert as_json == {
        "/users/a%2Fb": {
            "name": "a/b",
            "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}],
        }
    }
    changes = mlog(data_dir, "image", "diff", "--from", str(_offset(4)), "--to", at)
    assert "keys (hidden) -> (hidden)" in changes and f"+ acl topic * (id {A3})" in changes
    diff_json = json.loads(mlog(data_dir, "--output", "json", "image", "diff", "--from", "0"))
    assert {c["kind"] for c in diff_json["changes"]} >= {"acl", "credential"}
    table = mlog(data_dir, "history", "--user", "alice")
    assert "removed SCRAM-SHA-256 credential of user alice" in table and "User:sec" in table
    rows = json.loads(mlog(data_dir, "--output", "json", "history", "--user", "bob"))
    assert [r["offset"] for r in rows] == [_offset(5), _offset(6)]


def test_cli_history_refuses_two_entities_and_an_empty_user(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["--user", "alice", "--broker", "1"], ["--user", ""]):
        code = main(["--data-dir", str(data_dir), "history", *args], out=io.StringIO())
        assert code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--user" in err


def _append(data_dir: Path, lines: list[dict[str, Any]], tmp_path: Path) -> tuple[int, str]:
    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = io.StringIO()
    code = main(
        [
            "--data-dir",
            str(data_dir),
            "log",
            "append",
            "--principal",
            "User:ops",
            "--file",
            str(source),
        ],
        out=out,
    )
    return code, out.getvalue()


def test_log_append_replays_security_records_and_dump_shows_them(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    end = _offset(len(STORY) - 1) + 1
    good = [
        record_to_json(
            _acl(Uuid(bytes([7] * 16)), resource_name="org:", pattern_type=PatternType.PREFIXED)
        ),
        record_to_json(_credential("carol", iterations=16384)),
    ]
    code, text = _append(data_dir, good, tmp_path)
    assert code == 0 and f"at offsets {end}..{end + 1}" in text
    # The human dump hides salts and keys; the JSON dump zeroes them unless --show-secrets,
    # which keeps them, so it can be appended back.
    human = mlog(data_dir, "log", "dump", "--gt", str(end - 1))
    assert human.count("(hidden)") == 3 and "principal: User:ops" in human
    assert '"resource_name":"org:"' in human and '"iterations":16384' in human
    json_dump = ["--data-dir", str(data_dir), "--output", "json", "log", "dump"]
    out = io.StringIO()
    assert main(json_dump, out=out) == 0
    dumped = [json.loads(line) for line in out.getvalue().splitlines()]
    assert dumped[-1]["record"] == record_to_json(redacted(_credential("carol", iterations=16384)))
    assert dumped[-1]["record"] != good[1]
    out = io.StringIO()
    assert main([*json_dump, "--show-secrets"], out=out) == 0
    dumped = [json.loads(line) for line in out.getvalue().splitlines()]
    assert dumped[-1]["record"] == good[1]
    # Replay's rules hold for what is appended by hand: nothing of a refused block is written.
    refused = [
        (_acl(Uuid(bytes([6] * 16)), principal="alice"), "acl.principal"),
        (
            _acl(Uuid(bytes([6] * 16)), pattern_type=PatternType.MATCH),
            "acl.pattern",
        ),
        (_acl(Uuid(bytes([7] * 16))), "acl.id-unique"),
        (RemoveAccessControlEntryRecord(id=Uuid(bytes([6] * 16))), "acl.exists"),
        (_credential("dave", iterations=4095), "scram.iterations"),
        (_credential("dave", key=b"short"), "scram.key-size"),
        (_credential("da\nve"), "scram.name"),
        (RemoveUserScramCredentialRecord(name="alice", mechanism=SHA512), "scram.exists"),
    ]
    for record, rule in refused:
        code, _ = _append(
            data_dir, [record_to_json(_credential("erin")), record_to_json(record)], tmp_path
        )
        err = capsys.readouterr().err
        assert code == 2 and f"rule {rule}" in err and err.count("\n") == 1, err
        _no_secret(err)
    with LogReader.open(data_dir / "log") as log:
        assert log.end_offset == end + 2
        assert "erin" not in load_image(log).scram.users()


def test_shell_lists_users_and_follows_one(data_dir: Path) -> None:
    text = mlog(
        data_dir,
        "shell",
        "--at-offset",
        str(_offset(8)),
        "-c",
        "ls /; ls /users; history /users/alice",
    )
    assert "acls/" in text and "users/" in text and "alice" in text
    assert "set SCRAM-SHA-256 credential of user alice (8192 iterations)" in text
    escaped = mlog(data_dir, "shell", "-c", "cat /users/a%2Fb; history /users/a%2Fb")
    assert '"name": "a/b"' in escaped and "credential of user a/b" in escaped


def test_the_same_answers_through_a_server(data_dir: Path) -> None:
    from tests.support.server_thread import running_server

    commands = [
        ["history", "--user", "alice"],
        ["--output", "json", "history", "--topic", "org:orders"],
        ["image", "diff", "--from", str(_offset(4))],
        ["image", "show", "--at-offset", str(_offset(8)), "/users"],
        ["image", "show", "/acls"],
    ]
    local = [mlog(data_dir, *command) for command in commands]
    with running_server(data_dir / "log", brokers=0) as server:
        for command, expected in zip(commands, local, strict=True):
            out = io.StringIO()
            assert main(["--bootstrap-server", server.address, *command], out=out) == 0
            assert out.getvalue() == expected, command
            _no_secret(out.getvalue())


def test_acl_applies_answers_a_bool_for_every_resource_type() -> None:
    acl = _acl(A1)
    assert acl_applies(acl, ResourceType.TOPIC, "org:orders") is True
    assert acl_applies(acl, ResourceType.GROUP, "org:orders") is False
    assert acl_applies(acl, ResourceType.TOPIC, "org:other") is False


def test_only_a_security_record_is_described_here() -> None:
    record = ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name="t", name="k", value="v"
    )
    with pytest.raises(TypeError, match="ConfigRecord is not a security record"):
        describe_security(record, {})


@pytest.mark.parametrize(
    ("change", "text"),
    [
        (
            Change(op="~", kind="broker", name="1", fields=(("rack", None, "r1"),)),
            "~ broker 1: rack none -> r1",
        ),
        (
            Change(op="~", kind="partition", name="t-0", fields=(("isr", [1, 2], [1]),)),
            "~ partition t-0: isr [1,2] -> [1]",
        ),
        (
            Change(op="~", kind="broker", name="2", fields=(("fenced", False, True),)),
            "~ broker 2: fenced false -> true",
        ),
        (
            Change(op="-", kind="topic", name="t", id="x", fields=(("partitions", 3, None),)),
            "- topic t (id x): partitions 3",
        ),
        (
            Change(op="+", kind="topic", name="t", fields=(("partitions", None, 2),)),
            "+ topic t: partitions 2",
        ),
    ],
)
def test_a_change_shows_none_lists_and_booleans_in_one_line(change: Change, text: str) -> None:
    assert change.text() == text
    assert change.to_json()["changes"] == {
        f: {"before": b, "after": a} for f, b, a in change.fields
    }
