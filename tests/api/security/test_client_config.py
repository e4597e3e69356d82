"""Client config files (`--command-config`): Kafka's and librdkafka's keys, JAAS lines, SASL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.security.client_config import (
    ClientSecurity,
    SecurityProtocol,
    client_security,
    load_client_security,
)
from api.security.errors import SaslClientError, SecurityConfigError
from api.security.jaas import PLAIN_MODULE, SCRAM_MODULE, parse_jaas
from api.security.properties import parse_properties
from api.security.sasl_client import SaslClient
from api.security.scram import ScramServer
from records.model import ScramMechanism
from replay.security.scram_keys import new_credential


def security(text: str) -> ClientSecurity:
    return client_security(parse_properties(text))


# ------------------------------------------------------------------------------ JAAS


def test_kafka_plain_jaas_line() -> None:
    login = parse_jaas(f'{PLAIN_MODULE} required username="alice" password="s3cret";')
    assert (login.module, login.flag, login.username, login.password) == (
        PLAIN_MODULE,
        "required",
        "alice",
        "s3cret",
    )
    assert "s3cret" not in repr(login)


def test_scram_jaas_line_with_quotes_escapes_and_comments() -> None:
    text = (
        f"  {SCRAM_MODULE}   REQUIRED /* the flag */\n"
        "    username='bob'  // single quotes work too\n"
        '    password="a\\"b\\\\c;d=e\\t\\101";'
    )
    login = parse_jaas(text)
    assert login.username == "bob" and login.password == 'a"b\\c;d=e\tA'


def test_bare_word_values_and_other_options() -> None:
    login = parse_jaas(f"{SCRAM_MODULE} optional username=carol password=pw extra=1;")
    assert (login.flag, login.username, login.password) == ("optional", "carol", "pw")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no login module"),
        ("   /* nothing */  ", "no login module"),
        ('"quoted" required;', "start with the login module"),
        (f"{PLAIN_MODULE};", "control flag"),
        (f"{PLAIN_MODULE} mandatory username=a;", "control flag"),
        (f'{PLAIN_MODULE} required username="a" password="b"', "does not end with ';'"),
        (f"{PLAIN_MODULE} required username=;", "no value is given for 'username'"),
        (f"{PLAIN_MODULE} required username;", "no value is given for 'username'"),
        (f"{PLAIN_MODULE} required username==a;", "no value is given"),
        (f'{PLAIN_MODULE} required "k"="v";', "key=value"),
        (f'{PLAIN_MODULE} required password="unclosed;', "not closed"),
        (f"{PLAIN_MODULE} required /* open", "comment is not closed"),
        (f"{PLAIN_MODULE} required; {SCRAM_MODULE} required;", "more than one login module"),
        ("com.sun.security.auth.module.Krb5LoginModule required;", "not supported"),
        (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "not supported",
        ),
        (
            f'{SCRAM_MODULE} required username="a" password="b" tokenauth="true";',
            "delegation tokens",
        ),
    ],
)
def test_bad_jaas_lines_are_clear(text: str, match: str) -> None:
    with pytest.raises(SecurityConfigError, match=match) as failure:
        parse_jaas(text)
    assert str(failure.value).startswith("sasl.jaas.config: ")


def test_jaas_errors_never_show_the_password() -> None:
    with pytest.raises(SecurityConfigError) as failure:
        parse_jaas(f'{PLAIN_MODULE} required username="a" password="hunter2" oops')
    assert "hunter2" not in str(failure.value)


@given(st.text(max_size=80))
def test_jaas_parser_never_crashes(text: str) -> None:
    try:
        parse_jaas(text)
    except SecurityConfigError as exc:
        assert str(exc).startswith("sasl.jaas.config: ")


# ------------------------------------------------------------------------------ client configs


def test_empty_config_is_plaintext() -> None:
    config = security("")
    assert config.protocol is SecurityProtocol.PLAINTEXT and config.warnings == ()


def test_librdkafka_sasl_ssl_config() -> None:
    config = security(
        """
        security.protocol=sasl_ssl
        sasl.mechanisms=SCRAM-SHA-512
        sasl.username=alice
        sasl.password=s3cret \n
        ssl.ca.location=/etc/ca.pem
        ssl.certificate.location=/etc/client.pem
        ssl.key.location=/etc/client.key
        ssl.key.password=kp
        """
    )
    assert config.protocol is SecurityProtocol.SASL_SSL
    assert (config.mechanism, config.username, config.password) == (
        "SCRAM-SHA-512",
        "alice",
        "s3cret",
    )
    assert (config.ca_location, config.certificate_location, config.key_location) == (
        "/etc/ca.pem",
        "/etc/client.pem",
        "/etc/client.key",
    )
    assert config.key_password == "kp" and config.check_hostname
    assert "s3cret" not in repr(config) and "kp" not in repr(config).replace("key", "")


def test_kafka_java_client_config() -> None:
    config = security(
        f"""
        security.protocol=SASL_SSL
        sasl.mechanism=PLAIN
        sasl.jaas.config={PLAIN_MODULE} required \\
            username="admin" \\
            password="admin-secret";
        ssl.truststore.type=PEM
        ssl.truststore.location=/etc/kafka/ca.pem
        ssl.keystore.type=PEM
        ssl.keystore.location=/etc/kafka/client.keystore.pem
        ssl.endpoint.identification.algorithm=
        """
    )
    assert (config.mechanism, config.username, config.password) == (
        "PLAIN",
        "admin",
        "admin-secret",
    )
    assert config.ca_location == "/etc/kafka/ca.pem"
    assert config.certificate_location == "/etc/kafka/client.keystore.pem"
    assert config.key_location is None
    assert not config.check_hostname


@pytest.mark.parametrize(
    ("value", "checked"), [("https", True), ("HTTPS", True), ("", False), ("none", False)]
)
def test_host_name_check(value: str, checked: bool) -> None:
    config = security(f"security.protocol=SSL\nssl.endpoint.identification.algorithm={value}")
    assert config.check_hostname is checked


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_the_connection_setup_timeout_is_kafkas_key(protocol: str) -> None:
    config = security(f"security.protocol={protocol}\nsocket.connection.setup.timeout.ms=1500")
    assert config.setup_timeout_ms == 1500 and config.warnings == ()
    assert security("security.protocol=PLAINTEXT").setup_timeout_ms is None


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "ten", "", "86400001", "\u0661\u0660"])
def test_a_bad_connection_setup_timeout_is_one_clear_line(value: str) -> None:
    with pytest.raises(SecurityConfigError, match="not a number of milliseconds") as failure:
        security(f"socket.connection.setup.timeout.ms={value}")
    assert "\n" not in str(failure.value)


def test_unknown_keys_are_one_warning_line() -> None:
    config = security("bootstrap.servers=x:9092\nclient.id=me\nsecurity.protocol=PLAINTEXT")
    assert config.warnings == (
        "ignored keys (not security settings): bootstrap.servers, client.id",
    )


def test_settings_of_an_unused_layer_are_reported() -> None:
    config = security("security.protocol=SSL\nsasl.username=a")
    assert config.warnings == ("sasl.* settings are ignored with security.protocol=SSL",)
    config = security("sasl.username=a\nssl.ca.location=/x")
    assert len(config.warnings) == 2


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("security.protocol=TLS", "is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ("security.protocol=SASL_PLAINTEXT", "needs sasl.mechanism"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI", "GSSAPI is not supported"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER", "not supported"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.mechanisms=SCRAM-SHA-256",
            "disagree",
        ),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN", "needs a user name"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a",
            "needs a password",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n"
            "sasl.password=",
            "needs a password",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\\u0000b\n"
            "sasl.password=p",
            "cannot hold a NUL",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n"
            f'sasl.jaas.config={PLAIN_MODULE} required username="b" password="p";',
            "sasl.username and the username of sasl.jaas.config differ",
        ),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x", "sasl.jaas"),
        ("security.protocol=SSL\nssl.keystore.type=JKS", "only PEM"),
        ("security.protocol=SSL\nssl.truststore.type=PKCS12", "only PEM"),
        ("security.protocol=SSL\nssl.key.location=/k", "without ssl.certificate.location"),
        (
            "security.protocol=SSL\nssl.keystore.location=/a\nssl.certificate.location=/b",
            "keep one",
        ),
        ("security.protocol=SSL\nssl.endpoint.identification.algorithm=ldap", "use https"),
    ],
)
def test_unusable_configs_are_one_clear_line(text: str, match: str) -> None:
    with pytest.raises(SecurityConfigError, match=match) as failure:
        security(text)
    assert "\n" not in str(failure.value)
    assert str(failure.value).startswith("the client config: ")


def test_password_never_in_errors() -> None:
    text = (
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.password=hunter2\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="a" password="other";'
    )
    with pytest.raises(SecurityConfigError, match="differ") as failure:
        security(text)
    assert "hunter2" not in str(failure.value) and "other" not in str(failure.value)


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(SecurityConfigError, match=f"^{path}: security.protocol=SASL_SSL needs"):
        load_client_security(path)
    with pytest.raises(SecurityConfigError, match="no such file"):
        load_client_security(tmp_path / "missing.properties")
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=scram-sha-256\n"
        "sasl.username=u\nsasl.password=p\n"
    )
    assert load_client_security(path).mechanism == "SCRAM-SHA-256"


@pytest.mark.process
def test_loading_a_config_imports_neither_ssl_nor_hashlib(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n"
    )
    code = (
        "import sys\n"
        "from api.security.client_config import load_client_security\n"
        f"load_client_security({str(path)!r})\n"
        "print(sorted({'ssl', '_ssl', 'hashlib'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------ SASL clients


def test_plain_client_steps() -> None:
    client = security(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p"
    ).sasl_client()
    assert client.start() == b"\x00u\x00p"
    assert client.respond(b"") is None and client.complete
    with pytest.raises(SaslClientError, match="more than one answer"):
        client.respond(b"")


def test_plain_client_refuses_a_non_empty_answer() -> None:
    client = SaslClient("PLAIN", "u", "p")
    client.start()
    with pytest.raises(SaslClientError, match="not empty"):
        client.respond(b"surprise")
    assert not client.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_steps_against_our_server(mechanism: str) -> None:
    scram = (
        ScramMechanism.SCRAM_SHA_256 if mechanism.endswith("256") else ScramMechanism.SCRAM_SHA_512
    )
    stored = new_credential(scram, "pw")
    server = ScramServer({"alice": stored}.get, scram)
    client = SaslClient(mechanism, "alice", "pw")
    token: bytes | None = client.start()
    with pytest.raises(SaslClientError, match="already started"):
        client.start()
    while token is not None:
        token = client.respond(server.evaluate(token))
    assert client.complete and server.username == "alice"
    with pytest.raises(SaslClientError, match="more SCRAM messages"):
        client.respond(b"v=again")


def test_sasl_client_of_a_config_without_sasl() -> None:
    with pytest.raises(SecurityConfigError, match="has no SASL login"):
        security("").sasl_client()
    with pytest.raises(ValueError, match="unsupported SASL mechanism"):
        SaslClient("GSSAPI", "u", "p")
