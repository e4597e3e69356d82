"""Where the repository, the test data and the child scripts are, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""This package: the child scripts that tests run as processes live here."""
TESTS = SUPPORT.parent
REPO = TESTS.parent
DATA = TESTS / "data"
"""Fixed inputs: a legacy log, server properties files."""
INTEROP = TESTS / "interop"
"""The foreign clients' sources (kafkajs, librdkafka) and their lock files."""
