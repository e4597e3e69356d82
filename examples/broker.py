"""An example broker: registers, heartbeats and follows the committed metadata log.

What a data-plane process written by someone else does to take part in the cluster
(docs/brokers.md): it registers with Kafka's BrokerRegistration (its cluster id from
DescribeCluster, a random incarnation id, its listeners and rack), heartbeats every
`broker.heartbeat.interval.ms` with the offset of the metadata it has applied, and reads the
committed log from that offset with FetchLog (long polls, on a second connection so the
heartbeats are never stuck behind one). The controller unfences it once its offset reaches
its own registration.

It lives through controller failovers as a Kafka broker does: its controller channel sends
to the quorum's leader, found from the bootstrap list; a lost connection or NOT_CONTROLLER
sends it looking for the leader again, and the heartbeat goes there (the new leader starts
the broker's session when it takes over: nothing is fenced, nothing registered again). Only
if the controller no longer knows its registration (STALE_BROKER_EPOCH,
BROKER_ID_NOT_REGISTERED) does it register again. On SIGINT or SIGTERM (or after --run-for) it
asks for a controlled shutdown (WantShutDown), waits for should_shut_down and exits 0; a
second signal stops it at once (exit 1).

    python examples/broker.py --bootstrap-server 127.0.0.1:9092,127.0.0.1:9093 \
        --broker-id 1 --listener PLAINTEXT://b1.example:9092 [--rack r1] [--run-for 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.client.admin import AdminClient
from api.client.bootstrap import bootstrap_addresses, connect_bootstrap
from api.client.connection import ClientError, known_error_code, parse_bootstrap
from api.protocol.codec import build, request_class
from replay.controller.errors import ErrorCode

HEARTBEAT_INTERVAL_S = 2.0
"""Kafka's `broker.heartbeat.interval.ms` default."""

REQUEST_TIMEOUT_MS = 4_000
"""How long a heartbeat or a registration waits for its answer before the controller is
looked for again: well within `broker.session.timeout.ms` (9 s), so a hung leader is left in
time for the next one to hear from the broker."""

RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0
"""The pause before looking for the controller again, doubling up to the maximum (an
election takes about the quorum's fetch timeout)."""

SHUTDOWN_WAIT_S = 60.0
"""How long a controlled shutdown waits for a controller to answer before giving up (exit 1)."""

EXIT_SHUT_DOWN = 0
EXIT_FAILED = 1
"""Its exit codes (argparse's 2 for a bad command line)."""

T = TypeVar("T")

_ACTIVE_ONLY = frozenset({62, 63})
"""BrokerRegistration and BrokerHeartbeat: only the active controller answers them (any node
answers DescribeCluster), so an answer to one names the controller."""

_REGISTER_AGAIN = frozenset({ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED})
"""Heartbeat refusals that mean the controller has no session for this registration: the
broker registers again (a new epoch), as docs/brokers.md says."""


class BrokerStopped(Exception):
    """The broker cannot go on; `str()` is the one line it prints."""


def refusal(answer: Any) -> str:
    """An answer's error as `NAME (code): message`."""
    code = int(answer.error_code)
    message = getattr(answer, "error_message", None)
    return f"{known_error_code(code).name} ({code})" + (f": {message}" if message else "")


