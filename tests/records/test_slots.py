"""Records built through their slots equal the ones their dataclass constructor builds."""

from __future__ import annotations

import pytest
from hypothesis import given

from records.model import PartitionRecord, TopicRecord
from records.slots import preset_constructor
from tests.support.record_strategies import RECORD_STRATEGIES

NAMES = ("partition_id", "topic_id", "replicas", "isr", "leader")
make_partition = preset_constructor(PartitionRecord, NAMES)


@given(RECORD_STRATEGIES[PartitionRecord])
def test_a_preset_partition_equals_the_dataclass_one(record: PartitionRecord) -> None:
    built = make_partition(*(getattr(record, name) for name in NAMES))
    expected = PartitionRecord(**{name: getattr(record, name) for name in NAMES})
    assert built == expected
    assert hash(built) == hash(expected)
    assert repr(built) == repr(expected)


def test_a_field_left_out_without_a_default_is_refused() -> None:
    with pytest.raises(ValueError, match="topic_id has no plain default"):
        preset_constructor(PartitionRecord, ("partition_id", "replicas", "isr"))


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="no field"):
        preset_constructor(TopicRecord, ("name", "topic_id", "colour"))
