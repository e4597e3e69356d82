"""The controller's front (`Controller`): what it supplies itself when the caller does not.

The CLI on a data directory builds a bare `Controller()`: its purge times then come from the
wall clock, in milliseconds since the epoch, as the server's do.
"""

from __future__ import annotations

import time
from typing import Any

from records.model import ConfigResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    DeletePartitionsTopic,
    RegisterBroker,
    TopicRef,
)
from replay.controller.controller import Controller
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance


def applied(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    """The image after the records of one successful command."""
    answers = result.response if isinstance(result.response, list) else [result.response]
    assert all(answer.outcome.ok for answer in answers), answers
    delta = MetadataDelta(image)
    for record in result.records:
        delta.replay(record)
    delta.finish_batch()
    return delta.apply(
        Provenance(offset=image.provenance.offset + len(result.records), epoch=1, timestamp=0)
    )


def test_a_bare_controllers_purge_time_is_the_wall_clock_plus_the_delay() -> None:
    controller = Controller()
    image = EMPTY_IMAGE
    for broker_id in (1, 2):
        image = applied(
            image, controller.register_broker(image, RegisterBroker(broker_id=broker_id))
        )
    topic = CreatableTopic(name="orders", num_partitions=4, replication_factor=2)
    image = applied(image, controller.create_topics(image, [topic]))
    cluster = ConfigResource(type=ConfigResourceType.BROKER, name="")
    enable = AlterConfig(name="delete.topic.partition.enable", op=AlterConfigOp.SET, value="true")
    image = applied(image, controller.incremental_alter_configs(image, [(cluster, [enable])]))
    delay_ms = 60_000
    request = DeletePartitionsTopic(topic=TopicRef(name="orders"), count=2, delay_ms=delay_ms)
    before_ms = time.time_ns() // 1_000_000
    result = controller.delete_partitions(image, [request])
    after_ms = time.time_ns() // 1_000_000
    (answer,) = result.response
    assert answer.outcome.ok, answer.outcome
    assert answer.removed == (2, 3)
    assert before_ms + delay_ms <= answer.purge_at_ms <= after_ms + delay_ms
