"""Errors of the security package: failed logins, bad security configuration.

None of these messages ever holds a secret (password, salt, key, proof or nonce): they may be
sent to a client, logged by the server or printed by the command line.
"""

from __future__ import annotations

from typing import ClassVar

from records.errors import MetadataLogError

SASL_AUTHENTICATION_FAILED = 58
"""Kafka's error code for a refused SASL login (`Errors.SASL_AUTHENTICATION_FAILED`)."""


class SecurityError(MetadataLogError):
    """Root of the security package's errors."""


class AuthenticationFailed(SecurityError):
    """A client's SASL login was refused; `str()` is what the client is told.

    `error_code` is Kafka's SASL_AUTHENTICATION_FAILED (58), what a SaslAuthenticate answer
    carries. The message never says whether the user exists.
    """

    error_code: ClassVar[int] = SASL_AUTHENTICATION_FAILED


def invalid_credentials(mechanism_name: str) -> AuthenticationFailed:
    """Kafka's answer to a wrong password or an unknown user, word for word."""
    return AuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism_name}"
    )


class SaslClientError(SecurityError):
    """Our client could not log in: the server's answer is malformed, unsafe or unproven."""


class SecurityConfigError(SecurityError):
    """A security setting (file, key, rule) is missing or invalid; the message says which."""
