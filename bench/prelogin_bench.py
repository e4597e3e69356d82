"""What anonymous sockets cost `mlog serve` before authentication: logins, and TLS memory.

Usage: python bench/prelogin_bench.py [--rounds 3] [--logins 20] [--held 70,1000]
                                      [--connections 2000] [--tree PATH] [--dir PATH]

Server processes (`mlog serve`, the real CLI, default limits), new ones each round, on a fresh data
directory with one SCRAM user (4096 iterations), listening on 127.0.0.1:

- logins: a SASL_PLAINTEXT listener. `--logins` SCRAM-SHA-256 logins one after the other from
  127.0.0.2, each timed from the connect to the server-final message checked, to a server
  while 127.0.0.1 holds N sockets that each sent an
  unfinished 512 KiB frame (a size claiming 524,284 bytes and all of them but 100) and nothing
  more, for each N of `--held`, and in turns the same login to a second server left idle (the
  baseline: the host's load falls on both alike); a login from 127.0.0.1 itself is timed too.
  Medians; the ratio attacked / idle has a target of 2 or less. A login that gets no answer
  within `LOGIN_WAIT` s counts as that long (and ends that figure's logins).
- TLS memory: an SSL listener (a `trustme` certificate). Resident memory of the server
  (/proc's VmRSS) after 10 warm-up TLS connections (the start), with `--connections` idle TLS
  connections (handshakes done, from 127.0.0.2..127.0.0.9, 32 at a time), and 5 s after
  they close. Targets: growth <= 100 MB, and within 20% of the start after the close.

Figures are medians over `--rounds` with their range. `--tree` runs another checkout's server
(say the code before a change, for its figures), with this checkout's clients.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from subprocess import Popen

from against import THIS

sys.path.insert(0, str(THIS))

from auth_bench import MECHANISM, PASSWORD, USER, _add_user, _certificates, _serve, _stop
from fairness_bench import rss_bytes
from server_bench import _prepare

from api.protocol import codec
from api.security.scram import ScramClient

FRAME = 524288 - 4
"""A frame's size as claimed: the largest `sasl.server.max.receive.size` takes (with its size)."""

UNSENT = 100
"""Bytes of each held frame never sent: the frame stays unfinished."""

LOGIN_WAIT = 10.0
"""Seconds a login may take in the bench before it counts as timed out (and as that long)."""

SETTLE = 5.0
"""Seconds given to the server to read what the held sockets sent, and to release closes."""

SOURCES = [f"127.0.0.{n}" for n in range(2, 10)]
"""Client addresses the idle TLS connections come from (fewer than 32 handshakes each)."""


# ---------------------------------------------------------------------------------- logins


def _ask(
    sock: socket.socket, correlation: int, api_key: int, version: int, **values: object
) -> object:
    body = codec.build(codec.request_class(api_key, version), **values)
    sock.sendall(codec.encode_request(body, correlation_id=correlation))
    (size,) = struct.unpack(">i", _exactly(sock, 4))
    got, answer = codec.decode_response(api_key, version, _exactly(sock, size))
    if got != correlation:
        raise SystemExit(f"answer {got} to request {correlation}")
    return answer


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return bytes(data)


def _login(port: int, source: str) -> float:
    """Seconds one SCRAM-SHA-256 login from `source` takes (`LOGIN_WAIT` if it gets no answer)."""
    start = time.perf_counter()
    try:
        with socket.create_connection(
            ("127.0.0.1", port), timeout=LOGIN_WAIT, source_address=(source, 0)
        ) as sock:
            handshake = _ask(sock, 1, 17, 1, mechanism=MECHANISM.mechanism_name)
            if getattr(handshake, "error_code") != 0:  # noqa: B009 - a decoded answer
                raise SystemExit("SaslHandshake refused")
            client = ScramClient(USER, PASSWORD, MECHANISM)
            first = _ask(sock, 2, 36, 2, auth_bytes=client.first())
            final = _ask(sock, 3, 36, 2, auth_bytes=client.final(bytes(first.auth_bytes)))  # type: ignore[attr-defined]
            if final.error_code != 0:  # type: ignore[attr-defined]
                raise SystemExit(f"login refused: {final.error_message}")  # type: ignore[attr-defined]
            client.verify(bytes(final.auth_bytes))  # type: ignore[attr-defined]
    except (TimeoutError, ConnectionError):
        return LOGIN_WAIT
    return time.perf_counter() - start


