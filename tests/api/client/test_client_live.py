"""`mlog --command-config` and `AdminClient` against a real `mlog serve` with secured listeners.

SASL_PLAINTEXT (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), SSL with a client certificate and
SASL_SSL, with certificates made by trustme; every write carries the principal the client
logged in as.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from api.cli.main import main
from api.client import AdminClient
from api.client.connection import ClientError
from api.security.client_config import client_security
from api.security.principal import PrincipalMapper
from api.security.tls import server_context
from api.server.server import MetadataServer, ServerListener
from tests.support.sasl_users import seed_users
from tests.support.server_thread import running_server

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


@dataclass
class Pki:
    ca: str
    keystore: str
    client_cert: str
    client_key: str


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(root / "server.pem")
    )
    client = ca.issue_cert("svc@example.com", common_name="svc", organization_unit_name="Ops")
    client.cert_chain_pems[0].write_to_path(str(root / "client.pem"))
    client.private_key_pem.write_to_path(str(root / "client.key"))
    return Pki(*(str(root / n) for n in ("ca.pem", "server.pem", "client.pem", "client.key")))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[MetadataServer]:
    log_dir = tmp_path_factory.mktemp("live") / "log"
    seed_users(log_dir)
    listeners = [
        ServerListener(
            name="INTERNAL", security_protocol="SASL_PLAINTEXT", port=0, sasl_mechanisms=MECHANISMS
        ),
        ServerListener(
            name="EXTERNAL",
            security_protocol="SASL_SSL",
            port=0,
            sasl_mechanisms=MECHANISMS,
            ssl_context=server_context(pki.keystore),
        ),
        ServerListener(
            name="SERVICES",
            security_protocol="SSL",
            port=0,
            ssl_context=server_context(pki.keystore, None, pki.ca, "required"),
            certificate_principal=PrincipalMapper("RULE:^CN=(.*?),.*$/$1/").peer_principal,
        ),
    ]
    with running_server(log_dir, listeners=listeners, failed_authentication_delay_ms=10) as running:
        yield running


def address(server: MetadataServer, name: str) -> str:
    port = next(listener.port for listener in server.listeners if listener.name == name)
    return f"127.0.0.1:{port}"


def created_by(server: MetadataServer, topic: str) -> str | None:
    for entry in server.service.log.read():
        if getattr(entry.record, "name", None) == topic:
            return entry.principal
    raise AssertionError(f"no record names {topic}")


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_cli_over_sasl_plaintext(
    server: MetadataServer, tmp_path: Path, mechanism: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(
        tmp_path,
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
        "sasl.username=alice\nsasl.password=alice-secret\n",
    )
    topic = f"cli-{mechanism.lower()}"
    base = ["--bootstrap-server", address(server, "INTERNAL"), "--command-config", path]
    assert main([*base, "topics", "create", "--topic", topic, "--partitions", "1"]) == 0
    assert main([*base, "topics", "list"]) == 0
    assert topic in capsys.readouterr().out
    assert created_by(server, topic) == "User:alice"


def test_cli_wrong_password_against_the_server(
    server: MetadataServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=alice\nsasl.password=nope\n",
    )
    code = main(
        [
            "--bootstrap-server",
            address(server, "INTERNAL"),
            "--command-config",
            path,
            "topics",
            "list",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "mlog: error: authentication failed: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512 (error 58, user 'alice')\n"
    )


def test_cli_without_a_config_on_a_sasl_listener(
    server: MetadataServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--bootstrap-server", address(server, "INTERNAL"), "topics", "list"]) == 2
    assert "--command-config" in capsys.readouterr().err


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_admin_client_over_sasl_ssl(server: MetadataServer, pki: Pki, mechanism: str) -> None:
    security = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="bob" password="b=b,\u00e9";',
            "ssl.ca.location": pki.ca,
        }
    )
    async with await AdminClient.connect(address(server, "EXTERNAL"), security=security) as client:
        from replay.controller.commands import CreatableTopic

        topic = f"tls-{mechanism.lower()}"
        (result,) = await client.create_topics([CreatableTopic(name=topic, num_partitions=1)])
        assert result.outcome.ok
    assert created_by(server, topic) == "User:bob"


async def test_admin_client_over_ssl_with_a_certificate(server: MetadataServer, pki: Pki) -> None:
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": pki.ca,
            "ssl.certificate.location": pki.client_cert,
            "ssl.key.location": pki.client_key,
        }
    )
    async with await AdminClient.connect(address(server, "SERVICES"), security=security) as client:
        from replay.controller.commands import CreatableTopic

        (result,) = await client.create_topics([CreatableTopic(name="by-cert", num_partitions=1)])
        assert result.outcome.ok
    assert created_by(server, "by-cert") == "User:svc"


async def test_sasl_client_on_an_ssl_listener_without_sasl(
    server: MetadataServer, pki: Pki
) -> None:
    security = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "ssl.ca.location": pki.ca,
            "ssl.certificate.location": pki.client_cert,
            "ssl.key.location": pki.client_key,
        }
    )
    with pytest.raises(ClientError, match="ILLEGAL_SASL_STATE"):
        await AdminClient.connect(address(server, "SERVICES"), security=security)
