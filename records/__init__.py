"""What can be said in the metadata log: record types, their Avro schemas and the codec.

The names below are imported from their modules on first use, so that importing one module
(`records.errors`, `records.model`) does not build the codec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from records.codec import DEFAULT_CODEC, RecordCodec
    from records.entry import LogEntry
    from records.errors import (
        MetadataLogError,
        RecordError,
        UnknownRecordTypeError,
        UnsupportedRecordVersionError,
    )
    from records.model import (
        LEADER_UNCHANGED,
        NO_LEADER,
        RECORD_CLASSES,
        BrokerEndpoint,
        BrokerFeature,
        BrokerRegistrationChangeRecord,
        CancelTopicPartitionsDeletionRecord,
        ConfigRecord,
        ConfigResourceType,
        ControlledShutdownChange,
        DeleteTopicPartitionsRecord,
        FeatureLevelRecord,
        FencingChange,
        Mode,
        MoveTopicRecord,
        NamespaceRecord,
        PartitionChangeRecord,
        PartitionRecord,
        PurgeTopicPartitionsRecord,
        Record,
        RegisterBrokerRecord,
        RemoveNamespaceRecord,
        RemoveTopicRecord,
        TopicRecord,
        UnregisterBrokerRecord,
    )
    from records.uuids import Uuid

_HOMES = {
    "DEFAULT_CODEC": "records.codec",
    "RecordCodec": "records.codec",
    "LogEntry": "records.entry",
    "MetadataLogError": "records.errors",
    "RecordError": "records.errors",
    "UnknownRecordTypeError": "records.errors",
    "UnsupportedRecordVersionError": "records.errors",
    "LEADER_UNCHANGED": "records.model",
    "NO_LEADER": "records.model",
    "RECORD_CLASSES": "records.model",
    "BrokerEndpoint": "records.model",
    "BrokerFeature": "records.model",
    "BrokerRegistrationChangeRecord": "records.model",
    "CancelTopicPartitionsDeletionRecord": "records.model",
    "ConfigRecord": "records.model",
    "ConfigResourceType": "records.model",
    "ControlledShutdownChange": "records.model",
    "DeleteTopicPartitionsRecord": "records.model",
    "FeatureLevelRecord": "records.model",
    "FencingChange": "records.model",
    "Mode": "records.model",
    "MoveTopicRecord": "records.model",
    "NamespaceRecord": "records.model",
    "PartitionChangeRecord": "records.model",
    "PartitionRecord": "records.model",
    "PurgeTopicPartitionsRecord": "records.model",
    "Record": "records.model",
    "RegisterBrokerRecord": "records.model",
    "RemoveNamespaceRecord": "records.model",
    "RemoveTopicRecord": "records.model",
    "TopicRecord": "records.model",
    "UnregisterBrokerRecord": "records.model",
    "Uuid": "records.uuids",
}
"""Where each name of `records` is defined: imported from there on first use."""


# mypy sees the names through the imports above; only the interpreter needs the hook.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """`records.<name>`: import the module that defines it (PEP 562), once."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value


__all__ = [
    "DEFAULT_CODEC",
    "LEADER_UNCHANGED",
    "NO_LEADER",
    "RECORD_CLASSES",
    "BrokerEndpoint",
    "BrokerFeature",
    "BrokerRegistrationChangeRecord",
    "CancelTopicPartitionsDeletionRecord",
    "ConfigRecord",
    "ConfigResourceType",
    "ControlledShutdownChange",
    "DeleteTopicPartitionsRecord",
    "FeatureLevelRecord",
    "FencingChange",
    "LogEntry",
    "MetadataLogError",
    "Mode",
    "MoveTopicRecord",
    "NamespaceRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "PurgeTopicPartitionsRecord",
    "Record",
    "RecordCodec",
    "RecordError",
    "RegisterBrokerRecord",
    "RemoveNamespaceRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnknownRecordTypeError",
    "UnregisterBrokerRecord",
    "UnsupportedRecordVersionError",
    "Uuid",
]
