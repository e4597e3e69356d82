"""The client's TLS and SASL: `ClientConnection.connect(security=...)` and `mlog --command-config`.

The server here is a small asyncio server in the test, on its own thread, that speaks
ApiVersions, SaslHandshake and SaslAuthenticate with our sans-IO SCRAM and PLAIN servers, as
Kafka does: before a login only those three APIs are answered, anything else closes the
connection; a refused login is answered with SASL_AUTHENTICATION_FAILED (58) and the
connection is closed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme

from api.cli.main import main
from api.client.connection import ClientConnection, ClientError
from api.protocol import codec
from api.security.client_config import ClientSecurity, SecurityProtocol, client_security
from api.security.errors import AuthenticationFailed
from api.security.plain import PlainServer
from api.security.principal import PrincipalMapper
from api.security.scram import ScramServer
from api.security.tls import server_context
from records.model import ScramMechanism
from replay.security.scram_keys import ScramCredential, new_credential
from replay.security.scram_rules import mechanism_by_name

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
ALL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")

_CREDENTIALS = {
    (name, mechanism): new_credential(mechanism, password)
    for name, password in (("alice", "alice-secret"), ("bob", "bob-secret"))
    for mechanism in (SHA256, SHA512)
}


def lookup(name: str, mechanism: ScramMechanism) -> ScramCredential | None:
    return _CREDENTIALS.get((name, mechanism))


def scram_lookup(mechanism: ScramMechanism) -> Callable[[str], ScramCredential | None]:
    return lambda name: lookup(name, mechanism)


Tamper = Callable[[int, bytes], bytes]
"""Rewrites the server's n-th SASL answer (a malicious server)."""