def _paired_logins(held_port: int, idle_port: int, source: str, count: int) -> tuple[float, float]:
    """Medians of `count` logins to each server, taking turns (the host's load falls on both).

    A login to the attacked server that times out counts as `LOGIN_WAIT` and ends the figure.
    """
    held: list[float] = []
    idle: list[float] = []
    for _ in range(count):
        idle.append(_login(idle_port, source))
        seconds = _login(held_port, source)
        held.append(seconds)
        if seconds >= LOGIN_WAIT:
            break
    return statistics.median(held), statistics.median(idle)


def _hold(port: int, count: int) -> list[socket.socket]:
    """`count` sockets from 127.0.0.1, each with an unfinished frame sent as far as it goes."""
    frame = struct.pack(">i", FRAME) + bytes(FRAME - UNSENT)
    held: list[tuple[socket.socket, memoryview]] = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.1", 0))
        sock.setblocking(False)
        held.append((sock, memoryview(frame)))
    # Send round-robin until nothing more goes (the server stopped reading, or read it all).
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 1.0:
        moved = False
        for index, (sock, rest) in enumerate(held):
            if not rest:
                continue
            try:
                sent = sock.send(rest)
            except BlockingIOError:
                continue
            except OSError:
                held[index] = (sock, rest[:0])  # closed by the server
                continue
            held[index] = (sock, rest[sent:])
            moved = True
        if moved:
            quiet_since = time.monotonic()
        else:
            time.sleep(0.05)
    return [sock for sock, _ in held]


def _closed_by_server(sockets: list[socket.socket]) -> int:
    closed = 0
    for sock in sockets:
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def _login_server(args: argparse.Namespace, scratch: Path, name: str) -> tuple[Popen[bytes], int]:
    data_dir = scratch / name
    _prepare(data_dir)
    _add_user(data_dir)
    config = scratch / "logins.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=SCRAM-SHA-256\n"
    )
    process, ports = _serve(
        data_dir, scratch / f"{name}.log", "--config", str(config), tree=args.tree
    )
    return process, ports["SASL_PLAINTEXT"]


