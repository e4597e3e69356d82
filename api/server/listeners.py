"""The server's listeners made from its config: TLS contexts loaded, principal rules parsed.

Everything that reads a file or parses a rule happens here, before the server binds anything,
so a missing keystore or a bad `ssl.principal.mapping.rules` stops `mlog serve` with one line
naming the listener, never a connection later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.security.errors import SecurityConfigError
from api.security.principal import NoMatchingRule, PrincipalMapper
from api.security.tls import server_context
from api.server.config import ListenerConfig, ServerConfig, ServerConfigError, TlsConfig
from api.server.server import ServerListener


def server_listeners(config: ServerConfig) -> list[ServerListener]:
    """The `ServerListener` of each configured listener, in order."""
    return [server_listener(listener) for listener in config.listeners]


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
