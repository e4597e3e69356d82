"""TLS contexts from PEM files: real handshakes with certificates made by trustme."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from api.security.errors import SecurityConfigError
from api.security.principal import PrincipalMapper
from api.security.tls import ClientAuth, client_context, server_context


class Pki:
    """A CA, a server keystore for localhost and a client certificate, as files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA(organization_name="Test CA")
        self.ca_file = self.write("ca.pem", self.ca.cert_pem.bytes())
        server = self.ca.issue_cert("localhost", "127.0.0.1")
        self.keystore = self.write(
            "server.keystore.pem", server.private_key_and_cert_chain_pem.bytes()
        )
        client = self.ca.issue_cert(
            "client@example.com",
            common_name="alice",
            organization_unit_name="ServiceUsers",
            organization_name="Acme",
        )
        self.client_cert = self.write(
            "client.pem", b"".join(blob.bytes() for blob in client.cert_chain_pems)
        )
        self.client_key = self.write("client.key", client.private_key_pem.bytes())
        self.client_both = self.write(
            "client.keystore.pem", client.private_key_and_cert_chain_pem.bytes()
        )
        self.client_key_pem = client.private_key_pem.bytes()

    def write(self, name: str, data: bytes) -> str:
        path = self.root / name
        path.write_bytes(data)
        return str(path)

    def encrypted_key(self, password: bytes) -> str:
        key = serialization.load_pem_private_key(self.client_key_pem, password=None)
        data = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
        return self.write("client.encrypted.key", data)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _echo_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer the peer's certificate subject DN (or '-') and close."""
    try:
        await reader.read(1)
        cert: Any = writer.get_extra_info("peercert")
        principal = PrincipalMapper().peer_principal(cert)
        name = principal.removeprefix("User:")
        writer.write((name if cert else "-").encode() + b"\n")
        await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@pytest.fixture
async def tls_server(pki: Pki) -> AsyncIterator[Callable[..., Awaitable[int]]]:
    servers: list[asyncio.Server] = []

    async def start(context: ssl.SSLContext) -> int:
        server = await asyncio.start_server(_echo_peer, "127.0.0.1", 0, ssl=context)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def talk(port: int, context: ssl.SSLContext, host: str = "localhost") -> str:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host), 10
    )
    try:
        writer.write(b"x")
        await writer.drain()
        return (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
    finally:
        writer.close()


# ------------------------------------------------------------------------------ handshakes


async def test_server_and_client_contexts_talk(pki: Pki, tls_server: Any) -> None:
    port = await tls_server(server_context(pki.keystore))
    assert await talk(port, client_context(pki.ca_file)) == "-"


async def test_required_client_certificate_gives_the_mapped_principal(
    pki: Pki, tls_server: Any
) -> None:
    port = await tls_server(server_context(pki.keystore, None, pki.ca_file, "required"))
    context = client_context(pki.ca_file, pki.client_cert, pki.client_key)
    assert await talk(port, context) == "CN=alice,OU=ServiceUsers,O=Acme"
    # The key and the chain in one file (Kafka's PEM keystore) work the same.
    assert await talk(port, client_context(pki.ca_file, pki.client_both)) == (
        "CN=alice,OU=ServiceUsers,O=Acme"
    )


async def test_required_client_certificate_refuses_a_client_without_one(
    pki: Pki, tls_server: Any
) -> None:
    port = await tls_server(server_context(pki.keystore, None, pki.ca_file, ClientAuth.REQUIRED))
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        answer = await talk(port, client_context(pki.ca_file))
        assert answer == "", "the server answered a client without a certificate"
        raise ConnectionError("closed without an answer")


async def test_requested_client_certificate_is_optional(pki: Pki, tls_server: Any) -> None:
    port = await tls_server(server_context(pki.keystore, None, pki.ca_file, "Requested"))
    assert await talk(port, client_context(pki.ca_file)) == "-"
    context = client_context(pki.ca_file, pki.client_cert, pki.client_key)
    assert await talk(port, context) == "CN=alice,OU=ServiceUsers,O=Acme"


async def test_client_refuses_a_server_of_another_ca(
    pki: Pki, tls_server: Any, tmp_path: Path
) -> None:
    port = await tls_server(server_context(pki.keystore))
    other = trustme.CA()
    other_file = tmp_path / "other-ca.pem"
    other.cert_pem.write_to_path(str(other_file))
    with pytest.raises(ssl.SSLCertVerificationError):
        await talk(port, client_context(str(other_file)))


async def test_host_name_is_checked_unless_turned_off(pki: Pki, tls_server: Any) -> None:
    port = await tls_server(server_context(pki.keystore))
    with pytest.raises(ssl.SSLCertVerificationError, match=r"mismatch|doesn't match"):
        await talk(port, client_context(pki.ca_file), host="kafka.example.com")
    unchecked = client_context(pki.ca_file, check_hostname=False)
    assert await talk(port, unchecked, host="kafka.example.com") == "-"
    # Turning off the host-name check does not turn off the chain's verification.
    assert unchecked.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_tls_below_1_2_is_refused(pki: Pki, tls_server: Any) -> None:
    port = await tls_server(server_context(pki.keystore))
    old = client_context(pki.ca_file)
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await talk(port, old)


def test_contexts_demand_tls_1_2() -> None:
    assert client_context().minimum_version == ssl.TLSVersion.TLSv1_2
    context = client_context()
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_without_a_ca_file_the_system_cas_are_trusted(pki: Pki) -> None:
    ours = client_context(pki.ca_file).get_ca_certs()
    assert len(ours) == 1 and ours[0]["subject"] != ()
    # librdkafka's ssl.ca.location=probe means the same as none: the system's store.
    assert client_context("probe").cert_store_stats() == client_context().cert_store_stats()


def test_keystore_with_the_key_after_the_chain(pki: Pki, tmp_path: Path) -> None:
    data = Path(pki.keystore).read_bytes()
    match = re.search(rb"-----END [A-Z ]*PRIVATE KEY-----\n", data)
    assert match is not None and match.start() > 0
    key_end = match.end()
    swapped = tmp_path / "swapped.pem"
    swapped.write_bytes(data[key_end:] + data[:key_end])
    server_context(str(swapped))


# ------------------------------------------------------------------------------ bad files


def test_encrypted_client_key(pki: Pki) -> None:
    key = pki.encrypted_key(b"k3y-pass")
    client_context(pki.ca_file, pki.client_cert, key, "k3y-pass")
    with pytest.raises(SecurityConfigError, match="does not decrypt") as wrong:
        client_context(pki.ca_file, pki.client_cert, key, "wrong")
    assert "wrong" not in str(wrong.value).replace("does not", "")
    with pytest.raises(SecurityConfigError, match=r"encrypted; set ssl.key.password"):
        client_context(pki.ca_file, pki.client_cert, key)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "no such file"),
        (b"", "not a PEM file"),
        (b"\x00\xff garbage", "not a PEM file"),
        (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "not a valid"),
    ],
)
def test_bad_keystore_is_one_clear_line(content: bytes | None, match: str, tmp_path: Path) -> None:
    path = tmp_path / "keystore.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SecurityConfigError, match=match) as failure:
        server_context(str(path))
    message = str(failure.value)
    assert message.startswith(f"ssl.keystore.location={path}") and "\n" not in message


