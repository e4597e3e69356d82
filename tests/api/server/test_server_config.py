"""`mlog serve`'s config under Kafka's keys: listeners, SASL, TLS, limits, and bad values."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.cli.main import main
from api.security.properties import load_properties
from api.server.config import (
    DEFAULT_MECHANISMS,
    ListenerConfig,
    ServerConfigError,
    TlsConfig,
    parse_listeners,
    server_config,
)
from replay.controller.authorizer import STANDARD_AUTHORIZER, AuthorizerConfig
from tests.support.paths import DATA

KAFKA_39 = DATA / "kafka-3.9-server.properties"


def _error(values: dict[str, str]) -> str:
    with pytest.raises(ServerConfigError) as caught:
        server_config(values)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- listeners


def test_without_listeners_one_plaintext_listener_on_the_loopback() -> None:
    config = server_config({})
    assert config.listeners == (
        ListenerConfig(
            name="PLAINTEXT", security_protocol="PLAINTEXT", host="127.0.0.1", port=9092
        ),
    )
    assert config.notes == ()
    assert config.authorizer is None
    assert config.failed_authentication_delay_ms == 100


def test_several_listeners_custom_names_mapped_and_advertised() -> None:
    config = server_config(
        {
            "listeners": "PLAINTEXT://:9092, external://0.0.0.0:9094,LOCAL://[::1]:9095",
            "listener.security.protocol.map": "EXTERNAL:SASL_SSL,LOCAL:SASL_PLAINTEXT",
            "advertised.listeners": "EXTERNAL://kafka.example.com:19094",
            "ssl.keystore.location": "/etc/mlog/server.pem",
        }
    )
    plain, external, local = config.listeners
    assert (plain.name, plain.security_protocol, plain.host, plain.port) == (
        "PLAINTEXT",
        "PLAINTEXT",
        "",
        9092,
    )
    assert plain.advertised_host is None and not plain.uses_tls and not plain.uses_sasl
    assert (external.name, external.security_protocol, external.host) == (
        "EXTERNAL",
        "SASL_SSL",
        "0.0.0.0",
    )
    assert (external.advertised_host, external.advertised_port) == ("kafka.example.com", 19094)
    assert external.sasl_mechanisms == DEFAULT_MECHANISMS == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert external.tls == TlsConfig(keystore_location=Path("/etc/mlog/server.pem"))
    assert (local.host, local.port, local.security_protocol) == ("::1", 9095, "SASL_PLAINTEXT")
    assert local.tls is None


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"listeners": "PLAINTEXT:9092"}, "is not NAME://HOST:PORT"),
        ({"listeners": "PLAINTEXT://host:99999"}, "port 0..65535"),
        ({"listeners": "PLAIN TEXT://h:1"}, "is not NAME://HOST:PORT"),
        ({"listeners": "PLAINTEXT://h:1,plaintext://h:2"}, "appears twice"),
        ({"listeners": " , "}, "listeners is empty"),
        (
            {"listeners": "A://h:1,B://h:1", "listener.security.protocol.map": "A:SSL,B:SSL"},
            "both bind port 1",
        ),
        ({"listeners": "PLAINTEXT://:1,SSL://127.0.0.1:1"}, "both bind port 1"),
        ({"listeners": "EXTERNAL://h:1"}, "add EXTERNAL:SASL_SSL"),
        (
            {"listeners": "X://h:1", "listener.security.protocol.map": "X:TLS"},
            "is not a security protocol",
        ),
        ({"listener.security.protocol.map": "X"}, "is not NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "X:SSL,x:SSL"}, "mapped twice"),
        ({"advertised.listeners": "SSL://h:1"}, "SSL is not in listeners"),
        ({"listeners": "PLAINTEXT://0.0.0.0:1"}, "set advertised.listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:1"}, "must name a host"),
        ({"advertised.listeners": "PLAINTEXT://:1"}, "must name a host"),
        ({"listeners": "PLAINTEXT://h\x00:1"}, "control character"),
    ],
)
def test_bad_listeners_are_one_line_errors_naming_the_key(
    values: dict[str, str], words: str
) -> None:
    assert words in _error(values)


@given(st.text(max_size=40))
def test_any_listeners_text_is_taken_or_refused_cleanly(text: str) -> None:
    try:
        found = parse_listeners("listeners", text)
    except ServerConfigError as exc:
        assert str(exc).startswith("listeners:")
        return
    for name, host, port in found:
        assert name == name.upper()
        assert 0 <= port <= 65535
        assert "://" not in host


# ----------------------------------------------------------------------------- SASL


def test_unsupported_kafka_mechanisms_are_left_out_with_one_note() -> None:
    config = server_config(
        {
            "listeners": "SASL_PLAINTEXT://h:1",
            "sasl.enabled.mechanisms": "GSSAPI, SCRAM-SHA-512,OAUTHBEARER,SCRAM-SHA-512",
        }
    )
    assert config.listeners[0].sasl_mechanisms == ("SCRAM-SHA-512",)
    (note,) = config.notes
    assert "GSSAPI, OAUTHBEARER not supported" in note


def test_no_supported_mechanism_is_an_error_only_with_a_sasl_listener() -> None:
    assert "no supported SASL mechanism" in _error(
        {"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": "GSSAPI"}
    )
    assert "no supported SASL mechanism" in _error(
        {"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": ""}
    )
    config = server_config({"sasl.enabled.mechanisms": "GSSAPI"})
    assert config.listeners[0].sasl_mechanisms == ()


def test_unknown_mechanism_is_an_error() -> None:
    assert "unknown SASL mechanism 'scram-sha-1'" in _error(
        {"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": "scram-sha-1"}
    )


def test_per_listener_mechanisms_and_ignored_jaas_entries() -> None:
    config = server_config(
        {
            "listeners": "A://h:1,B://h:2",
            "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.b.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.a.plain.sasl.jaas.config": "org.apache...PlainLoginModule required "
            'username="admin" password="secret";',
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    assert [listener.sasl_mechanisms for listener in config.listeners] == [
        ("PLAIN",),
        ("SCRAM-SHA-256",),
    ]
    text = "\n".join(config.notes)
    assert "ignoring listener.name.a.plain.sasl.jaas.config" in text
    assert "mlog users scram-set" in text
    assert "sasl.mechanism.inter.broker.protocol is ignored" in text
    assert "secret" not in text


# ----------------------------------------------------------------------------- TLS


def test_tls_keys_plain_and_per_listener() -> None:
    config = server_config(
        {
            "listeners": "SSL://h:1,SASL_SSL://h:2",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/k.pem",
            "ssl.key.password": "hunter2",
            "ssl.truststore.location": "/ca.pem",
            "listener.name.ssl.ssl.client.auth": "REQUIRED",
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT",
        }
    )
    ssl_listener, sasl_ssl = config.listeners
    assert ssl_listener.tls == TlsConfig(
        keystore_location=Path("/k.pem"),
        key_password="hunter2",
        truststore_location=Path("/ca.pem"),
        client_auth="required",
        principal_mapping_rules="RULE:^CN=(.*?),.*$/$1/,DEFAULT",
    )
    assert sasl_ssl.tls is not None and sasl_ssl.tls.client_auth == "none"
    assert "hunter2" not in repr(config)
    assert config.notes == ()


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({}, "needs ssl.keystore.location"),
        ({"ssl.keystore.location": "/k", "ssl.keystore.type": "JKS"}, "convert the store to PEM"),
        ({"ssl.keystore.location": "/k", "ssl.keystore.password": "x"}, "cannot be used with PEM"),
        ({"ssl.keystore.location": "/k", "ssl.client.auth": "maybe"}, "is not one of none"),
        (
            {"ssl.keystore.location": "/k", "ssl.client.auth": "required"},
            "needs ssl.truststore.location",
        ),
    ],
)
def test_bad_tls_config(values: dict[str, str], words: str) -> None:
    assert words in _error({"listeners": "SSL://h:1", **values})


def test_tls_keys_without_a_tls_listener_are_not_an_error() -> None:
    config = server_config({"ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"})
    assert config.listeners[0].tls is None
    (note,) = config.notes
    assert "ssl.client.auth, ssl.keystore.location" in note


# ----------------------------------------------------------------------------- other keys


def test_authorizer_super_users_and_allow_everyone() -> None:
    config = server_config(
        {
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin; User:CN=ops,O=Example ;",
            "allow.everyone.if.no.acl.found": "TRUE",
        }
    )
    assert config.authorizer == AuthorizerConfig(
        super_users=frozenset({"User:admin", "User:CN=ops,O=Example"}),
        allow_everyone_if_no_acl_found=True,
    )
    assert server_config({"authorizer.class.name": ""}).authorizer is None


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "not supported"),
        ({"super.users": "admin"}, "is not a principal User:<name>"),
        ({"super.users": "Group:ops"}, "is not a principal"),
        ({"allow.everyone.if.no.acl.found": "yes"}, "is not true or false"),
        ({"connection.failed.authentication.delay.ms": "-1"}, "outside 0..2147483647"),
        ({"connection.failed.authentication.delay.ms": "1e3"}, "is not an integer"),
        (
            {"connection.failed.authentication.delay.ms": "500", "connections.max.idle.ms": "500"},
            "must be below connections.max.idle.ms=500",
        ),
        ({"max.connections": "0"}, "max.connections: 0 is outside 1.."),
        ({"queued.max.request.bytes": "lots"}, "queued.max.request.bytes: 'lots' is not"),
        ({"socket.request.max.bytes": "12"}, "socket.request.max.bytes: 12 is outside"),
        ({"node.id": "-1"}, "node.id: -1 is outside"),
        ({"node.id": "1", "broker.id": "2"}, "broker.id=2 differs from node.id=1"),
    ],
)
def test_bad_values_name_their_key(values: dict[str, str], words: str) -> None:
    assert words in _error(values)


def test_limits_node_and_data_directory() -> None:
    config = server_config(
        {
            "max.connections": "100",
            "max.connections.per.ip": "10",
            "connections.max.idle.ms": "60000",
            "queued.max.request.bytes": "200000000",
            "broker.id": "7",
            "log.dirs": "/data/a, /data/b",
            "connection.failed.authentication.delay.ms": "0",
        }
    )
    assert dict(config.limits) == {
        "max.connections": 100,
        "max.connections.per.ip": 10,
        "connections.max.idle.ms": 60000,
        "queued.max.request.bytes": 200000000,
    }
    assert config.node_id == 7
    assert config.data_dir == Path("/data/a")
    assert config.failed_authentication_delay_ms == 0
    assert any("names 2 directories" in note for note in config.notes)
    assert server_config({"log.dirs": "/a", "metadata.log.dir": "/m"}).data_dir == Path("/m")


def test_kafkas_own_server_properties_works_unchanged() -> None:
    config = server_config(load_properties(KAFKA_39))
    plain, controller = config.listeners
    assert (plain.name, plain.host, plain.port, plain.advertised_host) == (
        "PLAINTEXT",
        "",
        9092,
        "localhost",
    )
    assert (controller.name, controller.security_protocol, controller.port) == (
        "CONTROLLER",
        "PLAINTEXT",
        9093,
    )
    assert config.node_id == 1
    assert config.data_dir == Path("/tmp/kraft-combined-logs")
    assert config.socket_request_max_bytes == 104857600
    unused = [note for note in config.notes if note.startswith("ignoring")]
    assert len(unused) == 1
    assert "process.roles" in unused[0] and "num.io.threads" in unused[0]
    assert "listeners," not in unused[0] and "node.id" not in unused[0]


# ----------------------------------------------------------------------------- the command


def _serve(tmp_path: Path, text: str, *flags: str) -> tuple[int, str]:
    config = tmp_path / "server.properties"
    config.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(
            ["serve", "--data-dir", str(tmp_path / "data"), "--config", str(config), *flags],
            out=io.StringIO(),
        )
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("text", "flags", "words"),
    [
        ("listeners=PLAINTEXT//x:1\n", (), "listeners: 'PLAINTEXT//x:1' is not NAME://HOST:PORT"),
        ("max.connections=none\n", (), "max.connections: 'none' is not an integer"),
        ("listeners=SSL://127.0.0.1:0\n", (), "needs ssl.keystore.location"),
        (
            "listeners=SSL://127.0.0.1:0\nssl.keystore.location=/nonexistent/server.pem\n",
            (),
            "listener SSL: ",
        ),
        (
            f"listeners=SSL://127.0.0.1:0\nssl.keystore.location={KAFKA_39}\n",
            (),
            "listener SSL: ",
        ),
        ("", ("--override", "node.id"), "is not KEY=VALUE"),
        ("", ("--override", "node.id=x"), "node.id: 'x' is not an integer"),
        (
            "listeners=A://127.0.0.1:0,B://127.0.0.1:0\nlistener.security.protocol.map=A:PLAINTEXT"
            ",B:PLAINTEXT\n",
            ("--advertised-listener", "h:1"),
            "set advertised.listeners in the config",
        ),
        ("listeners=PLAINTEXT://127.0.0.1:0\nnode.id=\\u0000\n", (), "control character"),
    ],
)
def test_bad_config_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, text: str, flags: tuple[str, ...], words: str
) -> None:
    code, err = _serve(tmp_path, text, *flags)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert words in lines[0]
    assert not (tmp_path / "data" / "log").exists()


def test_a_missing_config_file_exits_2(tmp_path: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["serve", "--data-dir", str(tmp_path), "--config", str(tmp_path / "nope")])
    assert code == 2
    assert "no such file" in err.getvalue()


def _values(tmp_path: Path, text: str, *flags: str) -> dict[str, str]:
    from api.cli.main import build_parser
    from api.cli.serve import config_values

    config = tmp_path / "server.properties"
    config.write_text(text)
    args = build_parser(only="serve").parse_args(["serve", "--config", str(config), *flags])
    return config_values(args)


def test_flags_override_the_file(tmp_path: Path) -> None:
    text = (
        "listeners=SASL_SSL://:9094\nadvertised.listeners=SASL_SSL://h:9094\nnode.id=3\n"
        "max.connections=5\n"
    )
    values = _values(
        tmp_path, text, "--listen", "127.0.0.1:0", "--node-id", "4", "--override", "a.b= c=d"
    )
    assert values["listeners"] == "PLAINTEXT://127.0.0.1:0"
    assert values["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT"
    assert "advertised.listeners" not in values
    assert values["node.id"] == "4"
    assert values["a.b"] == " c=d"
    config = server_config(values)
    assert [(item.name, item.security_protocol) for item in config.listeners] == [
        ("PLAINTEXT", "PLAINTEXT")
    ]
    values = _values(tmp_path, text, "--advertised-listener", "[::1]:19094")
    assert values["advertised.listeners"] == "SASL_SSL://[::1]:19094"
    values = _values(tmp_path, text, "--override", "listeners=PLAINTEXT://[::1]:1")
    assert values["listeners"] == "PLAINTEXT://[::1]:1"


def test_limits_flags_then_environment_then_file(tmp_path: Path) -> None:
    from api.cli.main import build_parser
    from api.cli.serve import _limit_flags
    from api.server.limits import resolve_limits

    config = server_config({"max.connections": "5", "max.connections.per.ip": "6"})
    args = build_parser(only="serve").parse_args(["serve", "--max-connections-per-ip", "7"])
    env = {"MLOG_MAX_CONNECTIONS": "9"}
    limits = resolve_limits(_limit_flags(args, config, env), env, max_request_bytes=1024)
    assert (limits.max_connections, limits.max_connections_per_ip) == (9, 7)
    limits = resolve_limits(_limit_flags(args, config, {}), {}, max_request_bytes=1024)
    assert (limits.max_connections, limits.max_connections_per_ip) == (5, 7)


_KEYS = st.sampled_from(
    [
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "sasl.enabled.mechanisms",
        "listener.name.a.sasl.enabled.mechanisms",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.client.auth",
        "listener.name.ssl.ssl.client.auth",
        "super.users",
        "authorizer.class.name",
        "allow.everyone.if.no.acl.found",
        "connection.failed.authentication.delay.ms",
        "connections.max.idle.ms",
        "max.connections",
        "node.id",
        "broker.id",
        "log.dirs",
        "no.such.key",
    ]
)
_VALUES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "A://h:1,SSL://h:2",
            "A:SASL_SSL",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "PLAIN,GSSAPI",
            "required",
            "PEM",
            "User:x;User:y",
            STANDARD_AUTHORIZER,
            "true",
            "100",
            "-1",
        ]
    ),
)


@settings(max_examples=400)
@given(st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_any_config_is_taken_or_refused_in_one_line(values: dict[str, str]) -> None:
    try:
        config = server_config(values)
    except ServerConfigError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert config.listeners
    for listener in config.listeners:
        assert listener.uses_sasl == bool(listener.sasl_mechanisms)
        assert listener.uses_tls == (listener.tls is not None)
        assert 0 <= listener.port <= 65535


def test_broker_liveness_keys_have_kafkas_defaults_and_are_checked() -> None:
    default = server_config({})
    assert (default.broker_session_timeout_ms, default.broker_heartbeat_interval_ms) == (
        9000,
        2000,
    )
    given = server_config(
        {"broker.session.timeout.ms": "18000", "broker.heartbeat.interval.ms": "3000"}
    )
    assert (given.broker_session_timeout_ms, given.broker_heartbeat_interval_ms) == (18000, 3000)
    with pytest.raises(ServerConfigError, match=r"broker.heartbeat.interval.ms=9000 must be below"):
        server_config({"broker.heartbeat.interval.ms": "9000"})
