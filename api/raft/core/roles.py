"""The roles a quorum node can be in."""

from __future__ import annotations

from enum import IntEnum


class Role(IntEnum):
    """The node's role in its current epoch."""

    UNATTACHED = 0
    PROSPECTIVE = 1
    CANDIDATE = 2
    LEADER = 3
    FOLLOWER = 4
    RESIGNED = 5
    OBSERVER = 6
    """A non-voter, or a voter without durable state that has not caught up yet."""