def test_keystore_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SecurityConfigError, match="not a file"):
        server_context(str(tmp_path))
    with pytest.raises(SecurityConfigError, match="empty"):
        server_context("")


def test_keystore_without_a_key(pki: Pki) -> None:
    with pytest.raises(SecurityConfigError, match=r"ssl.keystore.location"):
        server_context(pki.ca_file)


def test_key_of_another_certificate(pki: Pki, tmp_path: Path) -> None:
    other = trustme.CA().issue_cert("localhost")
    key = tmp_path / "other.key"
    other.private_key_pem.write_to_path(str(key))
    with pytest.raises(SecurityConfigError, match="does not match the certificate"):
        client_context(pki.ca_file, pki.client_cert, str(key))


def test_bad_truststore(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(SecurityConfigError, match=r"ssl.truststore.location=.*no such file"):
        server_context(pki.keystore, None, str(tmp_path / "nope.pem"), "required")
    bad = tmp_path / "bad-ca.pem"
    bad.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(SecurityConfigError, match=r"ssl.ca.location=.*not a valid PEM file of CA"):
        client_context(str(bad))


def test_client_auth_needs_a_truststore(pki: Pki) -> None:
    with pytest.raises(SecurityConfigError, match=r"needs ssl.truststore.location"):
        server_context(pki.keystore, None, None, "required")


@pytest.mark.parametrize("value", ["yes", "", "REQUIRE", "none "])
def test_client_auth_values(value: str) -> None:
    if value.strip().lower() in ("none",):
        assert ClientAuth.parse(value) is ClientAuth.NONE
        return
    with pytest.raises(SecurityConfigError, match="none, requested or required"):
        ClientAuth.parse(value)


def test_key_without_certificate_is_refused(pki: Pki) -> None:
    with pytest.raises(SecurityConfigError, match=r"without ssl.certificate.location"):
        client_context(pki.ca_file, None, pki.client_key)


def test_unreadable_keystore(pki: Pki, tmp_path: Path) -> None:
    import os

    path = tmp_path / "locked.pem"
    path.write_bytes(Path(pki.keystore).read_bytes())
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who reads any file (root)")
        with pytest.raises(SecurityConfigError, match="cannot be read"):
            server_context(str(path))
    finally:
        path.chmod(0o600)


def test_a_keystore_that_fails_to_read_even_for_root() -> None:
    # /proc/self/mem exists and opens, but reading its first page fails (EIO) for anyone.
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc/self/mem here")
    with pytest.raises(SecurityConfigError, match=r"ssl.keystore.location=/proc/self/mem: cannot"):
        server_context("/proc/self/mem")
