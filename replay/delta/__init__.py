"""Deltas: records are replayed into them, and `apply` turns them into the next image.

Replay checks the invariants a record relies on and raises a typed `ReplayError` when one does
not hold; it never changes the base image. A delta keeps its changes in plain dicts and lists
(cheap to update record by record) and builds the persistent maps of the next image only once,
in `apply`. Replaying many records in one delta or in many gives the same image (tested).

One delta per area of the image, as in Kafka's `metadata/image`; `MetadataDelta` routes.
"""

from replay.delta.metadata import MetadataDelta, replay_records
from replay.delta.topics import merge_partition_change

__all__ = ["MetadataDelta", "merge_partition_change", "replay_records"]
