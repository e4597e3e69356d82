"""Config changes: the values a delta sets or clears, and ConfigsDelta, which replays ConfigRecords.

Two classes so the deltas hold no reference cycle: topics and namespaces clear the configs of
what they remove through `ConfigChanges`, while `ConfigsDelta` asks them whether the resource a
ConfigRecord names exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from immutables import Map

from records.model import ConfigRecord, ConfigResourceType
from replay.errors import ConfigReplayError
from replay.image import ConfigKey, ConfigsImage

if TYPE_CHECKING:
    from replay.delta.namespaces import NamespacesDelta
    from replay.delta.topics import TopicsDelta


class ConfigChanges:
    """Config values set (None: deleted) and resources cleared since the base image."""

    __slots__ = ("changes", "cleared", "image")

    def __init__(self, image: ConfigsImage) -> None:
        self.image = image
        self.changes: dict[ConfigKey, dict[str, str | None]] = {}
        self.cleared: set[ConfigKey] = set()

    def values(self, key: ConfigKey) -> dict[str, str]:
        """The configs of a resource as of the records replayed so far."""
        values = {} if key in self.cleared else dict(self.image.resources.get(key, {}))
        for name, value in self.changes.get(key, {}).items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        return values

    def set(self, key: ConfigKey, name: str, value: str | None) -> None:
        """Set one config of a resource (None deletes it)."""
        changes = self.changes.get(key)
        if changes is None:
            changes = self.changes[key] = {}
        changes[name] = value

    def clear(self, key: ConfigKey) -> None:
        """Drop every config of a resource (it is gone, or its configs moved)."""
        self.cleared.add(key)
        self.changes.pop(key, None)

    def move(self, old: ConfigKey, new: ConfigKey) -> None:
        """Move a resource's configs to a new key, replacing any there."""
        values = self.values(old)
        self.clear(old)
        self.clear(new)
        if values:
            self.changes[new] = dict(values)

    def apply(self) -> ConfigsImage:
        """The configs image with the changes applied (the base itself if none)."""
        if not (self.changes or self.cleared):
            return self.image
        with self.image.resources.mutate() as resources:
            for key in self.cleared - self.changes.keys():
                resources.pop(key, None)
            for key, changes in self.changes.items():
                start = Map() if key in self.cleared else resources.get(key, Map())
                with start.mutate() as values:
                    for name, value in changes.items():
                        if value is None:
                            values.pop(name, None)
                        else:
                            values[name] = value
                    updated = values.finish()
                if updated:
                    resources[key] = updated
                else:
                    resources.pop(key, None)
            finished_resources = resources.finish()
        return ConfigsImage(resources=finished_resources)


class ConfigsDelta:
    """Replays ConfigRecords for resources that exist, into the delta's `ConfigChanges`."""

    __slots__ = ("changes", "namespaces", "topics")

    def __init__(
        self, changes: ConfigChanges, topics: TopicsDelta, namespaces: NamespacesDelta
    ) -> None:
        self.changes = changes
        self.topics = topics
        self.namespaces = namespaces

    def values(self, key: ConfigKey) -> dict[str, str]:
        """The configs of a resource as of the records replayed so far."""
        return self.changes.values(key)

    def replay_config(self, record: ConfigRecord) -> None:
        """Set or delete one config of a topic, a namespace or a broker that exists."""
        resource_type = record.resource_type
        name = record.resource_name
        if resource_type == ConfigResourceType.TOPIC:
            exists = self.topics.topic_id(name) is not None
        elif resource_type == ConfigResourceType.NAMESPACE:
            exists = bool(name) and self.namespaces.namespace(name) is not None
        elif resource_type == ConfigResourceType.BROKER:
            # The form only: a broker's configs outlive its registration (as in Kafka), so a
            # snapshot holds configs of brokers that are gone.
            exists = not name or (name.isascii() and name.isdigit())
        else:
            raise ConfigReplayError(
                "config.resource-valid",
                f"config {record.name!r} is for a {resource_type.name} resource, which has none",
            )
        if not exists:
            raise ConfigReplayError(
                "config.resource-exists",
                f"config {record.name!r} is for {resource_type.name} {name!r}, which does not "
                "exist",
            )
        self.changes.set((resource_type, name), record.name, record.value)

    def apply(self) -> ConfigsImage:
        """The configs image with the changes applied (the base itself if none)."""
        return self.changes.apply()
