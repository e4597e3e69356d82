"""A difference between two images, as `image diff` and the Diff API show it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference between two images."""

    op: str
    """"+" added, "-" removed, "~" changed."""
    kind: str
    """feature, broker, namespace, topic, partition, pending_deletion, config, acl or
    credential.

    A topic that moved between namespaces is a "~" topic change with the field `moved`.
    """
    name: str
    """What changed: a topic's qualified name, `topic-3` for a partition, a broker id, ..."""
    id: str | None = None
    """The topic, namespace or ACL id where there is one."""
    fields: tuple[tuple[str, Any, Any], ...] = ()
    """(field, before, after) of a change."""

    def text(self) -> str:
        """One line, e.g. `~ partition orders-0: leader 1 -> 2`."""
        ident = f" (id {self.id})" if self.id else ""
        line = f"{self.op} {self.kind} {self.name}{ident}"
        if self.op == "~":
            line += ": " + "; ".join(f"{f} {_shown(b)} -> {_shown(a)}" for f, b, a in self.fields)
        elif self.fields:
            values = "; ".join(
                f"{f} {_shown(b if self.op == '-' else a)}" for f, b, a in self.fields
            )
            line += f": {values}"
        return line

    def to_json(self) -> dict[str, Any]:
        """The JSON form `mlog image diff --output json` prints."""
        return {
            "op": self.op,
            "kind": self.kind,
            "name": self.name,
            "id": self.id,
            "changes": {f: {"before": b, "after": a} for f, b, a in self.fields},
        }


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