class ControllerChannel:
    """The broker's link to the active controller (Kafka's NodeToControllerChannelManager).

    Connected through the bootstrap list (`connect_bootstrap`: the quorum's leader when its
    address is in the list). A request that meets a lost connection, a timeout or
    NOT_CONTROLLER is sent again, to the leader found anew, until it is answered.
    """

    def __init__(self, bootstrap: str, say: Callable[[str], None]) -> None:
        self.bootstrap = bootstrap
        self.single = len(bootstrap_addresses(bootstrap)) == 1
        self.say = say
        self.client: AdminClient | None = None
        self._not_controller = 0
        self._unreachable = False
        self._announced = False
        """Whether the current connection's first answer was announced."""

    async def send(self, api_key: int, **values: Any) -> Any:
        """Send a request to the active controller until one answers (not NOT_CONTROLLER)."""
        pause = RETRY_BACKOFF_S
        while True:
            client = await self._connected()
            if client is not None:
                try:
                    version = client.version(api_key)
                except ClientError as exc:
                    raise BrokerStopped(str(exc)) from None
                body = build(request_class(api_key, version), **values)
                try:
                    answer = await client.send_entity(body, timeout_ms=REQUEST_TIMEOUT_MS)
                except (ClientError, OSError) as exc:
                    await self._drop(f"lost the controller at {client.address}: {exc}")
                else:
                    if int(answer.error_code) != ErrorCode.NOT_CONTROLLER:
                        self._not_controller = 0
                        if api_key in _ACTIVE_ONLY and not self._announced:  # once a connection
                            self.say(f"controller channel to {client.address}")
                            self._announced = True
                        return answer
                    await self._drop(f"{client.address} is not the active controller")
                    self._not_controller += 1
                    if self._not_controller == 10:
                        hint = (
                            "give every controller's client address in --bootstrap-server"
                            if self.single
                            else "is the leader's client address in --bootstrap-server?"
                        )
                        self.say(f"no controller found yet; {hint}")
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_BACKOFF_MAX_S)

    async def _connected(self) -> AdminClient | None:
        if self.client is not None:
            return self.client
        try:
            self.client = await connect_bootstrap(
                self.bootstrap, client_id="example-broker", timeout_ms=REQUEST_TIMEOUT_MS
            )
        except (ClientError, OSError) as exc:
            if not self._unreachable:  # once per outage, not at every attempt
                self.say(f"no controller reachable ({exc}); trying again")
            self._unreachable = True
            return None
        self._unreachable = False
        return self.client

    async def _drop(self, why: str) -> None:
        client, self.client = self.client, None
        self._announced = False
        if client is not None:
            await client.close()
        if self._not_controller == 0:
            self.say(f"{why}; looking for the quorum's leader in {self.bootstrap}")

    async def close(self) -> None:
        """Close the connection (if any)."""
        client, self.client = self.client, None
        if client is not None:
            await client.close()


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
        self.channel = ControllerChannel(args.bootstrap_server, self.say)

    def say(self, text: str) -> None:
        """One line of the broker's story on stdout."""
        print(f"broker {self.args.broker_id}: {text}", flush=True)

    async def run(self) -> int:
        """Register, then heartbeat and follow until asked to stop; shut down cleanly.

        The follower runs beside the heartbeats in a task group: whichever fails, the other
        is cancelled and the failure is raised here (never left unretrieved).
        """
        try:
            async with asyncio.TaskGroup() as tasks:
                follower = tasks.create_task(self.follow())
                code = await self.lifecycle()
                follower.cancel()
            return code
        finally:
            await self.channel.close()

    async def lifecycle(self) -> int:
        """Register, heartbeat; after a stop, until the controller says shut down."""
        answer = await self.unless_stopped(
            self.channel.send(
                60,
                include_cluster_authorized_operations=False,
                endpoint_type=1,
                include_fenced_brokers=False,
            )
        )
        if answer is None:
            self.say("shut down before registering")
            return EXIT_SHUT_DOWN
        if int(answer.error_code) != 0:
            raise BrokerStopped(f"DescribeCluster refused: {refusal(answer)}")
        cluster_id = str(answer.cluster_id)
        if await self.unless_stopped(self.register(cluster_id)) is None:
            # Registered or not, it heartbeats no more: an unanswered registration's
            # session expires, fenced as it started.
            self.say("shut down before its registration was answered")
            return EXIT_SHUT_DOWN
        try:
            await self.heartbeats(cluster_id)
        except TimeoutError:
            raise BrokerStopped(
                f"shut down without a controlled shutdown: no controller answered within "
                f"{SHUTDOWN_WAIT_S:.0f} s"
            ) from None
        return EXIT_SHUT_DOWN

    async def unless_stopped(self, step: Awaitable[T]) -> T | None:
        """`step`'s result, or None if a stop comes first (a controller may be long to find)."""
        task = asyncio.ensure_future(step)
        stopped = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, stopped):
                if not pending.done():
                    pending.cancel()
            # Both awaited: nothing is left running, no outcome unretrieved.
            await asyncio.gather(task, stopped, return_exceptions=True)
        return None if task.cancelled() else task.result()

    async def register(self, cluster_id: str) -> bool:
        """BrokerRegistration: fenced, with a new epoch (the offset of the registration)."""
        scheme, _, address = self.args.listener.partition("://")
        host, port = parse_bootstrap(address)
        answer = await self.channel.send(
            62,
            broker_id=self.args.broker_id,
            cluster_id=cluster_id,
            incarnation_id=self.incarnation,
            listeners=[{"name": scheme, "host": host, "port": port, "security_protocol": 0}],
            features=[
                {"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 2}
            ],
            rack=self.args.rack,
        )
        if int(answer.error_code) != 0:
            raise BrokerStopped(f"registration refused: {refusal(answer)}")
        again = self.epoch >= 0
        self.epoch = int(answer.broker_epoch)
        self.fenced = True
        self.say(f"registered{' again' if again else ''}, epoch {self.epoch}")
        return True

    async def follow(self) -> None:
        """Apply every committed record from the start (a real broker keeps its own image).

        Any node serves FetchLog; a lost connection is connected again and the reading goes
        on after the last record applied.
        """
        pause = RETRY_BACKOFF_S
        while True:
            try:
                reader = await connect_bootstrap(
                    self.args.bootstrap_server,
                    client_id="example-broker-metadata",
                    timeout_ms=REQUEST_TIMEOUT_MS,
                )
            except (ClientError, OSError):
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_BACKOFF_MAX_S)
                continue
            pause = RETRY_BACKOFF_S
            try:
                wait_ms = int(HEARTBEAT_INTERVAL_S * 1000)
                async for entry in reader.follow(self.applied + 1, max_wait_ms=wait_ms):
                    self.applied = max(self.applied, entry.offset)
            except (ClientError, OSError):
                pass  # the node went away: read on from another
            finally:
                await reader.close()
            await asyncio.sleep(pause)

    async def heartbeats(self, cluster_id: str) -> None:
        """Heartbeat every interval; after a stop, until the controller says shut down."""
        shutdown_deadline: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            stopping = self.stopping.is_set()
            if stopping and shutdown_deadline is None:
                self.say(f"controlled shutdown requested at metadata offset {self.applied}")
                shutdown_deadline = loop.time() + SHUTDOWN_WAIT_S
            send = self.channel.send(
                63,
                broker_id=self.args.broker_id,
                broker_epoch=self.epoch,
                current_metadata_offset=self.applied,
                want_fence=False,
                want_shut_down=stopping,
            )
            answer: Any
            if shutdown_deadline is None:
                # A stop while the controller is being looked for turns this heartbeat into
                # the shutdown request at once.
                answer = await self.unless_stopped(send)
                if answer is None:
                    continue
            else:
                async with asyncio.timeout_at(shutdown_deadline):
                    answer = await send
            code = int(answer.error_code)
            if code in _REGISTER_AGAIN:
                if stopping:
                    self.say("shut down (the controller holds no registration of it any more)")
                    return
                self.say(f"the controller does not know epoch {self.epoch} ({refusal(answer)})")
                await self.register(cluster_id)
                continue
            if code != 0:
                raise BrokerStopped(f"heartbeat refused: {refusal(answer)}")
            if stopping:
                if answer.should_shut_down:
                    self.say("controlled shutdown completed; shut down")
                    return
            elif answer.is_fenced != self.fenced:
                self.fenced = bool(answer.is_fenced)
                state = "fenced by the controller" if self.fenced else "unfenced"
                self.say(f"{state} at metadata offset {self.applied}")
            pause = 0.5 if stopping else HEARTBEAT_INTERVAL_S
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self.stopping.wait()


