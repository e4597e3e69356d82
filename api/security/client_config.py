"""A client's security settings from a properties file (`--command-config`, `MLOG_COMMAND_CONFIG`).

The keys are Kafka's and librdkafka's client keys, so the file a `kafka-topics.sh
--command-config` or a librdkafka client uses works here:

- `security.protocol`: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (any case);
- `sasl.mechanism` (Kafka) or `sasl.mechanisms` (librdkafka): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
- `sasl.username` and `sasl.password` (librdkafka), or Kafka's `sasl.jaas.config` line
  (`...PlainLoginModule required username="u" password="p";` or the ScramLoginModule one);
- `ssl.ca.location` / `ssl.truststore.location` (PEM CAs), `ssl.certificate.location` +
  `ssl.key.location` (librdkafka) or `ssl.keystore.location` (Kafka's PEM key + chain),
  `ssl.key.password`, `ssl.endpoint.identification.algorithm` (`https`, the default, checks
  the server's host name; empty or `none` does not);
- `socket.connection.setup.timeout.ms` (Kafka's): how long a connection may take to connect,
  finish its TLS handshake and answer its first request (ApiVersions) before the client gives
  up on that server and tries the next of its bootstrap list (`api.client.bootstrap`).

Other keys are reported in one warning line. This module imports neither `ssl` nor `hashlib`:
the TLS context and the SASL client are made when a connection needs them.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from api.security.errors import SecurityConfigError
from api.security.jaas import parse_jaas
from api.security.properties import parse_properties, read_properties_text

if TYPE_CHECKING:
    import ssl

    from api.security.sasl_client import SaslClient

ENV_VAR = "MLOG_COMMAND_CONFIG"
"""The environment variable naming a client config file when `--command-config` is absent."""

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityProtocol(enum.Enum):
    """Kafka's `security.protocol`."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        """Whether the connection is TLS."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Whether the connection logs in with SASL."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


_SASL_KEYS = (
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
)
_SSL_KEYS = (
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
)
SETUP_TIMEOUT_KEY = "socket.connection.setup.timeout.ms"
KNOWN_KEYS = frozenset(("security.protocol", *_SASL_KEYS, *_SSL_KEYS, SETUP_TIMEOUT_KEY))
"""Every key this module reads; others are reported as ignored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    """How a client connects: TLS and its files, SASL and its credential.

    The password and the key password are left out of `repr`; nothing here logs them.
    """

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    setup_timeout_ms: int | None = None
    """`socket.connection.setup.timeout.ms`: connect, TLS and ApiVersions within it (None:
    the request timeout bounds each step, or the bootstrap list's own default)."""
    warnings: tuple[str, ...] = ()
    """One line per thing the file holds that is ignored (unknown keys, unused settings)."""

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of an SSL or SASL_SSL connection (imports `ssl` now)."""
        from api.security.tls import client_context  # noqa: PLC0415 - `ssl` on demand

        return client_context(
            self.ca_location,
            self.certificate_location,
            self.key_location,
            self.key_password,
            check_hostname=self.check_hostname,
        )

    def sasl_client(self) -> SaslClient:
        """A fresh SASL login for one connection (imports `hashlib` now)."""
        from api.security.sasl_client import SaslClient  # noqa: PLC0415 - `hashlib` on demand

        if self.mechanism is None or self.username is None or self.password is None:
            raise SecurityConfigError(f"security.protocol={self.protocol.value} has no SASL login")
        return SaslClient(self.mechanism, self.username, self.password)


def _value(props: Mapping[str, str], *keys: str) -> str | None:
    """The trimmed value of the first key present (Kafka trims values); None if none is."""
    for key in keys:
        if key in props:
            return props[key].strip()
    return None


def _protocol(props: Mapping[str, str]) -> SecurityProtocol:
    text = _value(props, "security.protocol")
    if text is None or text == "":
        return SecurityProtocol.PLAINTEXT
    try:
        return SecurityProtocol(text.upper())
    except ValueError:
        raise SecurityConfigError(
            f"security.protocol={text!r} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
        ) from None


def _mechanism(props: Mapping[str, str]) -> str | None:
    kafka, librdkafka = _value(props, "sasl.mechanism"), _value(props, "sasl.mechanisms")
    if kafka and librdkafka and kafka.upper() != librdkafka.upper():
        raise SecurityConfigError(
            f"sasl.mechanism={kafka} and sasl.mechanisms={librdkafka} disagree; keep one"
        )
    text = kafka or librdkafka
    if not text:
        return None
    if text.upper() not in SASL_MECHANISMS:
        raise SecurityConfigError(
            f"sasl.mechanism={text} is not supported; use one of {', '.join(SASL_MECHANISMS)}"
        )
    return text.upper()


def _credential(props: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(username, password) from sasl.username/sasl.password and sasl.jaas.config."""
    username, password = _value(props, "sasl.username"), _value(props, "sasl.password")
    jaas = _value(props, "sasl.jaas.config")
    if jaas:
        login = parse_jaas(jaas)
        for key, ours, theirs in (
            ("username", username, login.username),
            ("password", password, login.password),
        ):
            if ours is not None and theirs is not None and ours != theirs:
                raise SecurityConfigError(
                    f"sasl.{key} and the {key} of sasl.jaas.config differ; keep one"
                )
        username = username if username is not None else login.username
        password = password if password is not None else login.password
    return username, password


def _check_hostname(props: Mapping[str, str]) -> bool:
    text = _value(props, "ssl.endpoint.identification.algorithm")
    if text is None or text.lower() == "https":
        return True
    if text == "" or text.lower() == "none":
        return False
    raise SecurityConfigError(
        f"ssl.endpoint.identification.algorithm={text!r}: use https (check the server's host "
        "name) or leave it empty (do not)"
    )


def _setup_timeout(props: Mapping[str, str]) -> int | None:
    text = _value(props, SETUP_TIMEOUT_KEY)
    if text is None:
        return None
    # ASCII digits only, at most a day: a typo never becomes a wait of years.
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 86_400_000):
        raise SecurityConfigError(
            f"{SETUP_TIMEOUT_KEY}={text!r} is not a number of milliseconds in 1..86400000 "
            "(Kafka's default is 10000)"
        )
    return int(text)


