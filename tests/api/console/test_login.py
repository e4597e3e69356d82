"""A password checked against an image's SCRAM credentials by the sans-IO exchange."""

from __future__ import annotations

from pathlib import Path

import pytest

from api import Metadata
from api.console.errors import LoginFailed
from api.console.login import check_fields, scram_matches
from replay.image import MetadataImage
from tests.support.sasl_users import USERS


@pytest.fixture(scope="module")
def image(history_dir: Path) -> MetadataImage:
    with Metadata.open(history_dir) as md:
        return md.image()


@pytest.mark.parametrize(("user", "password"), sorted(USERS.items()))
def test_each_users_password_matches(image: MetadataImage, user: str, password: str) -> None:
    assert scram_matches(image, user, password)


@pytest.mark.parametrize(
    ("user", "password"),
    [
        ("alice", "alice-secret "),
        ("alice", USERS["bob"]),
        ("mallory", "alice-secret"),
        ("a,b", "x"),
    ],
)
def test_others_do_not(image: MetadataImage, user: str, password: str) -> None:
    assert not scram_matches(image, user, password)


@pytest.mark.parametrize(
    ("user", "password", "says"),
    [
        ("", "x", "give a user and a password"),
        ("alice", "", "give a user and a password"),
        ("a" * 257, "x", "at most 256"),
        ("alice", "x" * 257, "at most 256"),
        ("al\x00ice", "x", "refused"),
    ],
)
def test_fields_are_checked_first(user: str, password: str, says: str) -> None:
    with pytest.raises(LoginFailed, match=says):
        check_fields(user, password)
