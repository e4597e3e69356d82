"""ConfigsDelta: the config values a delta sets or clears, and the ConfigRecords that set them.

Topics and namespaces take their configs with them when they are removed or moved: the router
(`MetadataDelta`) does that through `clear` and `move`, and tells `replay_config` whether the
topic or namespace a ConfigRecord names exists, so this delta holds no other area's delta.
"""

from __future__ import annotations

from immutables import Map

from records.model import ConfigRecord, ConfigResourceType
from replay.errors import ConfigReplayError
from replay.image import ConfigKey, ConfigsImage


class ConfigsDelta:
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

    def replay_config(self, record: ConfigRecord, resource_exists: bool) -> None:
        """Set or delete one config of a topic, a namespace or a broker that exists.

        `resource_exists`: whether the topic or the namespace the record names exists, as of
        the records replayed so far (the router asks their areas; unused for other types).
        """
        resource_type = record.resource_type
        name = record.resource_name
        if resource_type in (ConfigResourceType.TOPIC, ConfigResourceType.NAMESPACE):
            exists = resource_exists
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
        self.set((resource_type, name), record.name, record.value)

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
