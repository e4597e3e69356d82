"""Where a served write's time goes: server_bench's cycle in process, one layer at a time.

Usage: python bench/layers_bench.py [--seconds 6] [--tasks 50] [--rounds 2]

server_bench's cycle (CreateTopics of one new topic, Metadata of it, DeleteTopics of it by id)
is driven by `--tasks` asyncio tasks on one uvloop loop for `--seconds` per layer, each layer
on a fresh data directory with 3 brokers, `--rounds` times in turn:

  service      the commands submitted to `MetadataService` (server_bench's baseline)
  frames       each request's frame built by hand, nothing else (what the others pay for it)
  decode       each frame read into a request (`Connection`), the commands as in *service*
  handlers     each frame read and answered by the Kafka handlers (`KafkaApis.handle`)
  encode       the same, each answer written to its frame (`codec.encode_response`)

Printed: microseconds per write (two writes a cycle) for each layer, the rounds' medians.
The difference between two layers is what the outer one costs in that loop, beside the
others: the served bench (`server_bench.py`) adds the network and the connections' tasks.
The collector is off in every layer (its work depends on what the layer leaves behind).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_bench import _baseline, _prepare, create_topic_v7, delete_topic_v6, metadata_v12

from api.protocol import codec
from api.protocol.connection import Connection, Request
from api.server.kafka.base import Listener
from api.server.kafka.dispatch import KafkaApis
from api.service.service import MetadataService
from replay.controller.commands import CreatableTopic, TopicRef

LAYERS = ("service", "frames", "decode", "handlers", "encode")


def _framed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


async def _layer(layer: str, data_dir: Path, tasks: int, seconds: float) -> float:
    """Writes/s of the cycle at one layer."""
    if layer == "service":
        return await _baseline(data_dir, tasks, seconds)
    _prepare(data_dir)
    service = MetadataService.open(data_dir / "log")
    controller = service.controller
    kafka = KafkaApis(service, Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c"))
    writes = 0
    deadline = time.perf_counter() + seconds

    def event(connection: Connection, frame: bytes) -> Any:
        connection.feed(_framed(frame))
        found = connection.next_event()
        if not isinstance(found, Request):
            raise SystemExit(f"{layer}: a bench frame did not read as a request: {found}")
        return found.request

    async def handled(request: Any, correlation_id: int) -> Any:
        answer = await kafka.handle(request)
        if layer == "encode":
            codec.encode_response(correlation_id, answer)
        return answer

    async def cycle(index: int) -> None:
        nonlocal writes
        connection = Connection()
        i = 0
        while time.perf_counter() < deadline:
            name = f"layer-{index}-{i}"
            i += 1
            created = create_topic_v7(1, name)
            described = metadata_v12(2, name)
            if layer == "frames":
                delete_topic_v6(3, bytes(16))
                await asyncio.sleep(0)
            elif layer == "decode":
                event(connection, created)
                event(connection, described)
                event(connection, delete_topic_v6(3, bytes(16)))
                topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                await service.submit(lambda image, t=topic: controller.create_topics(image, [t]))  # type: ignore[misc]
                _ = service.image.topics.get_by_name(name)
                ref = TopicRef(name=name)
                await service.submit(lambda image, r=ref: controller.delete_topics(image, [r]))  # type: ignore[misc]
            else:
                answer = await handled(event(connection, created), 1)
                topic_id = answer.values["topics"][0]["topic_id"]
                await handled(event(connection, described), 2)
                deleted = delete_topic_v6(3, bytes(topic_id))
                await handled(event(connection, deleted), 3)
            writes += 2

    started = time.perf_counter()
    await asyncio.gather(*(cycle(i) for i in range(tasks)))
    rate = writes / (time.perf_counter() - started)
    await service.aclose()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    gc.disable()
    micros: dict[str, list[float]] = {layer: [] for layer in LAYERS}
    with tempfile.TemporaryDirectory(prefix="layers-bench-") as scratch:
        for round_ in range(args.rounds):
            for layer in LAYERS:
                data_dir = Path(scratch) / f"{round_}-{layer}"
                rate = uvloop.run(_layer(layer, data_dir, args.tasks, args.seconds))
                micros[layer].append(1e6 / rate)
            print(
                f"round {round_ + 1}: "
                + ", ".join(f"{layer} {micros[layer][-1]:.1f}" for layer in LAYERS)
                + " µs a write",
                flush=True,
            )
    print()
    m = {layer: statistics.median(values) for layer, values in micros.items()}
    added = {
        "service": m["service"],
        "frames": m["frames"],
        "decode": m["decode"] - m["service"] - m["frames"],
        "handlers": m["handlers"] - m["decode"],
        "encode": m["encode"] - m["handlers"],
    }
    print(f"{'layer':<10}{'µs a write':>12}{'its own':>10}")
    for layer in LAYERS:
        print(f"{layer:<10}{m[layer]:>12.1f}{added[layer]:>10.1f}")
    print("its own: over the layer before (decode: over the service and the frames)")


if __name__ == "__main__":
    main()