@dataclass
class FakeServer:
    """What the in-test server saw: API keys in order and the principals that logged in."""

    mechanisms: tuple[str, ...] = ALL_MECHANISMS
    sasl: bool = True
    failure_message: str | None = None
    """Sent instead of the refusal's own message (a server's text is not to be trusted)."""
    illegal_state: bool = False
    """Advertise the SASL APIs but answer SaslHandshake ILLEGAL_SASL_STATE (34), as Kafka does
    on a listener without SASL."""
    tamper: Tamper | None = None
    context: ssl.SSLContext | None = None
    seen: list[int] = field(default_factory=list)
    principals: list[str] = field(default_factory=list)
    port: int = 0

    def versions(self) -> list[dict[str, int]]:
        keys = [
            {"api_key": 18, "min_version": 0, "max_version": 4},
            {"api_key": 60, "min_version": 0, "max_version": 2},  # never answered
        ]
        if self.sasl or self.illegal_state:
            keys += [
                {"api_key": 17, "min_version": 0, "max_version": 1},
                {"api_key": 36, "min_version": 0, "max_version": 2},
            ]
        return keys

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        authenticated = not self.sasl
        login: ScramServer | PlainServer | None = None
        answers = 0
        cert: Any = writer.get_extra_info("peercert")
        if cert:
            self.principals.append(PrincipalMapper().peer_principal(cert))
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 0 < size < 1 << 20:
                    return  # not a Kafka frame (a TLS ClientHello, say)
                request = codec.decode_request(await reader.readexactly(size))
                key, version = request.header.api_key, request.header.api_version
                correlation = request.header.correlation_id
                self.seen.append(key)
                body: Any
                if key == 18:
                    body = codec.build(
                        codec.response_class(18, version),
                        error_code=0,
                        api_keys=self.versions(),
                        throttle_time=0,
                    )
                elif key == 17 and self.illegal_state:
                    body = codec.build(
                        codec.response_class(17, version), error_code=34, mechanisms=[]
                    )
                elif key == 17 and self.sasl and login is None:
                    name = request.body.mechanism
                    if name not in self.mechanisms:
                        body = codec.build(
                            codec.response_class(17, version),
                            error_code=33,
                            mechanisms=list(self.mechanisms),
                        )
                    else:
                        login = (
                            PlainServer(lookup)
                            if name == "PLAIN"
                            else ScramServer(
                                scram_lookup(mechanism_by_name(name)), mechanism_by_name(name)
                            )
                        )
                        body = codec.build(
                            codec.response_class(17, version),
                            error_code=0,
                            mechanisms=list(self.mechanisms),
                        )
                elif key == 36 and login is not None and not authenticated:
                    try:
                        challenge = login.evaluate(bytes(request.body.auth_bytes))
                    except AuthenticationFailed as exc:
                        writer.write(
                            codec.encode_response(
                                correlation,
                                codec.build(
                                    codec.response_class(36, version),
                                    error_code=58,
                                    error_message=self.failure_message or str(exc),
                                    auth_bytes=b"",
                                    session_lifetime=datetime.timedelta(0),
                                ),
                            )
                        )
                        await writer.drain()
                        return
                    if self.tamper is not None:
                        challenge = self.tamper(answers, challenge)
                    answers += 1
                    if login.complete:
                        authenticated = True
                        self.principals.append(f"User:{login.username}")
                    body = codec.build(
                        codec.response_class(36, version),
                        error_code=0,
                        error_message=None,
                        auth_bytes=challenge,
                        session_lifetime=datetime.timedelta(0),
                    )
                else:
                    return  # as Kafka: an unexpected request before the login closes
                writer.write(codec.encode_response(correlation, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@contextlib.contextmanager
def serving(server: FakeServer) -> Iterator[FakeServer]:
    """Run `server` on 127.0.0.1 on a thread of its own (the CLI runs its own event loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> asyncio.Server:
        return await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=server.context)

    listener = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    server.port = int(listener.sockets[0].getsockname()[1])
    try:
        yield server
    finally:

        async def stop() -> None:
            listener.close()
            await listener.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def sasl(
    mechanism: str, user: str = "alice", password: str = "alice-secret", **more: str
) -> ClientSecurity:
    props = {
        "security.protocol": more.pop("protocol", "SASL_PLAINTEXT"),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **more,
    }
    return client_security(props)


async def connect(
    server: FakeServer, security: ClientSecurity | None, host: str = "127.0.0.1"
) -> ClientConnection:
    return await ClientConnection.connect(
        f"{host}:{server.port}", security=security, timeout_ms=10_000
    )


# ------------------------------------------------------------------------------ SASL


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
async def test_login_comes_first_then_the_connection_works(mechanism: str) -> None:
    with serving(FakeServer()) as server:
        client = await connect(server, sasl(mechanism))
        try:
            # Usable after the login: one more request, answered.
            response = await client.request(
                18, client_software_name="t", client_software_version="1"
            )
            assert int(response.error_code) == 0
        finally:
            await client.close()
    assert server.principals == ["User:alice"]
    steps = 1 if mechanism == "PLAIN" else 2
    assert server.seen == [18, 17, *[36] * steps, 18]


async def test_plaintext_needs_no_login() -> None:
    with serving(FakeServer(sasl=False)) as server:
        async with await connect(server, None):
            pass
        async with await connect(server, client_security({})):
            pass
    assert server.seen == [18, 18] and server.principals == []


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
async def test_wrong_password_is_one_line_with_the_servers_message(mechanism: str) -> None:
    with serving(FakeServer()) as server, pytest.raises(ClientError) as failure:
        await connect(server, sasl(mechanism, password="wrong-pw"))
    message = str(failure.value)
    assert message.startswith("authentication failed: Authentication failed")
    assert "(error 58, user 'alice')" in message
    assert "\n" not in message and "wrong-pw" not in message
    assert server.principals == []


async def test_unknown_user_gets_the_same_answer_as_a_wrong_password() -> None:
    with serving(FakeServer()) as server:
        with pytest.raises(ClientError) as unknown:
            await connect(server, sasl("SCRAM-SHA-256", user="mallory", password="x"))
        with pytest.raises(ClientError) as wrong:
            await connect(server, sasl("SCRAM-SHA-256", user="alice", password="x"))
    assert str(unknown.value).replace("mallory", "alice") == str(wrong.value)


async def test_mechanism_the_server_does_not_enable() -> None:
    with (
        serving(FakeServer(mechanisms=("PLAIN",))) as server,
        pytest.raises(
            ClientError, match=r"does not enable SASL mechanism SCRAM-SHA-512 \(it enables: PLAIN\)"
        ),
    ):
        await connect(server, sasl("SCRAM-SHA-512"))


async def test_server_without_sasl() -> None:
    with (
        serving(FakeServer(sasl=False)) as server,
        pytest.raises(
            ClientError,
            match=r"does not answer SaslHandshake \(API 17\) .*is its listener SASL_PLAINTEXT",
        ),
    ):
        await connect(server, sasl("PLAIN"))


async def test_a_listener_that_refuses_sasl() -> None:
    with (
        serving(FakeServer(sasl=False, illegal_state=True)) as server,
        pytest.raises(ClientError, match=r"ILLEGAL_SASL_STATE, 34\); is it SASL_PLAINTEXT"),
    ):
        await connect(server, sasl("PLAIN"))


async def test_a_sasl_server_closes_a_client_that_did_not_log_in() -> None:
    with serving(FakeServer()) as server:
        client = await connect(server, None)
        try:
            with pytest.raises(ClientError, match="give the client config with --command-config"):
                await client.request(18, client_software_name="t", client_software_version="1")
                await client.request(
                    60, include_cluster_authorized_operations=False, include_fenced_brokers=False
                )
        finally:
            await client.close()


def _server_first_with(iterations: str) -> Tamper:
    def tamper(step: int, challenge: bytes) -> bytes:
        if step != 0:
            return challenge
        nonce, salt, _ = challenge.split(b",")
        return b",".join([nonce, salt, b"i=" + iterations.encode()])

    return tamper


@pytest.mark.parametrize("iterations", ["1000000000", "16385", "1"])
async def test_a_malicious_server_cannot_make_the_client_spin(iterations: str) -> None:
    with (
        serving(FakeServer(tamper=_server_first_with(iterations))) as server,
        pytest.raises(
            ClientError, match=f"asks for {iterations} SCRAM iterations; this client accepts"
        ),
    ):
        await connect(server, sasl("SCRAM-SHA-256"))


async def test_a_server_that_cannot_prove_the_credential_is_refused() -> None:
    def forge(step: int, challenge: bytes) -> bytes:
        return b"v=" + base64.b64encode(bytes(32)) if step == 1 else challenge

    with (
        serving(FakeServer(tamper=forge)) as server,
        pytest.raises(
            ClientError, match="authentication failed: the server's SCRAM signature is wrong"
        ),
    ):
        await connect(server, sasl("SCRAM-SHA-256"))


async def test_a_huge_server_message_is_refused() -> None:
    with (
        serving(FakeServer(tamper=lambda step, challenge: b"r=" + b"x" * 100_000)) as server,
        pytest.raises(ClientError, match=r"server-first message is invalid: .* longer than"),
    ):
        await connect(server, sasl("SCRAM-SHA-256"))


async def test_the_servers_message_is_one_clean_line() -> None:
    loud = FakeServer(failure_message="bad\n\x1b[31mred\x00" + "z" * 5000)
    with serving(loud) as server, pytest.raises(ClientError) as failure:
        await connect(server, sasl("PLAIN", password="wrong"))
    message = str(failure.value)
    assert message.startswith("authentication failed: bad  [31mred")
    assert message.isprintable() and len(message) < 400


async def test_plain_answer_that_is_not_empty_is_refused() -> None:
    with (
        serving(FakeServer(tamper=lambda step, challenge: b"?")) as server,
        pytest.raises(ClientError, match="answer to a PLAIN login is not empty"),
    ):
        await connect(server, sasl("PLAIN"))


# ------------------------------------------------------------------------------ TLS


@dataclass
class Pki:
    ca_file: str
    keystore: str
    client_cert: str
    client_key: str
    other_name_keystore: str


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_unit_name="Eng")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    client.cert_chain_pems[0].write_to_path(str(root / "client.pem"))
    client.private_key_pem.write_to_path(str(root / "client.key"))
    elsewhere = ca.issue_cert("kafka.example.com")
    elsewhere.private_key_and_cert_chain_pem.write_to_path(str(root / "elsewhere.pem"))
    return Pki(
        str(root / "ca.pem"),
        str(root / "server.pem"),
        str(root / "client.pem"),
        str(root / "client.key"),
        str(root / "elsewhere.pem"),
    )


async def test_sasl_ssl(pki: Pki) -> None:
    tls = server_context(pki.keystore)
    with serving(FakeServer(context=tls)) as server:
        security = sasl("SCRAM-SHA-512", protocol="SASL_SSL", **{"ssl.ca.location": pki.ca_file})
        assert security.protocol is SecurityProtocol.SASL_SSL
        async with await connect(server, security, host="localhost"):
            pass
    assert server.principals == ["User:alice"]


async def test_ssl_with_a_client_certificate(pki: Pki) -> None:
    tls = server_context(pki.keystore, None, pki.ca_file, "required")
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_file,
            "ssl.certificate.location": pki.client_cert,
            "ssl.key.location": pki.client_key,
        }
    )
    with serving(FakeServer(context=tls, sasl=False)) as server:
        async with await connect(server, security, host="localhost"):
            pass
    # trustme adds its own organization (O=trustme vX.Y.Z) to every certificate.
    assert len(server.principals) == 1
    assert server.principals[0].startswith("User:CN=alice,OU=Eng,O=trustme")


async def test_host_name_mismatch_and_how_to_skip_it(pki: Pki) -> None:
    tls = server_context(pki.other_name_keystore)
    props = {"security.protocol": "SSL", "ssl.ca.location": pki.ca_file}
    with serving(FakeServer(context=tls, sasl=False)) as server:
        # The certificate is for kafka.example.com, not for 127.0.0.1.
        with pytest.raises(ClientError, match=r"ssl\.endpoint\.identification\.algorithm") as e:
            await connect(server, client_security(props), host="127.0.0.1")
        assert "not trusted" in str(e.value)
        unchecked = client_security({**props, "ssl.endpoint.identification.algorithm": ""})
        async with await connect(server, unchecked, host="127.0.0.1"):
            pass


async def test_server_certificate_of_an_unknown_ca(pki: Pki, tmp_path: Path) -> None:
    other = trustme.CA()
    other.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    props = {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "other.pem")}
    with (
        serving(FakeServer(context=server_context(pki.keystore), sasl=False)) as server,
        pytest.raises(
            ClientError, match=r"not trusted .*give the CA that signed it in ssl.ca.location"
        ),
    ):
        await connect(server, client_security(props), host="localhost")


async def test_tls_client_against_a_plaintext_server(pki: Pki) -> None:
    props = {"security.protocol": "SSL", "ssl.ca.location": pki.ca_file}
    with (
        serving(FakeServer(sasl=False)) as server,
        pytest.raises(ClientError, match=r"TLS handshake with .* failed"),
    ):
        await connect(server, client_security(props), host="localhost")


async def test_plaintext_client_against_a_tls_server(pki: Pki) -> None:
    with (
        serving(FakeServer(context=server_context(pki.keystore))) as server,
        pytest.raises(ClientError, match=r"closed the connection .*--command-config"),
    ):
        await connect(server, None)


async def test_bad_tls_files_fail_before_connecting(tmp_path: Path) -> None:
    from api.security.errors import SecurityConfigError

    props = {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "missing.pem")}
    with pytest.raises(SecurityConfigError, match=r"ssl.ca.location=.*no such file"):
        await ClientConnection.connect("127.0.0.1:1", security=client_security(props))


# ------------------------------------------------------------------------------ the CLI


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def run_mlog(*args: str) -> int:
    return main(list(args))


def test_cli_logs_in_with_command_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";\nclient.id=ignored\n',
    )
    with serving(FakeServer()) as server:
        code = run_mlog(
            "--bootstrap-server",
            f"127.0.0.1:{server.port}",
            "--command-config",
            str(config),
            "topics",
            "list",
        )
    err = capsys.readouterr().err
    # The fake server answers no Metadata: the command fails after the login succeeded.
    assert code == 2 and "does not answer API" in err
    assert server.principals == ["User:alice"]
    assert err.count("ignored keys (not security settings): client.id") == 1


def test_cli_wrong_password_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
        "sasl.password=not-it\n",
    )
    with serving(FakeServer()) as server:
        code = run_mlog(
            "topics",
            "list",
            "--bootstrap-server",
            f"127.0.0.1:{server.port}",
            "--command-config",
            str(config),
        )
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "mlog: error: authentication failed: Authentication failed: Invalid username or "
        "password (error 58, user 'alice')"
    ]
    assert "not-it" not in err


def test_cli_takes_the_config_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\n"
        "sasl.password=bob-secret\n",
    )
    monkeypatch.setenv("MLOG_COMMAND_CONFIG", str(config))
    with serving(FakeServer()) as server:
        monkeypatch.setenv("MLOG_BOOTSTRAP_SERVER", f"127.0.0.1:{server.port}")
        run_mlog("namespaces", "list")
    assert server.principals == ["User:bob"]
    capsys.readouterr()


def test_cli_bad_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, "security.protocol=SASL_SSL\n")
    assert (
        run_mlog(
            "--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "topics", "list"
        )
        == 2
    )
    assert capsys.readouterr().err == (
        f"mlog: error: {config}: security.protocol=SASL_SSL needs sasl.mechanism "
        "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)\n"
    )
    missing = tmp_path / "missing.properties"
    assert (
        run_mlog(
            "--bootstrap-server", "127.0.0.1:1", "--command-config", str(missing), "topics", "list"
        )
        == 2
    )
    assert "no such file" in capsys.readouterr().err


def test_cli_command_config_needs_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "security.protocol=PLAINTEXT\n")
    code = run_mlog(
        "--data-dir", str(tmp_path / "data"), "--command-config", str(config), "topics", "list"
    )
    assert code == 2
    assert "--command-config configures the connection to a server" in capsys.readouterr().err


def test_cli_ignores_the_environments_config_on_the_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLOG_COMMAND_CONFIG", str(tmp_path / "not-read.properties"))
    monkeypatch.delenv("MLOG_BOOTSTRAP_SERVER", raising=False)
    assert run_mlog("--data-dir", str(tmp_path / "data"), "brokers", "register", "--id", "1") == 0
    capsys.readouterr()


@pytest.mark.process
def test_local_commands_never_load_the_security_modules(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from api.cli.main import main\n"
        f"main(['--data-dir', {str(tmp_path)!r}, 'brokers', 'register', '--id', '1'])\n"
        "names = [m for m in sys.modules if m.startswith('api.security') or m == 'ssl']\n"
        "print(sorted(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
