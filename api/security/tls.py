"""TLS contexts from PEM files under Kafka's keys, TLS 1.2 at least (Python's `ssl`).

The server's keystore is Kafka's `ssl.keystore.type=PEM`: one file with the private key and
the certificate chain (leaf first). The truststore is a PEM file of CA certificates. Every
problem with a file (missing, unreadable, not PEM, wrong key password, key and certificate
that do not belong together) is one `SecurityConfigError` naming the setting and the file,
never the password. An encrypted key without a password is an error, not a prompt.
"""

from __future__ import annotations

import enum
import os
import ssl
from collections.abc import Callable

from api.security.errors import SecurityConfigError


class ClientAuth(enum.Enum):
    """Kafka's `ssl.client.auth`: whether a TLS listener asks clients for a certificate."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"

    @classmethod
    def parse(cls, text: str) -> ClientAuth:
        """`none`, `requested` or `required` (any case); `SecurityConfigError` otherwise."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise SecurityConfigError(
                f"ssl.client.auth must be none, requested or required, not {text!r}"
            ) from None


_VERIFY_MODES = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def _check_file(setting: str, path: str) -> None:
    """A clear error for a path that is missing, not a file or not readable."""
    shown = f"{setting}={path}"
    if not path:
        raise SecurityConfigError(f"{setting} is empty; give the path of a PEM file")
    if not os.path.exists(path):
        raise SecurityConfigError(f"{shown}: no such file")
    if not os.path.isfile(path):
        raise SecurityConfigError(f"{shown}: not a file")
    try:
        with open(path, "rb") as file:
            head = file.read(1 << 16)
    except OSError as exc:
        raise SecurityConfigError(f"{shown}: cannot be read ({exc.strerror or exc})") from None
    if b"-----BEGIN " not in head:
        raise SecurityConfigError(
            f"{shown}: not a PEM file (no -----BEGIN line); Kafka's PEM files are what is "
            "supported (ssl.keystore.type=PEM), convert a JKS or PKCS12 store with keytool or "
            "openssl"
        )


def _is_encrypted(path: str) -> bool:
    """Whether a PEM file holds an encrypted private key (PKCS#8 or OpenSSL's legacy form)."""
    try:
        with open(path, "rb") as file:
            data = file.read(1 << 20)
    except OSError:
        return False
    return b"ENCRYPTED PRIVATE KEY" in data or b"Proc-Type: 4,ENCRYPTED" in data


def _ssl_error(
    setting: str, path: str, exc: ssl.SSLError, *, encrypted: bool, password: bool
) -> SecurityConfigError:
    """What an `SSLError` of loading a key and chain means, in a line naming the setting."""
    text = f"{exc.reason or ''} {exc}".upper()
    shown = f"{setting}={path}"
    if encrypted and not password:
        return SecurityConfigError(
            f"{shown}: the private key is encrypted; set ssl.key.password to its password"
        )
    if encrypted or "BAD_DECRYPT" in text or "BAD DECRYPT" in text:
        return SecurityConfigError(f"{shown}: ssl.key.password does not decrypt the private key")
    if "KEY_VALUES_MISMATCH" in text:
        return SecurityConfigError(f"{shown}: the private key does not match the certificate")
    return SecurityConfigError(
        f"{shown}: not a valid PEM certificate and private key ({exc.reason or exc})"
    )


def _load_chain(
    context: ssl.SSLContext,
    setting: str,
    certfile: str,
    keyfile: str | None,
    password: str | None,
) -> None:
    """Load a certificate chain and its key; a password is never prompted for."""
    _check_file(setting, certfile)
    if keyfile is not None:
        _check_file("ssl.key.location", keyfile)
    encrypted = _is_encrypted(keyfile or certfile)

    def no_password() -> bytes:
        # Called only for an encrypted key: without it, OpenSSL would prompt on the terminal.
        return b""

    secret: Callable[[], bytes] | str = no_password if password is None else password
    try:
        context.load_cert_chain(certfile, keyfile, secret)
    except ssl.SSLError as exc:
        raise _ssl_error(
            setting, certfile, exc, encrypted=encrypted, password=password is not None
        ) from None
    except OSError as exc:  # the file changed between the check and the load
        raise SecurityConfigError(f"{setting}={certfile}: cannot be read ({exc})") from None


def _load_trust(context: ssl.SSLContext, setting: str, cafile: str) -> None:
    _check_file(setting, cafile)
    try:
        context.load_verify_locations(cafile=cafile)
    except ssl.SSLError as exc:
        raise SecurityConfigError(
            f"{setting}={cafile}: not a valid PEM file of CA certificates ({exc.reason or exc})"
        ) from None
    except OSError as exc:
        raise SecurityConfigError(f"{setting}={cafile}: cannot be read ({exc})") from None


def server_context(
    keystore_location: str,
    key_password: str | None = None,
    truststore_location: str | None = None,
    client_auth: ClientAuth | str = ClientAuth.NONE,
) -> ssl.SSLContext:
    """A server's TLS context: Kafka's `ssl.keystore.location` (PEM key + chain) and friends.

    `client_auth` requested or required needs `truststore_location`, the CAs whose client
    certificates are accepted.
    """
    auth = client_auth if isinstance(client_auth, ClientAuth) else ClientAuth.parse(client_auth)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, "ssl.keystore.location", keystore_location, None, key_password)
    if truststore_location:
        _load_trust(context, "ssl.truststore.location", truststore_location)
    elif auth is not ClientAuth.NONE:
        raise SecurityConfigError(
            f"ssl.client.auth={auth.value} needs ssl.truststore.location: the PEM file of the "
            "CAs that sign client certificates"
        )
    context.verify_mode = _VERIFY_MODES[auth]
    return context


def client_context(
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
    key_password: str | None = None,
    *,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client's TLS context: the server's certificate is always verified.

    `ca_location` is a PEM file of CA certificates (the system's CAs if None or `probe`). A client
    certificate is `certificate_location` with its key in `key_location`, or both in the
    certificate file (Kafka's PEM keystore). `check_hostname` False skips only the host-name
    check (librdkafka's `ssl.endpoint.identification.algorithm=none`), not the chain's.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if ca_location and ca_location != "probe":
        _load_trust(context, "ssl.ca.location", ca_location)
    else:  # librdkafka's "probe" also means the system's CAs
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if key_location and not certificate_location:
        raise SecurityConfigError(
            "ssl.key.location is set without ssl.certificate.location; give the client "
            "certificate too"
        )
    if certificate_location:
        _load_chain(
            context, "ssl.certificate.location", certificate_location, key_location, key_password
        )
    return context