def _pem_only(props: Mapping[str, str]) -> None:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        text = _value(props, key)
        if text and text.upper() != "PEM":
            raise SecurityConfigError(
                f"{key}={text}: only PEM files are supported; convert the store with keytool "
                "or openssl and set it to PEM"
            )


def _certificate(props: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(certificate file, key file) of the client: librdkafka's pair or Kafka's keystore."""
    certificate = _value(props, "ssl.certificate.location") or None
    key = _value(props, "ssl.key.location") or None
    keystore = _value(props, "ssl.keystore.location") or None
    if keystore and (certificate or key):
        raise SecurityConfigError(
            "ssl.keystore.location and ssl.certificate.location/ssl.key.location both name a "
            "client certificate; keep one"
        )
    if key and not certificate:
        raise SecurityConfigError(
            "ssl.key.location is set without ssl.certificate.location; give the certificate too"
        )
    return (keystore, None) if keystore else (certificate, key)


def client_security(
    props: Mapping[str, str], *, source: str = "the client config"
) -> ClientSecurity:
    """The `ClientSecurity` of a client config's properties; `SecurityConfigError` if unusable."""
    try:
        return _client_security(props)
    except SecurityConfigError as exc:
        raise SecurityConfigError(f"{source}: {exc}") from None


def _client_security(props: Mapping[str, str]) -> ClientSecurity:
    protocol = _protocol(props)
    warnings: list[str] = []
    unknown = sorted(key for key in props if key not in KNOWN_KEYS)
    if unknown:
        warnings.append(f"ignored keys (not security settings): {', '.join(unknown)}")
    mechanism = username = password = None
    if protocol.sasl:
        mechanism = _mechanism(props)
        if mechanism is None:
            raise SecurityConfigError(
                f"security.protocol={protocol.value} needs sasl.mechanism "
                f"({', '.join(SASL_MECHANISMS)})"
            )
        username, password = _credential(props)
        if not username:
            raise SecurityConfigError(
                f"sasl.mechanism={mechanism} needs a user name: set sasl.username, or "
                'username="..." in sasl.jaas.config'
            )
        if not password:
            raise SecurityConfigError(
                f"sasl.mechanism={mechanism} needs a password: set sasl.password, or "
                'password="..." in sasl.jaas.config'
            )
        if "\x00" in username or "\x00" in password:
            raise SecurityConfigError("the SASL user name and password cannot hold a NUL")
    elif any(key in props for key in _SASL_KEYS):
        warnings.append(f"sasl.* settings are ignored with security.protocol={protocol.value}")
    if not protocol.tls:
        if any(key in props for key in _SSL_KEYS):
            warnings.append(f"ssl.* settings are ignored with security.protocol={protocol.value}")
        return ClientSecurity(
            protocol=protocol,
            mechanism=mechanism,
            username=username,
            password=password,
            setup_timeout_ms=_setup_timeout(props),
            warnings=tuple(warnings),
        )
    _pem_only(props)
    certificate, key = _certificate(props)
    return ClientSecurity(
        protocol=protocol,
        mechanism=mechanism,
        username=username,
        password=password,
        ca_location=_value(props, "ssl.ca.location", "ssl.truststore.location") or None,
        certificate_location=certificate,
        key_location=key,
        key_password=_value(props, "ssl.key.password") or None,
        check_hostname=_check_hostname(props),
        setup_timeout_ms=_setup_timeout(props),
        warnings=tuple(warnings),
    )


def load_client_security(path: str | os.PathLike[str]) -> ClientSecurity:
    """The `ClientSecurity` of a client config file; errors name the file."""
    name = os.fspath(path)
    return client_security(parse_properties(read_properties_text(name), source=name), source=name)
