"""What can be said in the metadata log: record types, their Avro schemas and the codec.

The names below are imported from their modules on first use, so that importing one module
(`records.errors`, `records.model`) does not build the codec. They are declared once, as the
imports mypy reads; the interpreter reads the same lines (`records.exports`) to know where
each name is defined, and what `__all__` holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from records.codec import DEFAULT_CODEC as DEFAULT_CODEC
    from records.codec import RecordCodec as RecordCodec
    from records.entry import LogEntry as LogEntry
    from records.errors import MetadataLogError as MetadataLogError
    from records.errors import RecordError as RecordError
    from records.errors import UnknownRecordTypeError as UnknownRecordTypeError
    from records.errors import UnsupportedRecordVersionError as UnsupportedRecordVersionError
    from records.model import LEADER_UNCHANGED as LEADER_UNCHANGED
    from records.model import NO_LEADER as NO_LEADER
    from records.model import RECORD_CLASSES as RECORD_CLASSES
    from records.model import BrokerEndpoint as BrokerEndpoint
    from records.model import BrokerFeature as BrokerFeature
    from records.model import BrokerRegistrationChangeRecord as BrokerRegistrationChangeRecord
    from records.model import (
        CancelTopicPartitionsDeletionRecord as CancelTopicPartitionsDeletionRecord,
    )
    from records.model import ConfigRecord as ConfigRecord
    from records.model import ConfigResourceType as ConfigResourceType
    from records.model import ControlledShutdownChange as ControlledShutdownChange
    from records.model import DeleteTopicPartitionsRecord as DeleteTopicPartitionsRecord
    from records.model import FeatureLevelRecord as FeatureLevelRecord
    from records.model import FencingChange as FencingChange
    from records.model import Mode as Mode
    from records.model import MoveTopicRecord as MoveTopicRecord
    from records.model import NamespaceRecord as NamespaceRecord
    from records.model import PartitionChangeRecord as PartitionChangeRecord
    from records.model import PartitionRecord as PartitionRecord
    from records.model import PurgeTopicPartitionsRecord as PurgeTopicPartitionsRecord
    from records.model import Record as Record
    from records.model import RegisterBrokerRecord as RegisterBrokerRecord
    from records.model import RemoveNamespaceRecord as RemoveNamespaceRecord
    from records.model import RemoveTopicRecord as RemoveTopicRecord
    from records.model import TopicRecord as TopicRecord
    from records.model import UnregisterBrokerRecord as UnregisterBrokerRecord
    from records.uuids import Uuid as Uuid


# mypy sees the names through the imports above; only the interpreter needs the hook.
if not TYPE_CHECKING:
    from records.exports import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
