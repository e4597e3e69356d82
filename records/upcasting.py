"""Upcasters: functions that lift a stored record from one version to the next.

A changed meaning gets a new record version; the old version stays readable forever through a
chain of upcasters `(record_type, from_version) -> function`, each taking the Avro value (a dict)
of `from_version` and returning the value of `from_version + 1`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from records.errors import UnsupportedRecordVersionError

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class UpcasterRegistry:
    """An immutable set of upcasters, keyed by (record type, from version)."""

    __slots__ = ("_by_key",)

    def __init__(self, upcasters: Mapping[tuple[int, int], Upcaster] | None = None) -> None:
        self._by_key: dict[tuple[int, int], Upcaster] = dict(upcasters or {})

    def chain(self, record_type: int, from_version: int, to_version: int) -> list[Upcaster]:
        """The upcasters leading from `from_version` to `to_version`, in order.

        Raises `UnsupportedRecordVersionError` when a step is missing, so an unreadable version is
        found when the codec is built, not when the first old entry is read.
        """
        steps: list[Upcaster] = []
        for version in range(from_version, to_version):
            step = self._by_key.get((record_type, version))
            if step is None:
                raise UnsupportedRecordVersionError(record_type, from_version, to_version)
            steps.append(step)
        return steps


UPCASTERS = UpcasterRegistry()
"""The upcasters of this code base (none yet: every record type is at its first version)."""
