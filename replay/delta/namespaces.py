"""NamespacesDelta: the namespace tree and the topic count of each namespace."""

from __future__ import annotations

from records.model import NamespaceRecord, RemoveNamespaceRecord
from records.uuids import Uuid
from replay.delta.maps import MISSING, updated
from replay.errors import NamespaceReplayError
from replay.image import NAMESPACE_SEPARATOR, NamespacesImage
from replay.rules import namespace_name_problem


class NamespacesDelta:
    """Namespaces created and removed, and topic counts changed, since the base image."""

    __slots__ = ("_child_counts", "_ids", "_namespaces", "_topic_counts", "image")

    def __init__(self, image: NamespacesImage) -> None:
        self.image = image
        self._namespaces: dict[str, NamespaceRecord | None] = {}
        self._ids: dict[Uuid, str | None] = {}
        self._topic_counts: dict[str, int] = {}
        self._child_counts: dict[str, int] | None = None
        """Live direct child namespaces per namespace, built on the first removal."""

    def namespace(self, name: str) -> NamespaceRecord | None:
        """A namespace as of the records replayed so far (None for "" and unknown names)."""
        found = self._namespaces.get(name, MISSING)
        if found is MISSING:
            return self.image.get(name)
        return found  # type: ignore[return-value]  # MISSING ruled out above

    def _name_of(self, namespace_id: Uuid) -> str | None:
        found = self._ids.get(namespace_id, MISSING)
        if found is MISSING:
            return self.image.by_id.get(namespace_id)
        return found  # type: ignore[return-value]  # MISSING ruled out above

    def topic_count(self, namespace: str) -> int:
        """Live topics directly in a non-default namespace, as of the records replayed so far."""
        found = self._topic_counts.get(namespace)
        return self.image.topic_counts.get(namespace, 0) if found is None else found

    def count_topic(self, namespace: str, change: int) -> None:
        """Add `change` to a namespace's topic count (the default namespace keeps none).

        The router calls it for the topic records that create, remove or move a topic.
        """
        if namespace:
            self._topic_counts[namespace] = self.topic_count(namespace) + change

    def replay_namespace(self, record: NamespaceRecord) -> None:
        """Create a namespace below its existing parent."""
        name = record.name
        problem = namespace_name_problem(name)
        if problem is not None:
            raise NamespaceReplayError("namespace.name-legal", problem)
        if self.namespace(name) is not None:
            raise NamespaceReplayError(
                "namespace.name-unique", f"namespace {name!r} already exists"
            )
        if record.namespace_id in Uuid.RESERVED:
            raise NamespaceReplayError(
                "namespace.id-unique", f"namespace id {record.namespace_id} is reserved"
            )
        if self._name_of(record.namespace_id) is not None:
            raise NamespaceReplayError(
                "namespace.id-unique", f"namespace id {record.namespace_id} is already in use"
            )
        parent_name = name.rpartition(NAMESPACE_SEPARATOR)[0]
        parent = self.namespace(parent_name) if parent_name else None
        if parent_name and parent is None:
            raise NamespaceReplayError(
                "namespace.parent",
                f"namespace {name!r} needs its parent {parent_name!r} to exist first",
            )
        expected_parent = None if parent is None else parent.namespace_id
        if record.parent_id != expected_parent:
            raise NamespaceReplayError(
                "namespace.parent",
                f"namespace {name!r} names parent id {record.parent_id}, but its parent is "
                f"{expected_parent}",
            )
        self._namespaces[name] = record
        self._ids[record.namespace_id] = name
        if self._child_counts is not None and parent_name:
            self._child_counts[parent_name] = self._child_counts.get(parent_name, 0) + 1

    def _live_namespaces(self) -> list[str]:
        names = set(self.image.by_name) | set(self._namespaces)
        return [n for n in names if self.namespace(n) is not None]

    def _namespace_children(self) -> dict[str, int]:
        """Live namespaces directly below each namespace, as of the records replayed so far.

        The first call counts them all once (children exist only below a live parent, so a
        namespace has descendants exactly when it has children); replay keeps the counts from
        then on, so removing a tree of n namespaces in one delta is linear in n, not n².
        """
        if self._child_counts is None:
            counts: dict[str, int] = {}
            for live in self._live_namespaces():
                parent = live.rpartition(NAMESPACE_SEPARATOR)[0]
                if parent:
                    counts[parent] = counts.get(parent, 0) + 1
            self._child_counts = counts
        return self._child_counts

    def replay_remove_namespace(self, record: RemoveNamespaceRecord) -> str:
        """Remove an empty namespace; returns its name (the router clears its configs)."""
        name = self._name_of(record.namespace_id)
        if name is None:
            raise NamespaceReplayError(
                "namespace.exists", f"no namespace has id {record.namespace_id}"
            )
        children_of = self._namespace_children()
        if children_of.get(name):
            prefix = name + NAMESPACE_SEPARATOR
            children = sorted(n for n in self._live_namespaces() if n.startswith(prefix))
            raise NamespaceReplayError(
                "namespace.empty-before-removal",
                f"namespace {name!r} still has child namespaces {children}; remove them first",
            )
        if self.topic_count(name):
            raise NamespaceReplayError(
                "namespace.empty-before-removal",
                f"namespace {name!r} still holds {self.topic_count(name)} topics; remove them "
                "first",
            )
        self._namespaces[name] = None
        self._ids[record.namespace_id] = None
        parent_name = name.rpartition(NAMESPACE_SEPARATOR)[0]
        if parent_name:
            children_of[parent_name] -= 1
        return name

    def apply(self) -> NamespacesImage:
        """The namespaces image with the changes applied (the base itself if none)."""
        base = self.image
        if not (self._namespaces or self._topic_counts):
            return base
        with base.topic_counts.mutate() as counts:
            for name, count in self._topic_counts.items():
                if count:
                    counts[name] = count
                else:
                    counts.pop(name, None)
            topic_counts = counts.finish()
        return NamespacesImage(
            by_name=updated(base.by_name, self._namespaces),
            by_id=updated(base.by_id, self._ids),
            topic_counts=topic_counts,
        )