async def main_async(args: argparse.Namespace) -> int:
    """Run one broker until a signal or --run-for asks it to stop; its exit code."""
    broker = ExampleBroker(args)
    loop = asyncio.get_running_loop()
    running = asyncio.current_task()
    assert running is not None
    signals: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        signals.append(sig.name)
        if len(signals) == 1:
            broker.stopping.set()
        else:
            running.cancel()  # a second signal: stop at once

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    if args.run_for is not None:
        loop.call_later(args.run_for, broker.stopping.set)
    code = EXIT_FAILED
    try:
        try:
            code = await broker.run()
        except* BrokerStopped as group:
            for exc in group.exceptions:
                print(f"broker {args.broker_id}: {exc}", file=sys.stderr, flush=True)
    except asyncio.CancelledError:
        broker.say(f"shut down without a controlled shutdown (a second {signals[-1]})")
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked: a bad value is one line and exit 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        help="HOST:PORT[,HOST:PORT...] of the controllers' client listeners (give them all)",
    )
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--listener", default="PLAINTEXT://127.0.0.1:19092")
    parser.add_argument("--rack", default=None)
    parser.add_argument("--run-for", type=float, default=None, help="seconds, then shut down")
    args = parser.parse_args(argv)
    try:
        args.bootstrap_server = ",".join(bootstrap_addresses(args.bootstrap_server))
    except ClientError as exc:
        parser.error(str(exc))
    if not 0 <= args.broker_id <= 2**31 - 1:
        parser.error(f"--broker-id {args.broker_id} is not 0..2147483647")
    scheme, sep, address = args.listener.partition("://")
    try:
        parse_bootstrap(address)
    except ClientError:
        sep = ""
    if not sep or not scheme.isidentifier():
        parser.error(f"--listener {args.listener!r} is not NAME://HOST:PORT")
    if args.run_for is not None and not args.run_for > 0:
        parser.error(f"--run-for {args.run_for} is not a positive number of seconds")
    return args


def main() -> None:
    """The command line."""
    sys.exit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
