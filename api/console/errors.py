"""What a console request can get wrong: bad input in a URL or form, a failed login."""

from __future__ import annotations

from records.errors import MetadataLogError


class ConsoleError(MetadataLogError):
    """A console problem; the message says what happened and what to do."""


class BadInput(ConsoleError):
    """A URL's parameter or a form's field is not what it must be (answered 400)."""


class LoginFailed(ConsoleError):
    """The user and password were refused, or the service could not be asked."""
