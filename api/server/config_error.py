"""The error of a bad server config value, and how the config's parts read a key."""

from __future__ import annotations

from collections.abc import Callable

from records.errors import MetadataLogError

Take = Callable[[str], "str | None"]
"""`take(key)`: a key's stripped value (marking the key used), or None when it is absent."""


class ServerConfigError(MetadataLogError):
    """A server config value is invalid; the message names the key and says what to do."""
