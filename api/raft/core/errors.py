"""Errors of the consensus core and its persisted state."""

from __future__ import annotations

from records.errors import MetadataLogError


class RaftError(MetadataLogError):
    """Something went wrong in the controller quorum."""


class RaftConfigError(RaftError):
    """A `controller.quorum.*` setting is missing or malformed."""


class QuorumStateError(RaftError):
    """The persisted `quorum-state` file is damaged, foreign or disagrees with the config."""