def logins_round(args: argparse.Namespace, scratch: Path, round_: int) -> dict[str, float]:
    """Two servers, one left idle: logins to both in turns, with each count of held frames."""
    attacked, port = _login_server(args, scratch, f"attacked-{round_}")
    try:
        idle, idle_port = _login_server(args, scratch, f"idle-{round_}")
    except BaseException:
        _stop(attacked)
        raise
    figures: dict[str, float] = {}
    try:
        for _ in range(5):  # warm-up
            _login(port, "127.0.0.2")
            _login(idle_port, "127.0.0.2")
        for count in args.held:
            held = _hold(port, count)
            try:
                time.sleep(0.5)
                figures[f"held {count}"], figures[f"idle {count}"] = _paired_logins(
                    port, idle_port, "127.0.0.2", args.logins
                )
                figures[f"held {count}, same address"], _ = _paired_logins(
                    port, idle_port, "127.0.0.1", max(1, args.logins // 4)
                )
                figures[f"held {count} closed"] = _closed_by_server(held)
            finally:
                for sock in held:
                    sock.close()
            time.sleep(1.0)
    finally:
        _stop(attacked)
        _stop(idle)
    return figures


# ---------------------------------------------------------------------------------- TLS memory


async def _tls_connections(
    port: int, context: ssl.SSLContext, count: int
) -> list[asyncio.StreamWriter]:
    """`count` TLS connections with their handshakes done, 32 at a time, spread over SOURCES."""
    gate = asyncio.Semaphore(32)
    writers: list[asyncio.StreamWriter] = []

    async def one(index: int) -> None:
        async with gate:
            _, writer = await asyncio.open_connection(
                "127.0.0.1",
                port,
                ssl=context,
                server_hostname="127.0.0.1",
                local_addr=(SOURCES[index % len(SOURCES)], 0),
            )
            writers.append(writer)

    await asyncio.gather(*(one(index) for index in range(count)))
    return writers


async def _close(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


def tls_round(
    args: argparse.Namespace, scratch: Path, round_: int, keystore: Path, ca: Path
) -> dict[str, float]:
    """One server: RSS at the start, with the idle TLS connections, and after they close (MB)."""
    data_dir = scratch / f"tls-{round_}"
    _prepare(data_dir)
    config = scratch / "tls.properties"
    config.write_text(
        f"listeners=SSL://127.0.0.1:0\nssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
    )
    process, ports = _serve(
        data_dir, scratch / f"tls-{round_}.log", "--config", str(config), tree=args.tree
    )
    context = ssl.create_default_context(cafile=str(ca))

    async def measure() -> dict[str, float]:
        await _close(await _tls_connections(ports["SSL"], context, 10))
        await asyncio.sleep(1.0)
        start = rss_bytes(process.pid)
        writers = await _tls_connections(ports["SSL"], context, args.connections)
        await asyncio.sleep(2.0)
        held = rss_bytes(process.pid)
        await _close(writers)
        await asyncio.sleep(SETTLE)
        after = rss_bytes(process.pid)
        return {"start": start / 1e6, "held": held / 1e6, "after": after / 1e6}

    try:
        return asyncio.run(measure())
    finally:
        _stop(process)


# ---------------------------------------------------------------------------------- report


def _spread(values: list[float], digits: int = 1) -> str:
    median = statistics.median(values)
    return f"{median:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logins", type=int, default=20, help="logins timed per figure")
    parser.add_argument(
        "--held", default="70,1000", help="counts of held unfinished frames, comma-separated"
    )
    parser.add_argument("--connections", type=int, default=2000, help="idle TLS connections")
    parser.add_argument("--tree", type=Path, default=THIS, help="checkout whose server runs")
    parser.add_argument("--skip", choices=("logins", "tls"), default=None)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args()
    args.held = [int(part) for part in args.held.split(",") if part]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max([*args.held, args.connections]) + 256
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted * 2), hard))
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="prelogin-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    ca, keystore = _certificates(scratch)
    print(f"server code: {args.tree}; {args.rounds} rounds; scratch {scratch}")
    if args.skip != "logins":
        rounds = [logins_round(args, scratch, r) for r in range(args.rounds)]
        print(
            f"\nSCRAM login from 127.0.0.2, median of {args.logins} (ms; median of rounds, range)"
        )
        for count in args.held:
            idle = [r[f"idle {count}"] * 1000 for r in rounds]
            print(f"  idle server                        {_spread(idle)}")
            held = [r[f"held {count}"] * 1000 for r in rounds]
            same = [r[f"held {count}, same address"] * 1000 for r in rounds]
            ratios = [h / i for h, i in zip(held, idle, strict=True)]
            closed = [r[f"held {count} closed"] for r in rounds]
            print(
                f"  {count:>5} frames held by 127.0.0.1     {_spread(held)}  "
                f"ratio {_spread(ratios, 2)}  (from 127.0.0.1: {_spread(same)}; "
                f"held sockets closed by the server: {_spread(closed, 0)})"
            )
    if args.skip != "tls":
        rounds = [tls_round(args, scratch, r, keystore, ca) for r in range(args.rounds)]
        start = [r["start"] for r in rounds]
        held = [r["held"] for r in rounds]
        after = [r["after"] for r in rounds]
        growth = [h - s for h, s in zip(held, start, strict=True)]
        back = [100 * (a - s) / s for a, s in zip(after, start, strict=True)]
        print(f"\nserver RSS with {args.connections} idle TLS connections (MB; median, range)")
        print(f"  start                              {_spread(start)}")
        print(f"  with the connections               {_spread(held)}  growth {_spread(growth)}")
        print(
            f"  {SETTLE:g} s after they close           {_spread(after)}  "
            f"vs start {_spread(back)} %"
        )


if __name__ == "__main__":
    main()
