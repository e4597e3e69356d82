"""The listeners of `mlog serve`'s config: Kafka's `listeners` keys, checked into `ListenerConfig`.

Listeners are Kafka's: `listeners=PLAINTEXT://:9092,SASL_SSL://0.0.0.0:9094` (an empty host is
every interface), each name mapped to its security protocol by `listener.security.protocol.map`
(a name that is itself a protocol needs no entry), `advertised.listeners` by the same names.
TLS and SASL keys may be given per listener, as Kafka's `listener.name.<name>.<key>` (the name
in lower case) over the plain key. config.py reads the rest of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from api.server.config_error import ServerConfigError, Take

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's security protocols, every one served here."""

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})

SUPPORTED_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
"""The SASL mechanisms served."""

DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""The default of `sasl.enabled.mechanisms` (Kafka's is GSSAPI, which this server does not
have): SCRAM only, since PLAIN sends the password itself; PLAIN is served only when named."""

UNSUPPORTED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
"""Kafka's other mechanisms: named in a config, they are reported and left out, not an error."""

CLIENT_AUTH = ("none", "requested", "required")
"""`ssl.client.auth`'s values."""

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"
"""Without `listeners` (or `--listen`): Kafka's is every interface; this one is the loopback."""

DEFAULT_PRINCIPAL_MAPPING_RULES = "DEFAULT"

MAX_PORT = 65535

_LISTENER = re.compile(
    r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]*):(?P<port>\d{1,5})$"
)
_ANY_ADDRESS = frozenset({"0.0.0.0", "::"})

_PER_LISTENER = re.compile(r"^listener\.name\.(?P<name>[a-z0-9_]+)\.(?P<key>.+)$")

