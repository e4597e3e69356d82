"""`mlog acls` and `mlog users` on a data directory and through a server.

Every test runs against both targets; a refused command must print one line on stderr, exit
2 and append nothing. Passwords are read from a file or stdin only, and appear nowhere.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.cli.main import main
from metadata_log.reader import LogReader
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ClientWriteRecord,
    PatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialRecord,
)
from replay.controller.authorizer import AuthorizerConfig
from replay.security.scram_keys import new_credential
from tests.support.server_thread import running_server


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where the commands run: the flags that name it and the log it writes."""

    flags: list[str]
    log_dir: Path
    remote: bool


@pytest.fixture(params=["data-dir", "server"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "data-dir":
        yield Target(flags=["--data-dir", str(tmp_path)], log_dir=tmp_path / "log", remote=False)
        return
    # A PLAINTEXT client is User:ANONYMOUS: a super user here (the ACL APIs need an authorizer).
    anonymous = AuthorizerConfig(super_users=frozenset({"User:ANONYMOUS"}))
    with running_server(tmp_path / "served" / "log", brokers=1, authorizer=anonymous) as server:
        yield Target(
            flags=["--bootstrap-server", server.address],
            log_dir=tmp_path / "served" / "log",
            remote=True,
        )


def run(
    target: Target, args: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    out = io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main([*args[:2], *target.flags, *args[2:]], out=out)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), capsys.readouterr().err


def records(target: Target) -> list[tuple[str | None, Any]]:
    if not (target.log_dir).exists():
        return []
    # Without the notes of idempotent writes (through a server, each write's batch has one):
    # what is compared is what the commands changed.
    with LogReader.open(target.log_dir) as log:
        return [
            (e.principal, e.record)
            for e in log.read()
            if not isinstance(e.record, ClientWriteRecord)
        ]


def refused(
    target: Target, args: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> str:
    """Run a command that must fail: exit 2, one line on stderr, nothing appended."""
    before = records(target)
    code, out, err = run(target, args, capsys, stdin)
    assert code == 2, (out, err)
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert records(target) == before
    return err


# ----------------------------------------------------------------------------- acls


def test_add_list_and_remove_with_kafka_acls_output(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        target,
        [
            "acls", "add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
            "--operation", "Read", "--operation", "describe", "--topic", "orders",
        ],
        capsys,
    )  # fmt: skip
    assert code == 0
    header = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    lines = out.splitlines()
    assert lines[0] == f"Adding ACLs for resource `{header}`: "
    assert lines[1] == " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert f"Current ACLs for resource `{header}`: " in lines
    acls = [r for _, r in records(target) if isinstance(r, AccessControlEntryRecord)]
    assert sorted((a.principal, a.operation) for a in acls) == [
        ("User:alice", AclOperation.READ),
        ("User:alice", AclOperation.DESCRIBE),
        ("User:bob", AclOperation.READ),
        ("User:bob", AclOperation.DESCRIBE),
    ]

    code, out, _ = run(
        target,
        [
            "acls", "add", "--deny-principal", "User:mallory", "--deny-host", "192.0.2.1",
            "--operation", "Write", "--namespace", "org:apache",
            "--resource-pattern-type", "prefixed",
        ],
        capsys,
    )  # fmt: skip
    assert code == 0
    (namespace_acl,) = [
        r
        for _, r in records(target)
        if isinstance(r, AccessControlEntryRecord) and r.resource_type == ResourceType.NAMESPACE
    ]
    assert namespace_acl.pattern_type == PatternType.PREFIXED
    assert namespace_acl.permission_type == AclPermissionType.DENY
    assert namespace_acl.host == "192.0.2.1"

    code, out, _ = run(target, ["acls", "list", "--output", "json"], capsys)
    assert code == 0 and len(json.loads(out)) == 5
    code, out, _ = run(
        target, ["acls", "list", "--principal", "User:bob", "--output", "json"], capsys
    )
    assert {(a["principal"], a["operation"]) for a in json.loads(out)} == {
        ("User:bob", "READ"),
        ("User:bob", "DESCRIBE"),
    }
    code, out, _ = run(
        target,
        ["acls", "list", "--namespace", "org:apache:kafka", "--resource-pattern-type", "match"],
        capsys,
    )
    assert "name=org:apache, patternType=PREFIXED" in out and "orders" not in out

    count = len(records(target))
    code, out, _ = run(
        target,
        [
            "acls", "remove", "--topic", "orders", "--allow-principal", "User:alice",
            "--operation", "Read", "--force",
        ],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert "Removed ACLs from resource" in out and "User:alice, host=*, operation=READ" in out
    assert len(records(target)) == count + 1

    # Without --force it asks; anything but y removes nothing.
    before = records(target)
    code, out, err = run(target, ["acls", "remove", "--topic", "orders"], capsys, stdin="n\n")
    question, error = err.splitlines()
    assert code == 2 and out == "" and records(target) == before
    assert question.startswith("Are you sure") and "nothing removed" in error
    code, out, err = run(target, ["acls", "remove", "--topic", "orders"], capsys, stdin="y\n")
    assert code == 0 and "Are you sure you want to delete all ACLs" in err
    code, out, _ = run(target, ["acls", "list", "--topic", "orders", "--output", "json"], capsys)
    assert json.loads(out) == []
    code, out, _ = run(target, ["acls", "list", "--topic", "orders"], capsys)
    assert code == 0 and out == "no ACLs match; add one with `mlog acls add`\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--operation", "Frob", "--topic", "t"], "unknown operation 'Frob'"),
        (["--operation", "Read"], "name a resource"),
        (["--operation", "Read", "--topic", "t", "--resource-pattern-type", "match"], "pattern"),
        (["--operation", "ClusterAction", "--topic", "t"], "only supports operations"),
        (["--operation", "Read", "--cluster"], "only supports operations"),
    ],
)
def test_add_refuses_bad_flags(
    target: Target, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    err = refused(target, ["acls", "add", "--allow-principal", "User:a", *args], capsys)
    assert message in err


def test_add_without_an_operation_grants_all_as_kafka_acls_does(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(target, ["acls", "add", "--allow-principal", "User:a", "--topic", "t"], capsys)
    assert code == 0
    code, out, _ = run(target, ["acls", "list", "--topic", "t", "--output", "json"], capsys)
    assert code == 0
    assert [a["operation"] for a in json.loads(out)] == ["ALL"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--allow-principal", "alice"], "User:<name>"),
        (["--allow-principal", "User:a", "--allow-host", "localhost"], "not an IP address"),
        (["--allow-principal", "User:a\x07"], "control character"),
        ([], "--allow-principal"),
    ],
)
def test_add_refuses_bad_acls_before_writing_any(
    target: Target, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    # The good principal comes first: nothing of it may be written either.
    err = refused(
        target,
        ["acls", "add", *args, "--allow-principal", "User:good", "--operation", "Read",
         "--topic", "t"] if args else ["acls", "add", "--operation", "Read", "--topic", "t"],
        capsys,
    )  # fmt: skip
    assert message in err


def test_remove_needs_a_resource(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(target, ["acls", "remove", "--force"], capsys)
    assert "name the resource" in err


# ----------------------------------------------------------------------------- users


def test_scram_set_list_delete(
    target: Target, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    password_file = tmp_path / "password"
    password_file.write_bytes("pässword\n".encode())
    code, out, _ = run(
        target,
        ["users", "scram-set", "--name", "alice", "--mechanism", "SCRAM-SHA-512",
         "--iterations", "8192", "--password-file", str(password_file)],
        capsys,
    )  # fmt: skip
    assert code == 0 and "SCRAM-SHA-512 credential of user alice (8192 iterations)" in out
    code, out, _ = run(
        target,
        ["users", "scram-set", "--name", "bob", "--mechanism", "SCRAM-SHA-256",
         "--password-stdin"],
        capsys,
        stdin="hunter2\r\n",
    )  # fmt: skip
    assert code == 0

    stored = {
        (r.name, r.mechanism): (principal, r)
        for principal, r in records(target)
        if isinstance(r, UserScramCredentialRecord)
    }
    principal, alice = stored[("alice", ScramMechanism.SCRAM_SHA_512)]
    assert principal is not None and principal.startswith("User:")
    expected = new_credential(
        ScramMechanism.SCRAM_SHA_512, "pässword", iterations=8192, salt=alice.salt
    )
    assert (alice.stored_key, alice.server_key) == (expected.stored_key, expected.server_key)
    _, bob = stored[("bob", ScramMechanism.SCRAM_SHA_256)]
    expected = new_credential(ScramMechanism.SCRAM_SHA_256, "hunter2", salt=bob.salt)
    assert bob.stored_key == expected.stored_key and bob.iterations == 4096

    code, out, _ = run(target, ["users", "list"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "user   mechanism      iterations",
        "alice  SCRAM-SHA-512  8192",
        "bob    SCRAM-SHA-256  4096",
    ]
    code, out, _ = run(target, ["users", "list", "--name", "bob", "--output", "json"], capsys)
    assert json.loads(out) == [{"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 4096}]
    assert "hunter2" not in out and "pässword" not in out

    code, out, _ = run(
        target, ["users", "delete", "--name", "bob", "--mechanism", "SCRAM-SHA-256"], capsys
    )
    assert code == 0 and "deleted" in out
    code, out, _ = run(target, ["users", "list", "--output", "json"], capsys)
    assert [u["user"] for u in json.loads(out)] == ["alice"]

    dumped = (target.log_dir / "00000000000000000000.avro").read_bytes()
    assert b"hunter2" not in dumped and "pässword".encode() not in dumped


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--password-stdin"], "", "empty"),
        (["--password-stdin"], "\n", "empty"),
        (["--password-stdin", "--iterations", "100"], "pw\n", "4096..16384"),
        (["--password-stdin", "--iterations", "99999999999"], "pw\n", "4096..16384"),
        (["--password-stdin", "--iterations", "many"], "pw\n", "not an iteration count"),
        (["--password", "pw"], "", "use --password-file FILE or --password-stdin"),
        (["--password=pw", "--password-stdin"], "pw", "can be read by every user"),
        ([], "pw", "--password-file"),
        (["--password-file", "/nonexistent/pw"], "", "No such file"),
    ],
)
def test_scram_set_refuses_bad_input(
    target: Target,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    stdin: str,
    message: str,
) -> None:
    err = refused(
        target,
        ["users", "scram-set", "--name", "carol", "--mechanism", "SCRAM-SHA-256", *args],
        capsys,
        stdin=stdin,
    )
    assert message in err


def test_scram_set_refuses_unknown_mechanisms_and_empty_names(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(
        target,
        ["users", "scram-set", "--name", "c", "--mechanism", "SCRAM-MD5", "--password-stdin"],
        capsys,
        stdin="pw",
    )
    assert "unknown SCRAM mechanism" in err
    err = refused(
        target,
        ["users", "scram-set", "--name", "", "--mechanism", "SCRAM-SHA-256", "--password-stdin"],
        capsys,
        stdin="pw",
    )
    assert "--name cannot be empty" in err


def test_deleting_or_listing_a_missing_user(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(
        target, ["users", "delete", "--name", "ghost", "--mechanism", "SCRAM-SHA-256"], capsys
    )
    assert "RESOURCE_NOT_FOUND (91)" in err
    # A refused write on a new data directory creates nothing, not even the log.
    assert target.remote or not target.log_dir.exists()
    code, out, _ = run(target, ["acls", "add", "--allow-principal", "User:a", "--operation",
                                "Read", "--topic", "t"], capsys)  # fmt: skip
    assert code == 0
    code, out, _ = run(target, ["users", "list"], capsys)
    assert code == 0 and "no users with SCRAM credentials" in out
    err = refused(target, ["users", "list", "--name", "ghost"], capsys)
    assert "RESOURCE_NOT_FOUND (91)" in err


@pytest.mark.process
def test_through_a_real_mlog_serve_the_log_lines_name_who_and_never_a_secret(
    tmp_path: Path,
) -> None:
    from tests.support.server_process import serve_process

    def mlog(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "api.cli", *args, "--bootstrap-server", served.address],
            input=stdin,
            capture_output=True,
            timeout=120,
            check=False,
        )

    with serve_process(tmp_path / "data", tmp_path / "serve.log") as served:
        added = mlog(
            "acls", "add", "--allow-principal", "User:alice", "--operation", "All",
            "--cluster",
        )  # fmt: skip
        # `mlog serve` has no authorizer yet (authorizer.class.name comes with the server
        # config): the ACL APIs answer Kafka's SECURITY_DISABLED, and the refusal is logged.
        assert added.returncode != 0
        assert b"SECURITY_DISABLED" in added.stderr, added.stderr
        secret = b"correct horse battery staple"
        scram = mlog(
            "users", "scram-set", "--name", "alice", "--mechanism", "SCRAM-SHA-256",
            "--password-stdin", stdin=secret + b"\n",
        )  # fmt: skip
        assert scram.returncode == 0, scram.stderr
        # Set again (no trailing newline this time): it replaces the credential.
        again = mlog(
            "users", "scram-set", "--name", "alice", "--mechanism", "SCRAM-SHA-256",
            "--password-stdin", stdin=secret,
        )  # fmt: skip
        assert again.returncode == 0
        listed = mlog("users", "list", "--output", "json")
        assert json.loads(listed.stdout) == [
            {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096}
        ]
        assert served.stop() == 0
    log = served.log()
    assert "User:ANONYMOUS CreateAcls refused: SECURITY_DISABLED (54)" in log
    assert "User:ANONYMOUS alter scram credentials of alice: ok" in log
    assert secret.decode() not in log
    for segment in (tmp_path / "data" / "log").glob("*.avro"):
        assert secret not in segment.read_bytes()


def test_list_by_name_hints_the_pattern_type_that_finds_a_prefixed_acl(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        target,
        [
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--namespace",
            "org",
            "--resource-pattern-type",
            "prefixed",
        ],
        capsys,
    )
    assert code == 0, err
    code, out, _ = run(target, ["acls", "list", "--namespace", "org"], capsys)
    assert code == 0
    assert "no ACLs match" in out and "--resource-pattern-type any" in out
    assert "PREFIXED" in out
    # Below the prefix only `match` finds it.
    code, out, _ = run(target, ["acls", "list", "--namespace", "org:apache"], capsys)
    assert "--resource-pattern-type match" in out
    code, out, _ = run(
        target,
        ["acls", "list", "--namespace", "org:apache", "--resource-pattern-type", "match"],
        capsys,
    )
    assert "User:alice" in out
