"""Certificates for a test quorum's controller listener (mTLS), made at test time with trustme.

One CA and one controller certificate (`CN=controller`) shared by every node: each node's
default `controller.principals` is then the same principal, so no key names it. `stranger`
and `impostor` make the credentials an attacker might hold: a certificate of another CA, and
one of the same CA under another name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

from api.security.client_config import ClientSecurity, client_security
from api.server.config import ListenerConfig, TlsConfig
from api.server.listeners import server_listener
from api.server.server import ServerListener

CONTROLLER_CN = "controller"
"""The controllers' certificate's common name."""

CONTROLLER_PRINCIPAL = "User:controller"
"""The controllers' principal under `PRINCIPAL_RULES`."""

PRINCIPAL_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
"""`ssl.principal.mapping.rules` of the controller listener: the CN alone (trustme adds a random
OU to each certificate, which the DN would carry)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerPki:
    """Files of a controller PKI: the CA, the controllers' key and chain, and an impostor's."""

    ca: Path
    controller: Path
    other_ca_cert: Path
    """A certificate (key and chain) of another CA, named like the controllers."""
    other_name_cert: Path
    """A certificate (key and chain) of the controllers' CA under another name."""

    def server_keys(self, listener: str = "controller") -> dict[str, str]:
        """A server's keys for an mTLS controller listener `listener` (lower-case name)."""
        prefix = f"listener.name.{listener}."
        return {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.location": str(self.controller),
            prefix + "ssl.truststore.type": "PEM",
            prefix + "ssl.truststore.location": str(self.ca),
            prefix + "ssl.client.auth": "required",
            prefix + "ssl.principal.mapping.rules": PRINCIPAL_RULES,
        }

    def server_listener(self, name: str = "CONTROLLER", port: int = 0) -> ServerListener:
        """An in-process server's mTLS controller listener on 127.0.0.1 (`server_keys`'s)."""
        return server_listener(
            ListenerConfig(
                name=name,
                security_protocol="SSL",
                host="127.0.0.1",
                port=port,
                tls=TlsConfig(
                    keystore_location=self.controller,
                    truststore_location=self.ca,
                    client_auth="required",
                    principal_mapping_rules=PRINCIPAL_RULES,
                ),
            )
        )

    def client(self, keystore: Path | None = None) -> ClientSecurity:
        """A TLS client trusting the CA, presenting `keystore` (None: no certificate)."""
        props = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca)}
        if keystore is not None:
            props |= {"ssl.keystore.location": str(keystore), "ssl.keystore.type": "PEM"}
        return client_security(props, source="test")

    def controller_client(self) -> ClientSecurity:
        """A client holding the controllers' own certificate."""
        return self.client(self.controller)


def make_controller_pki(directory: Path) -> ControllerPki:
    """Write a controller PKI under `directory` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    other = trustme.CA()
    paths = {
        "ca": directory / "ca.pem",
        "controller": directory / "controller.pem",
        "other_ca_cert": directory / "other-ca.pem",
        "other_name_cert": directory / "other-name.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    issued = {
        "controller": ca.issue_cert("127.0.0.1", "localhost", common_name=CONTROLLER_CN),
        "other_ca_cert": other.issue_cert("127.0.0.1", "localhost", common_name=CONTROLLER_CN),
        "other_name_cert": ca.issue_cert("127.0.0.1", "localhost", common_name="mallory"),
    }
    for name, cert in issued.items():
        cert.private_key_and_cert_chain_pem.write_to_path(str(paths[name]))
        paths[name].chmod(0o600)
    return ControllerPki(**paths)
