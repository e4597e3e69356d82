"""The server's listeners made from its config: TLS contexts loaded, principal rules parsed.

Everything that reads a file or parses a rule happens here, before the server binds anything,
so a missing keystore or a bad `ssl.principal.mapping.rules` stops `mlog serve` with one line
naming the listener, never a connection later.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from api.security.errors import SecurityConfigError
from api.security.principal import NoMatchingRule, PrincipalMapper
from api.security.tls import server_context
from api.server.config import (
    CONTROLLER_PRINCIPALS_KEY,
    ListenerConfig,
    ServerConfig,
    ServerConfigError,
    TlsConfig,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerListener:
    """One listener: where it binds, what it advertises, how its connections are secured."""

    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    host: str = "127.0.0.1"
    """Address to bind; "" binds every interface."""
    port: int = 9092
    """Port to bind; 0 picks a free one."""
    advertised_host: str | None = None
    """Host told to clients (None: the bound host, this machine's name for "")."""
    advertised_port: int | None = None
    """Port told to clients (None: the bound one)."""
    ssl_context: ssl.SSLContext | None = None
    """TLS server context: required by SSL and SASL_SSL, refused by the others."""
    certificate_principal: Callable[[dict[str, Any]], str] | None = None
    """A client certificate -> principal (`ssl.principal.mapping.rules`; SSL listeners)."""
    sasl_mechanisms: tuple[str, ...] = ()
    """Enabled SASL mechanisms: required by SASL_PLAINTEXT and SASL_SSL, refused by others."""

    def check(self) -> None:
        """ValueError if the listener's parts do not fit its security protocol."""
        protocol = self.security_protocol
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"listener {self.name}: unknown security protocol {protocol}")
        if (self.ssl_context is not None) != protocol.endswith("SSL"):
            raise ValueError(f"listener {self.name}: {protocol} and ssl_context do not match")
        if bool(self.sasl_mechanisms) != protocol.startswith("SASL_"):
            raise ValueError(f"listener {self.name}: {protocol} and sasl_mechanisms do not match")


def describe_listener(listener: ServerListener, host: str, port: int) -> str:
    """A listener for the start line: bound address, protocol, name, mechanisms, advertised."""
    name = listener.security_protocol
    if listener.name != name:
        name = f"{name} as {listener.name}"
    if listener.sasl_mechanisms:
        name = f"{name} with {'/'.join(listener.sasl_mechanisms)}"
    if listener.ssl_context is not None and listener.ssl_context.verify_mode != ssl.CERT_NONE:
        required = listener.ssl_context.verify_mode == ssl.CERT_REQUIRED
        name = f"{name}, client certificates {'required' if required else 'requested'}"
    return f"{listener.host or '*'}:{listener.port} ({name}, advertised {host}:{port})"


def server_listeners(config: ServerConfig) -> list[ServerListener]:
    """The `ServerListener` of each configured listener, in order."""
    return [server_listener(listener) for listener in config.listeners]


def controller_principals(config: ServerConfig) -> frozenset[str]:
    """Who may use the quorum's own APIs: `controller.principals`, else this node's own.

    This node's own is the principal it presents on its controller links: the subject of its
    controller listener's certificate (`ssl.keystore.location`), mapped by that listener's
    `ssl.principal.mapping.rules` as a peer's certificate is, so controllers sharing one
    certificate identity need no key. `ServerConfigError` when there is none to read.
    """
    if config.controller_principals is not None:
        return config.controller_principals
    listeners = config.controller_listeners()
    tls = listeners[0].tls if listeners else None
    if tls is None:
        raise ServerConfigError(
            f"{CONTROLLER_PRINCIPALS_KEY} is not set and this node has no controller "
            "certificate to take it from; set controller.listener.names to an SSL listener"
        )
    name = listeners[0].name
    try:
        # The standard library's decoder of a PEM certificate (the first of the keystore's
        # chain), giving the subject as `getpeercert()` gives a peer's.
        decoded = ssl._ssl._test_decode_cert(str(tls.keystore_location))  # type: ignore[attr-defined]
        principal = PrincipalMapper(tls.principal_mapping_rules).principal(decoded["subject"])
    except (OSError, ssl.SSLError, KeyError, SecurityConfigError, NoMatchingRule) as exc:
        raise ServerConfigError(
            f"listener {name}: cannot take this controller's principal from "
            f"{tls.keystore_location} ({exc}); set {CONTROLLER_PRINCIPALS_KEY}"
        ) from None
    return frozenset({principal})


def server_listener(listener: ListenerConfig) -> ServerListener:
    """One listener with its TLS context and certificate principal rules made."""
    context = None
    principal = None
    if listener.tls is not None:
        context, principal = _tls(listener.name, listener.tls)
    return ServerListener(
        name=listener.name,
        security_protocol=listener.security_protocol,
        host=listener.host,
        port=listener.port,
        advertised_host=listener.advertised_host,
        advertised_port=listener.advertised_port,
        ssl_context=context,
        # Kafka maps the certificate to the principal on SSL listeners only; on SASL_SSL the
        # login names the principal.
        certificate_principal=principal if listener.security_protocol == "SSL" else None,
        sasl_mechanisms=listener.sasl_mechanisms,
    )


def _tls(name: str, tls: TlsConfig) -> tuple[Any, Callable[[dict[str, Any]], str]]:
    try:
        context = server_context(
            str(tls.keystore_location),
            tls.key_password,
            None if tls.truststore_location is None else str(tls.truststore_location),
            tls.client_auth,
        )
        mapper = PrincipalMapper(tls.principal_mapping_rules)
    except SecurityConfigError as exc:
        raise ServerConfigError(f"listener {name}: {exc}") from None

    def certificate_principal(certificate: dict[str, Any]) -> str:
        try:
            return mapper.principal(certificate.get("subject", ()))
        except NoMatchingRule as exc:
            raise ValueError(str(exc)) from None

    return context, certificate_principal
