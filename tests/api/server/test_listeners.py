"""Several listeners at once, TLS (SSL with client certificates, SASL_SSL) and hostile TLS peers.

Certificates are made at test time by `trustme`: one CA signs the server's certificate (for
127.0.0.1 and localhost) and the clients'. Listeners are made from their config
(`listeners.server_listener`), the path `mlog serve` takes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.metadata.v1.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from api.security.plain import plain_token
from api.server.config import ListenerConfig, TlsConfig
from api.server.limits import ServerLimits
from api.server.listeners import server_listener
from api.server.server import MetadataServer
from replay.controller.authorizer import STANDARD_AUTHORIZER
from tests.support.paths import DATA, INTEROP
from tests.support.sasl_users import USERS, Raw, created_by, seed_users
from tests.support.server_process import serve_process, serving_address
from tests.support.server_thread import running_server

RULES = "RULE:^CN=([A-Za-z.-]+),OU=Services,.*$/$1/L,DEFAULT"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pki:
    """PEM files of a test CA, the server's key and chain, and two clients'."""

    ca: Path
    keystore: Path
    service_cert: Path
    service_key: Path
    stranger_cert: Path
    stranger_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(folder / "server.pem")
    )
    service = ca.issue_cert(
        "orders.example.com",
        common_name="Orders.Example.com",
        organization_unit_name="Services",
        organization_name="Example",
    )
    service.cert_chain_pems[0].write_to_path(str(folder / "service.pem"))
    service.private_key_pem.write_to_path(str(folder / "service.key"))
    stranger = trustme.CA().issue_cert("stranger.example.com", common_name="stranger")
    stranger.cert_chain_pems[0].write_to_path(str(folder / "stranger.pem"))
    stranger.private_key_pem.write_to_path(str(folder / "stranger.key"))
    return Pki(
        ca=folder / "ca.pem",
        keystore=folder / "server.pem",
        service_cert=folder / "service.pem",
        service_key=folder / "service.key",
        stranger_cert=folder / "stranger.pem",
        stranger_key=folder / "stranger.key",
    )


def _listener(
    name: str, protocol: str, pki: Pki, *, client_auth: str = "none", rules: str = RULES
) -> Any:
    tls = None
    if protocol.endswith("SSL"):
        tls = TlsConfig(
            keystore_location=pki.keystore,
            truststore_location=pki.ca,
            client_auth=client_auth,
            principal_mapping_rules=rules,
        )
    mechanisms = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN") if "SASL" in protocol else ()
    return server_listener(
        ListenerConfig(
            name=name,
            security_protocol=protocol,
            host="127.0.0.1",
            port=0,
            sasl_mechanisms=mechanisms,
            tls=tls,
        )
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[MetadataServer]:
    log_dir = tmp_path_factory.mktemp("listeners") / "log"
    seed_users(log_dir)
    listeners = [
        _listener("PLAINTEXT", "PLAINTEXT", pki),
        _listener("INTERNAL", "SASL_PLAINTEXT", pki),
        _listener("SERVICES", "SSL", pki, client_auth="required"),
        _listener("EXTERNAL", "SASL_SSL", pki),
        _listener("OPTIONAL", "SSL", pki, client_auth="requested"),
        _listener("STRICT", "SSL", pki, client_auth="required", rules="RULE:^CN=ops,.*$/ops/"),
    ]
    with running_server(
        log_dir, brokers=3, listeners=listeners, failed_authentication_delay_ms=10
    ) as running:
        yield running


def _client_context(pki: Pki, *, certificate: bool = True, stranger: bool = False) -> Any:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if certificate:
        cert, key = (
            (pki.stranger_cert, pki.stranger_key)
            if stranger
            else (pki.service_cert, pki.service_key)
        )
        context.load_cert_chain(str(cert), str(key))
    return context


class TlsRaw(Raw):
    """A raw frame client over TLS."""

    def __init__(self, address: str, context: ssl.SSLContext) -> None:
        host, port = address.rsplit(":", 1)
        plain = socket.create_connection((host, int(port)), timeout=10)
        self.sock = context.wrap_socket(plain, server_hostname=host)
        self.correlation = 0

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True


# ----------------------------------------------------------------------------- listeners


def test_each_listener_advertises_itself(server: MetadataServer, pki: Pki) -> None:
    ports = {listener.name: listener.port for listener in server.listeners}
    assert len(set(ports.values())) == 6 and 0 not in ports.values()
    raw = Raw(server.listener_address("PLAINTEXT"))
    try:
        brokers = raw.answer(MetadataRequest(topics=())).brokers
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", ports["PLAINTEXT"])]
        cluster = raw.answer(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert [b.port for b in cluster.brokers] == [ports["PLAINTEXT"]]
    finally:
        raw.close()
    tls = TlsRaw(server.listener_address("SERVICES"), _client_context(pki))
    try:
        brokers = tls.answer(MetadataRequest(topics=())).brokers
        assert [b.port for b in brokers] == [ports["SERVICES"]]
    finally:
        tls.close()


@pytest.mark.interop
@pytest.mark.process
def test_serve_with_a_secured_config_file(tmp_path: Path, pki: Pki) -> None:
    text = (DATA / "secured-server.properties").read_text()
    text = text.replace("@KEYSTORE@", str(pki.keystore)).replace("@TRUSTSTORE@", str(pki.ca))
    config = tmp_path / "server.properties"
    config.write_text(text)
    seed_users(tmp_path / "data" / "log")
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        # No --listen (serve_process gives one): the config's three listeners.
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "api.cli", "serve"),
                *("--data-dir", str(tmp_path / "data"), "--config", str(config)),
            ],
            stderr=err,
        )
    try:
        address = serving_address(process, stderr)
        log = stderr.read_text()
        assert "(SASL_PLAINTEXT as INTERNAL" in log
        assert "(SASL_SSL as EXTERNAL" in log and "(SSL as SERVICES" in log
        assert "sasl.enabled.mechanisms: GSSAPI not supported" in log
        assert "sasl.mechanism.inter.broker.protocol is ignored" in log
        assert "listener.name.external.scram-sha-256.sasl.jaas.config" in log
        # The first listener, INTERNAL, takes only SCRAM-SHA-512 (listener.name.internal...).
        admin = KafkaAdminClient(
            bootstrap_servers=address,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password=USERS["alice"],
            request_timeout_ms=10_000,
        )
        try:
            assert admin.list_topics() == []
            assert admin.describe_cluster()["controller_id"] == 0
        finally:
            admin.close()
        raw = Raw(address)
        try:
            answer = raw.answer(SaslHandshakeRequest(mechanism="PLAIN"))
            assert (answer.error_code, list(answer.mechanisms)) == (33, ["SCRAM-SHA-512"])
        finally:
            raw.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


@pytest.mark.process
def test_listen_flag_still_means_one_plaintext_listener(tmp_path: Path) -> None:
    with serve_process(tmp_path / "data", tmp_path / "stderr") as process:
        log = process.log()
        assert "(PLAINTEXT, advertised 127.0.0.1:" in log
        assert log.count("serving on") == 1
        assert process.stop() == 0


# ----------------------------------------------------------------------------- SSL


@pytest.mark.interop
def test_kafka_python_over_ssl_with_a_client_certificate(server: MetadataServer, pki: Pki) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=server.listener_address("SERVICES"),
        security_protocol="SSL",
        ssl_cafile=str(pki.ca),
        ssl_certfile=str(pki.service_cert),
        ssl_keyfile=str(pki.service_key),
        request_timeout_ms=10_000,
    )
    try:
        admin.create_topics([KpNewTopic("kp-ssl", 1, 1)])
        assert "kp-ssl" in admin.list_topics()
    finally:
        admin.close()
    # The DN is CN=Orders.Example.com,OU=Services,O=Example; the rule takes CN in lower case.
    assert created_by(server, "kp-ssl") == "User:orders.example.com"


@pytest.mark.interop
def test_confluent_kafka_over_ssl_with_a_client_certificate(
    server: MetadataServer, pki: Pki
) -> None:
    admin = AdminClient(
        {
            "bootstrap.servers": server.listener_address("SERVICES"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.service_cert),
            "ssl.key.location": str(pki.service_key),
        }
    )
    for future in admin.create_topics([NewTopic("ck-ssl", 1, 1)]).values():
        future.result(timeout=20)
    assert "ck-ssl" in admin.list_topics(timeout=20).topics
    assert created_by(server, "ck-ssl") == "User:orders.example.com"


def test_ssl_without_a_client_certificate_where_requested_is_anonymous(
    server: MetadataServer, pki: Pki
) -> None:
    raw = TlsRaw(server.listener_address("OPTIONAL"), _client_context(pki, certificate=False))
    try:
        assert raw.answer(MetadataRequest(topics=())).brokers
    finally:
        raw.close()
    raw = TlsRaw(server.listener_address("OPTIONAL"), _client_context(pki))
    try:
        assert raw.answer(MetadataRequest(topics=())).brokers
    finally:
        raw.close()


def test_a_missing_client_certificate_where_required_closes_and_is_logged(
    server: MetadataServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server")
    # TLS 1.3: the server refuses the missing certificate after the client's handshake ends.
    assert _refused(server.listener_address("SERVICES"), _client_context(pki, certificate=False))
    _wait_for_log(caplog, "TLS handshake failed")
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1
    assert "127.0.0.1:" in lines[0] and "listener SERVICES" in lines[0]


def test_a_certificate_from_another_ca_is_refused(
    server: MetadataServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server")
    assert _refused(server.listener_address("SERVICES"), _client_context(pki, stranger=True))
    _wait_for_log(caplog, "TLS handshake failed")


def test_a_certificate_no_rule_maps_is_closed_and_logged(
    server: MetadataServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server")
    assert _refused(server.listener_address("STRICT"), _client_context(pki))
    _wait_for_log(caplog, "maps to no principal")
    (line,) = [r.getMessage() for r in caplog.records if "maps to no principal" in r.getMessage()]
    assert "listener STRICT" in line and "CN=Orders.Example.com,OU=Services,O=Example" in line


def test_plaintext_on_a_tls_port_closes_that_connection_only(
    server: MetadataServer, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server")
    raw = Raw(server.listener_address("EXTERNAL"))
    try:
        raw.send(SaslHandshakeRequest(mechanism="PLAIN"))
        assert raw.closed()
    finally:
        raw.close()
    _wait_for_log(caplog, "TLS handshake failed")
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1 and "listener EXTERNAL" in lines[0]
    # The listener goes on serving TLS clients.
    tls = TlsRaw(server.listener_address("EXTERNAL"), _client_context(pki, certificate=False))
    try:
        assert tls.answer(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    finally:
        tls.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x16\x03\x01\x00\x05hello",
        b"\x16\x03\x03" + b"\xff" * 600,
        b"\x00" * 64,
        b"GET / HTTP/1.1\r\n\r\n",
    ],
)
def test_garbage_on_a_tls_port_is_closed(server: MetadataServer, garbage: bytes) -> None:
    with socket.create_connection(("127.0.0.1", _port(server, "SERVICES")), timeout=10) as sock:
        sock.sendall(garbage)
        try:
            while sock.recv(4096):  # a TLS alert at most, then the end (a timeout fails)
                pass
        except ConnectionResetError:
            pass


def test_a_stalled_handshake_holds_up_no_one(server: MetadataServer, pki: Pki) -> None:
    # A peer that connects to the TLS port and sends half a ClientHello, then nothing.
    with socket.create_connection(("127.0.0.1", _port(server, "SERVICES")), timeout=10) as stall:
        stall.sendall(b"\x16\x03\x01\x02\x00\x01")
        raw = TlsRaw(server.listener_address("SERVICES"), _client_context(pki))
        try:
            assert raw.answer(MetadataRequest(topics=())).brokers
        finally:
            raw.close()


# ----------------------------------------------------------------------------- SASL_SSL


@pytest.mark.interop
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(server: MetadataServer, pki: Pki, mechanism: str) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=server.listener_address("EXTERNAL"),
        security_protocol="SASL_SSL",
        ssl_cafile=str(pki.ca),
        sasl_mechanism=mechanism,
        sasl_plain_username="bob",
        sasl_plain_password=USERS["bob"],
        request_timeout_ms=10_000,
    )
    topic = f"kp-sasl-ssl-{mechanism.lower()}"
    try:
        admin.create_topics([KpNewTopic(topic, 1, 1)])
        assert topic in admin.list_topics()
    finally:
        admin.close()
    assert created_by(server, topic) == "User:bob"


@pytest.mark.interop
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_confluent_kafka_over_sasl_ssl(server: MetadataServer, pki: Pki, mechanism: str) -> None:
    admin = AdminClient(
        {
            "bootstrap.servers": server.listener_address("EXTERNAL"),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
    )
    topic = f"ck-sasl-ssl-{mechanism.lower()}"
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=20)
    assert topic in admin.list_topics(timeout=20).topics
    assert created_by(server, topic) == "User:alice"


@pytest.mark.interop
def test_sasl_ssl_with_a_client_certificate_takes_the_login_principal(
    server: MetadataServer, pki: Pki
) -> None:
    # On SASL_SSL the principal comes from the login, whatever certificate the client shows.
    admin = KafkaAdminClient(
        bootstrap_servers=server.listener_address("EXTERNAL"),
        security_protocol="SASL_SSL",
        ssl_cafile=str(pki.ca),
        ssl_certfile=str(pki.service_cert),
        ssl_keyfile=str(pki.service_key),
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        request_timeout_ms=10_000,
    )
    try:
        admin.create_topics([KpNewTopic("sasl-ssl-cert", 1, 1)])
    finally:
        admin.close()
    assert created_by(server, "sasl-ssl-cert") == "User:alice"


def test_metadata_before_login_on_sasl_ssl_closes(server: MetadataServer, pki: Pki) -> None:
    raw = TlsRaw(server.listener_address("EXTERNAL"), _client_context(pki, certificate=False))
    try:
        raw.send(MetadataRequest(topics=()))
        assert raw.closed()
    finally:
        raw.close()


# ----------------------------------------------------------------------------- helpers


def _refused(address: str, context: ssl.SSLContext) -> bool:
    """A Metadata request over TLS gets no answer: the handshake or the connection fails."""
    try:
        raw = TlsRaw(address, context)
    except (ssl.SSLError, OSError):
        return True
    try:
        raw.send(MetadataRequest(topics=()))
        return raw.frame() is None
    except (ssl.SSLError, OSError):
        return True
    finally:
        raw.close()


def _port(server: MetadataServer, name: str) -> int:
    return next(listener.port for listener in server.listeners if listener.name == name)


def _wait_for_log(caplog: pytest.LogCaptureFixture, words: str) -> None:
    """Wait (a few seconds at most) for the server thread to log a line holding `words`."""
    import time

    deadline = time.monotonic() + 10
    while not any(words in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, f"no log line with {words!r}: {caplog.text}"
        time.sleep(0.01)


def test_sasl_requests_on_a_listener_without_sasl_are_illegal_state(server: MetadataServer) -> None:
    raw = Raw(server.listener_address("PLAINTEXT"))
    try:
        assert raw.answer(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 34
        answer = raw.answer(SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"))
        assert answer.error_code == 34
        assert raw.answer(MetadataRequest(topics=())).brokers  # still served
    finally:
        raw.close()


def test_a_silent_tls_peer_is_closed_by_the_idle_limit(tmp_path: Path, pki: Pki) -> None:
    with running_server(
        tmp_path / "log",
        brokers=1,
        listeners=[_listener("SERVICES", "SSL", pki)],
        limits=ServerLimits(connections_max_idle_ms=200),
    ) as idle_server:
        with socket.create_connection(
            ("127.0.0.1", _port(idle_server, "SERVICES")), timeout=10
        ) as sock:
            assert sock.recv(1) == b""  # closed, well before the socket's timeout
        assert idle_server.limit_closes == {"connections.max.idle.ms": 1}


# ----------------------------------------------------------------------------- kafkajs


@pytest.mark.interop
@pytest.mark.process
@pytest.mark.parametrize("mechanism", ["scram-sha-256", "scram-sha-512"])
def test_kafkajs_with_scram_over_ssl(server: MetadataServer, pki: Pki, mechanism: str) -> None:
    interop = INTEROP
    if shutil.which("node") is None or not (interop / "node_modules" / "kafkajs").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("node or kafkajs is missing (CI=true: every interop client is tested)")
        pytest.skip("node or kafkajs is not installed; `make test` installs them")
    topic = f"kjs-{mechanism}"

    def run(password: str) -> subprocess.CompletedProcess[str]:
        address = server.listener_address("EXTERNAL")
        args = [address, str(pki.ca), mechanism, "alice", password, topic]
        return subprocess.run(
            ["node", "kafkajs_scram_ssl.js", *args],
            cwd=interop,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = run(USERS["alice"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"created": True, "listed": True}
    assert created_by(server, topic) == "User:alice"
    refused = run("wrong")
    assert refused.returncode == 1
    assert "invalid credentials" in refused.stderr, refused.stderr


# ----------------------------------------------------------------------------- from nothing


def _mlog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.process
def test_a_secured_set_up_from_nothing_with_mlog_alone(tmp_path: Path, pki: Pki) -> None:
    # docs/security.md's steps: a user written into the data directory, a SASL_SSL server from
    # a config file, and the CLI through it with a client config.
    data = tmp_path / "data"
    (tmp_path / "admin.password").write_text("change-me\n")
    created = _mlog(
        *("users", "scram-set", "--data-dir", str(data), "--name", "admin"),
        *("--mechanism", "SCRAM-SHA-512", "--password-file", str(tmp_path / "admin.password")),
    )
    assert created.returncode == 0, created.stderr
    config = tmp_path / "server.properties"
    config.write_text(
        "listeners=EXTERNAL://127.0.0.1:0\nlistener.security.protocol.map=EXTERNAL:SASL_SSL\n"
        f"sasl.enabled.mechanisms=SCRAM-SHA-512\nssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pki.keystore}\n"
        f"authorizer.class.name={STANDARD_AUTHORIZER}\nsuper.users=User:admin\n"
    )
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "api.cli", "serve"),
                *("--data-dir", str(data), "--config", str(config)),
            ],
            stderr=err,
        )
    try:
        address = serving_address(process, stderr)
        client = tmp_path / "client.properties"
        client.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
            f"sasl.password=change-me\nssl.ca.location={pki.ca}\n"
        )
        remote = ("--bootstrap-server", address, "--command-config", str(client))
        done = _mlog("namespaces", "list", *remote)
        assert done.returncode == 0, done.stderr
        done = _mlog("users", "list", *remote, "--output", "json")
        assert done.returncode == 0, done.stderr
        assert "admin" in done.stdout and "change-me" not in done.stdout
        client.write_text(client.read_text().replace("change-me", "wrong"))
        refused = _mlog("namespaces", "list", *remote)
        assert refused.returncode == 2
        assert "invalid credentials" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
    log = stderr.read_text()
    assert "authorizer on: super.users=User:admin" in log
    assert "failed authentication from 127.0.0.1:" in log
    assert "change-me" not in log


def test_a_handshaking_tls_connection_counts_against_max_connections(
    tmp_path: Path, pki: Pki
) -> None:
    with running_server(
        tmp_path / "log",
        brokers=1,
        listeners=[_listener("SERVICES", "SSL", pki)],
        limits=ServerLimits(max_connections=1),
    ) as full_server:
        port = _port(full_server, "SERVICES")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as first:
            first.sendall(b"\x16\x03\x01")  # a handshake begun, never finished
            with (
                socket.create_connection(("127.0.0.1", port), timeout=10) as second,
                contextlib.suppress(ConnectionResetError),  # an abort may reset it
            ):
                assert second.recv(1) == b""  # over max.connections: closed at once
        assert full_server.limit_closes == {"max.connections": 1}


@pytest.mark.interop
def test_an_ipv6_listener_beside_an_ipv4_one(tmp_path: Path, pki: Pki) -> None:
    ipv6 = server_listener(
        ListenerConfig(
            name="V6",
            security_protocol="SASL_PLAINTEXT",
            host="::1",
            port=0,
            sasl_mechanisms=("PLAIN",),
        )
    )
    seed_users(tmp_path / "log")
    with running_server(
        tmp_path / "log", brokers=1, listeners=[_listener("PLAINTEXT", "PLAINTEXT", pki), ipv6]
    ) as dual:
        address = dual.listener_address("V6")
        assert address.startswith("[::1]:")
        raw = Raw(address)
        try:
            assert raw.answer(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            token = plain_token("alice", USERS["alice"])
            assert raw.answer(SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
            brokers = raw.answer(MetadataRequest(topics=())).brokers
            assert [(b.host, b.port) for b in brokers] == [("::1", _port(dual, "V6"))]
        finally:
            raw.close()
        admin = KafkaAdminClient(
            bootstrap_servers=address,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="bob",
            sasl_plain_password=USERS["bob"],
            request_timeout_ms=10_000,
        )
        try:
            admin.create_topics([KpNewTopic("over-ipv6", 1, 1)])
        finally:
            admin.close()
        assert created_by(dual, "over-ipv6") == "User:bob"


# ----------------------------------------------------------------------------- with ACLs


@pytest.mark.interop
def test_the_authenticated_principal_is_what_the_authorizer_decides_on(
    tmp_path: Path, pki: Pki
) -> None:
    from kafka import errors as kerrors

    from replay.controller.authorizer import AuthorizerConfig

    log_dir = tmp_path / "log"
    seed_users(log_dir)
    with running_server(
        log_dir,
        brokers=3,
        listeners=[
            _listener("EXTERNAL", "SASL_SSL", pki),
            _listener("SERVICES", "SSL", pki, client_auth="required"),
        ],
        authorizer=AuthorizerConfig(
            super_users=frozenset({"User:alice", "User:orders.example.com"})
        ),
    ) as secured:

        def admin(user: str) -> KafkaAdminClient:
            return KafkaAdminClient(
                bootstrap_servers=secured.listener_address("EXTERNAL"),
                security_protocol="SASL_SSL",
                ssl_cafile=str(pki.ca),
                sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username=user,
                sasl_plain_password=USERS[user],
                request_timeout_ms=10_000,
            )

        alice, bob = admin("alice"), admin("bob")
        try:
            alice.create_topics([KpNewTopic("acl-alice", 1, 1)])
            with pytest.raises(kerrors.TopicAuthorizationFailedError):
                bob.create_topics([KpNewTopic("acl-bob", 1, 1)])
            assert "acl-alice" in alice.list_topics()
            assert "acl-alice" not in bob.list_topics()  # bob may not describe it
        finally:
            alice.close()
            bob.close()
        service = KafkaAdminClient(
            bootstrap_servers=secured.listener_address("SERVICES"),
            security_protocol="SSL",
            ssl_cafile=str(pki.ca),
            ssl_certfile=str(pki.service_cert),
            ssl_keyfile=str(pki.service_key),
            request_timeout_ms=10_000,
        )
        try:
            service.create_topics([KpNewTopic("acl-service", 1, 1)])
        finally:
            service.close()
        assert created_by(secured, "acl-alice") == "User:alice"
        assert created_by(secured, "acl-service") == "User:orders.example.com"
        assert secured.service.image.topics.get_by_name("acl-bob") is None
