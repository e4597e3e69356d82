"""An example broker: registers, heartbeats and follows the committed metadata log.

What a data-plane process written by someone else does to take part in the cluster
(docs/brokers.md): it registers with Kafka's BrokerRegistration (its cluster id from
DescribeCluster, a random incarnation id, its listeners and rack), heartbeats every
`broker.heartbeat.interval.ms` with the offset of the metadata it has applied, and reads the
committed log from that offset with FetchLog (long polls, on a second connection so the
heartbeats are never stuck behind one). The controller unfences it once its offset reaches
its own registration. On Ctrl-C (or after --run-for) it asks for a controlled shutdown
(WantShutDown), waits for should_shut_down and exits.

    python examples/broker.py --bootstrap-server 127.0.0.1:9092 --broker-id 1 \
        --listener PLAINTEXT://b1.example:9092 [--rack r1] [--run-for 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.client.admin import AdminClient

HEARTBEAT_INTERVAL_S = 2.0
"""Kafka's `broker.heartbeat.interval.ms` default."""


class ExampleBroker:
    """One broker process: its registration, its heartbeats and the metadata it follows."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.incarnation = uuid.uuid4()
        self.epoch = -1
        self.applied = -1
        """The offset of the last metadata record this broker has applied."""
        self.fenced = True
        self.stopping = asyncio.Event()

    async def run(self) -> None:
        """Register, then heartbeat and follow until asked to stop; shut down cleanly."""
        control = await AdminClient.connect_controller(self.args.bootstrap_server)
        reader = await AdminClient.connect_controller(self.args.bootstrap_server)
        try:
            cluster = await control.describe_cluster()
            await self.register(control, cluster.cluster_id)
            follower = asyncio.create_task(self.follow(reader))
            await self.heartbeats(control)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
        finally:
            await control.close()
            await reader.close()

    async def register(self, client: AdminClient, cluster_id: str) -> None:
        """BrokerRegistration: fenced, with a new epoch (the offset of the registration)."""
        scheme, _, address = self.args.listener.partition("://")
        host, _, port = address.rpartition(":")
        answer = await client.request(
            62,
            broker_id=self.args.broker_id,
            cluster_id=cluster_id,
            incarnation_id=self.incarnation,
            listeners=[{"name": scheme, "host": host, "port": int(port), "security_protocol": 0}],
            features=[
                {"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 2}
            ],
            rack=self.args.rack,
        )
        if answer.error_code != 0:
            raise SystemExit(f"registration refused: error {int(answer.error_code)}")
        self.epoch = int(answer.broker_epoch)
        print(f"broker {self.args.broker_id}: registered, epoch {self.epoch}", flush=True)

    async def follow(self, client: AdminClient) -> None:
        """Apply every committed record from the start (a real broker keeps its own image)."""
        async for entry in client.follow(0, max_wait_ms=int(HEARTBEAT_INTERVAL_S * 1000)):
            self.applied = entry.offset

    async def heartbeats(self, client: AdminClient) -> None:
        """Heartbeat every interval; after a stop, until the controller says shut down."""
        while True:
            stopping = self.stopping.is_set()
            answer = await client.request(
                63,
                broker_id=self.args.broker_id,
                broker_epoch=self.epoch,
                current_metadata_offset=self.applied,
                want_fence=False,
                want_shut_down=stopping,
            )
            if answer.error_code != 0:
                raise SystemExit(f"heartbeat refused: error {int(answer.error_code)}")
            if answer.is_fenced != self.fenced:
                self.fenced = bool(answer.is_fenced)
                state = "fenced" if self.fenced else "unfenced"
                print(
                    f"broker {self.args.broker_id}: {state} at metadata offset {self.applied}",
                    flush=True,
                )
            if stopping and answer.should_shut_down:
                print(f"broker {self.args.broker_id}: controlled shutdown done", flush=True)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), HEARTBEAT_INTERVAL_S)


async def main_async(args: argparse.Namespace) -> None:
    """Run one broker until a signal or --run-for asks it to stop."""
    broker = ExampleBroker(args)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, broker.stopping.set)
    if args.run_for is not None:
        loop.call_later(args.run_for, broker.stopping.set)
    await broker.run()


def main() -> None:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT of a controller")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--listener", default="PLAINTEXT://127.0.0.1:19092")
    parser.add_argument("--rack", default=None)
    parser.add_argument("--run-for", type=float, default=None, help="seconds, then shut down")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