_TLS_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
)
_PER_LISTENER_KEYS = frozenset({*_TLS_KEYS, "sasl.enabled.mechanisms"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """A TLS listener's files and client-certificate policy (Kafka's `ssl.*` keys, PEM files)."""

    keystore_location: Path
    """PEM file with the private key and the certificate chain (`ssl.keystore.location`)."""
    key_password: str | None = field(default=None, repr=False)
    """Password of an encrypted private key (`ssl.key.password`); never logged."""
    truststore_location: Path | None = None
    """PEM file of the CAs client certificates must chain to (`ssl.truststore.location`)."""
    client_auth: str = "none"
    """`ssl.client.auth`: none, requested or required."""
    principal_mapping_rules: str = DEFAULT_PRINCIPAL_MAPPING_RULES
    """`ssl.principal.mapping.rules`: certificate DN -> principal name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerConfig:
    """One listener: where it binds, what clients are told, and how connections authenticate."""

    name: str
    """Upper-case listener name (`PLAINTEXT`, `SASL_SSL`, or a custom one such as `EXTERNAL`)."""
    security_protocol: str
    host: str
    """Address to bind; "" binds every interface."""
    port: int
    """Port to bind; 0 picks a free one."""
    advertised_host: str | None = None
    """Host clients are told (None: the bound host, or this machine's name for "")."""
    advertised_port: int | None = None
    """Port clients are told (None: the bound port)."""
    sasl_mechanisms: tuple[str, ...] = ()
    """Enabled SASL mechanisms (SASL listeners only)."""
    tls: TlsConfig | None = None
    """TLS settings (SSL and SASL_SSL listeners only)."""

    @property
    def uses_tls(self) -> bool:
        """SSL or SASL_SSL."""
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        """SASL_PLAINTEXT or SASL_SSL."""
        return self.security_protocol in SASL_PROTOCOLS


def format_listener(name: str, host: str, port: int) -> str:
    """`NAME://host:port`, an IPv6 host in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"{name}://{shown}:{port}"


def parse_listeners(key: str, text: str) -> list[tuple[str, str, int]]:
    """(name, host, port) of each `NAME://host:port` of a comma-separated list."""
    found: list[tuple[str, str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _LISTENER.match(item)
        if match is None or int(match["port"]) > MAX_PORT:
            raise ServerConfigError(
                f"{key}: {item!r} is not NAME://HOST:PORT (e.g. SASL_SSL://0.0.0.0:9094, an "
                "empty host for every interface, an IPv6 host in brackets, port 0..65535)"
            )
        name = match["name"].upper()
        if any(name == other for other, _, _ in found):
            raise ServerConfigError(f"{key}: listener name {name} appears twice; rename one")
        found.append((name, match["host"].strip("[]"), int(match["port"])))
    return found


def listener_configs(
    values: Mapping[str, str], take: Take, notes: list[str]
) -> tuple[ListenerConfig, ...]:
    """The checked listeners of `values` (`listeners`, `advertised.listeners`, ...), in order."""
    bound = parse_listeners("listeners", take("listeners") or DEFAULT_LISTENERS)
    if not bound:
        raise ServerConfigError("listeners is empty; give at least one, e.g. PLAINTEXT://:9092")
    for index, (name, host, port) in enumerate(bound):
        for other, other_host, other_port in bound[:index]:
            wildcard = {host, other_host} & {"", *_ANY_ADDRESS}
            if port != 0 and port == other_port and (host == other_host or wildcard):
                raise ServerConfigError(
                    f"listeners: {other} and {name} both bind port {port}; give each its own port"
                )
    protocols = _protocol_map(take("listener.security.protocol.map"))
    advertised_text = take("advertised.listeners")
    advertised = {
        name: (host, port)
        for name, host, port in parse_listeners("advertised.listeners", advertised_text or "")
    }
    names = {name for name, _, _ in bound}
    for name in advertised:
        if name not in names:
            raise ServerConfigError(
                f"advertised.listeners: {name} is not in listeners "
                f"({', '.join(sorted(names))}); advertise only listeners that exist"
            )
    default_mechanisms = _mechanisms("sasl.enabled.mechanisms", take, notes)
    per_listener = _per_listener_keys(values, names)
    result: list[ListenerConfig] = []
    for name, host, port in bound:
        protocol = protocols.get(name, name if name in SECURITY_PROTOCOLS else None)
        if protocol is None:
            raise ServerConfigError(
                f"listener {name} has no security protocol; add {name}:SASL_SSL (or PLAINTEXT, "
                "SSL, SASL_PLAINTEXT) to listener.security.protocol.map"
            )
        adv_host, adv_port = advertised.get(name, (None, None))
        if adv_host is None and host in _ANY_ADDRESS:
            raise ServerConfigError(
                f"listener {name} binds {host}, which clients cannot connect to; set "
                f"advertised.listeners ({name}://<host clients use>:{port})"
            )
        if adv_host == "" or (adv_host is not None and adv_host in _ANY_ADDRESS):
            raise ServerConfigError(
                f"advertised.listeners: {name} must name a host clients can connect to, not "
                f"{adv_host!r}"
            )
        prefix = f"listener.name.{name.lower()}."

        def take_for(key: str, prefix: str = prefix) -> str | None:
            value = take(prefix + key)
            return value if value is not None else take(key)

        mechanisms: tuple[str, ...] = ()
        tls: TlsConfig | None = None
        if protocol in SASL_PROTOCOLS:
            mechanisms = default_mechanisms
            if prefix + "sasl.enabled.mechanisms" in values:
                mechanisms = _mechanisms(prefix + "sasl.enabled.mechanisms", take, notes)
            if not mechanisms:
                raise ServerConfigError(
                    f"listener {name} ({protocol}) has no supported SASL mechanism left; enable "
                    f"{', '.join(SUPPORTED_MECHANISMS)} in sasl.enabled.mechanisms"
                )
        if protocol in TLS_PROTOCOLS:
            tls = _tls(name, protocol, take_for)
        result.append(
            ListenerConfig(
                name=name,
                security_protocol=protocol,
                host=host,
                port=port,
                advertised_host=adv_host,
                advertised_port=adv_port,
                sasl_mechanisms=mechanisms,
                tls=tls,
            )
        )
    for key in per_listener:
        take(key)  # a per-listener key of a listener that does not use it: not "unknown"
    return tuple(result)


def _protocol_map(text: str | None) -> dict[str, str]:
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        name, sep, protocol = (part.strip() for part in item.partition(":"))
        if not sep or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise ServerConfigError(
                f"{key}: {item!r} is not NAME:PROTOCOL (e.g. EXTERNAL:SASL_SSL)"
            )
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ServerConfigError(
                f"{key}: {protocol!r} (for {name}) is not a security protocol; use one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        if name.upper() in mapping:
            raise ServerConfigError(f"{key}: {name.upper()} is mapped twice; keep one")
        mapping[name.upper()] = protocol.upper()
    return mapping


def _mechanisms(key: str, take: Take, notes: list[str]) -> tuple[str, ...]:
    text = take(key)
    if text is None:
        return DEFAULT_MECHANISMS
    enabled: list[str] = []
    left_out: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        if name in SUPPORTED_MECHANISMS:
            if name not in enabled:
                enabled.append(name)
        elif name.upper() in UNSUPPORTED_MECHANISMS:
            left_out.append(name)
        else:
            raise ServerConfigError(
                f"{key}: unknown SASL mechanism {name!r}; use {', '.join(SUPPORTED_MECHANISMS)}"
            )
    if left_out:
        notes.append(
            f"{key}: {', '.join(left_out)} not supported, left out (served: "
            f"{', '.join(enabled) or 'none'})"
        )
    return tuple(enabled)


def _tls(name: str, protocol: str, take_for: Take) -> TlsConfig:
    for key, allowed in (("ssl.keystore.type", "PEM"), ("ssl.truststore.type", "PEM")):
        given = take_for(key)
        if given is not None and given.upper() != allowed:
            raise ServerConfigError(
                f"{key}={given} is not supported (listener {name}); convert the store to PEM "
                f"files and set {key}=PEM"
            )
    for key in ("ssl.keystore.password", "ssl.truststore.password"):
        if take_for(key):
            raise ServerConfigError(
                f"{key} cannot be used with PEM files (listener {name}); remove it (an "
                "encrypted private key's password is ssl.key.password)"
            )
    keystore = take_for("ssl.keystore.location")
    if not keystore:
        raise ServerConfigError(
            f"listener {name} ({protocol}) needs ssl.keystore.location: a PEM file with the "
            "private key and the certificate chain"
        )
    truststore = take_for("ssl.truststore.location")
    client_auth = (take_for("ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise ServerConfigError(
            f"ssl.client.auth={client_auth!r} (listener {name}) is not one of "
            f"{', '.join(CLIENT_AUTH)}"
        )
    if client_auth != "none" and not truststore:
        raise ServerConfigError(
            f"ssl.client.auth={client_auth} (listener {name}) needs ssl.truststore.location: "
            "the CA certificates client certificates must chain to"
        )
    return TlsConfig(
        keystore_location=Path(keystore),
        key_password=take_for("ssl.key.password") or None,
        truststore_location=Path(truststore) if truststore else None,
        client_auth=client_auth,
        principal_mapping_rules=take_for("ssl.principal.mapping.rules")
        or DEFAULT_PRINCIPAL_MAPPING_RULES,
    )


def _per_listener_keys(values: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """`listener.name.<name>.<key>` keys of listed listeners, for keys that may be per listener."""
    lowered = {name.lower() for name in names}
    keys: list[str] = []
    for key in values:
        match = _PER_LISTENER.match(key)
        if match and match["name"] in lowered and match["key"] in _PER_LISTENER_KEYS:
            keys.append(key)
    return keys
