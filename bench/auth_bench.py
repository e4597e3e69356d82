"""Authentication costs of `mlog serve`: SCRAM logins, and admin writes over SASL_SSL.

Usage: python bench/auth_bench.py [--connections 20] [--seconds 20] [--logins 200]
                                  [--authorizer] [--flood 16] [--dir PATH]
       python bench/auth_bench.py --against TREE [--rounds 2] [same options]

Two server processes (`mlog serve`, the real CLI), one after the other, each on a fresh data
directory with 3 registered brokers:

- the baseline: one PLAINTEXT listener, no authorizer;
- the secured one (`--config`): a SASL_SSL and a SASL_PLAINTEXT listener with SCRAM-SHA-256,
  a user whose credential has 4096 iterations appended before it starts, and with
  `--authorizer` Kafka's StandardAuthorizer on (`authorizer.class.name`) with that user in
  `super.users`.

Measured:

- login: `--logins` connections one after the other to each SASL listener, each timed from
  the connect to the server-final message checked: TCP (and TLS) handshake, SaslHandshake v1,
  two SaslAuthenticate v2, the client's PBKDF2 included. Median and p99; the target is a
  SCRAM-SHA-256 login at 4096 iterations in 15 ms or less.
- admin writes/s: bench/server_bench.py's loop (CreateTopics, Metadata, DeleteTopics; one
  request in flight per connection) on `--connections` connections for `--seconds`, on the
  baseline's PLAINTEXT listener, then on the secured server's SASL_SSL listener with every
  connection logged in first. The ratio secured / baseline has a target of 0.8 or more.
- with `--flood N`: the same SASL_PLAINTEXT logins while N anonymous guessers from another
  address (127.0.0.2) send PLAIN logins of unknown users, each a derivation on the server
  (tests/api/server/test_attack_logins.py checks they run on a bounded pool of their own);
  the baseline is the calm logins above, the ratio flooded / calm (the admin's login had
  waited 4.2 s behind such a flood).

Certificates are made by `trustme` (the test extras) in the scratch directory.

`--against TREE` measures the secured server of another checkout beside this one's
(bench/against.py): the server processes run each checkout's code (the load and the logins are
this checkout's client code), on a fresh data directory each, taking turns for `--rounds`; the
table gives both login medians and the SASL_SSL admin writes/s with their paired ratios. The
PLAINTEXT baseline is not run.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from against import THIS, Figure, code_env, paired, print_table

sys.path.insert(0, str(THIS))

from server_bench import Stats, Wire, _check_encoders, _connection_loop, _prepare

from api.protocol import codec
from api.security.scram import ScramClient
from api.service.service import MetadataService
from records.model import ScramMechanism, UserScramCredentialRecord
from replay.controller.authorizer import STANDARD_AUTHORIZER
from replay.controller.commands import ControllerResult
from replay.security.scram_keys import new_credential

USER, PASSWORD = "bench", "bench-password"
MECHANISM = ScramMechanism.SCRAM_SHA_256

_LISTENER = re.compile(r"(\S+):(\d+) \((\w+)(?: as (\w+))?")


def _certificates(folder: Path) -> tuple[Path, Path]:
    """(CA file, server key + chain file) made by trustme."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    return folder / "ca.pem", folder / "server.pem"


def _add_user(data_dir: Path) -> None:
    credential = new_credential(MECHANISM, PASSWORD)
    record = UserScramCredentialRecord(
        name=USER,
        mechanism=MECHANISM,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )
    with MetadataService.open(data_dir / "log") as service:
        service.execute(lambda image: ControllerResult(records=(record,), response=None))


def _serve(
    data_dir: Path, log_path: Path, *options: str, tree: Path = THIS
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """`mlog serve` of `tree` with `options`; the process and each listener's port, once up."""
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(data_dir), *options],
            stderr=log_file,
            cwd=tree,  # `-m` looks in the working directory first
            env=code_env(tree),
        )
    for _ in range(600):
        text = log_path.read_text()
        if "serving on " in text:
            line = text.split("serving on ", 1)[1].split("; node", 1)[0]
            ports = {(match[4] or match[3]): int(match[2]) for match in _LISTENER.finditer(line)}
            return process, ports
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the server did not start: {log_path.read_text()[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    if process.wait(60) != 0:
        raise SystemExit(f"the server exited {process.returncode}")


async def _login(port: int, context: ssl.SSLContext | None) -> Wire:
    """A connection logged in as the bench user with SCRAM-SHA-256."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1" if context else None
    )
    wire = Wire(reader, writer)
    handshake = await wire.call(17, 1, _handshake, MECHANISM.mechanism_name)
    if int(handshake.error_code) != 0:
        raise SystemExit(f"SaslHandshake refused: {int(handshake.error_code)}")
    client = ScramClient(USER, PASSWORD, MECHANISM)
    first = await wire.call(36, 2, _authenticate, client.first())
    final = await wire.call(36, 2, _authenticate, client.final(first.auth_bytes))
    if int(final.error_code) != 0:
        raise SystemExit(f"login refused: {final.error_message}")
    client.verify(final.auth_bytes)
    return wire


def _handshake(correlation: int, mechanism: str) -> bytes:
    body = codec.build(codec.request_class(17, 1), mechanism=mechanism)
    return codec.encode_request(body, correlation_id=correlation)[4:]


def _authenticate(correlation: int, token: bytes) -> bytes:
    body = codec.build(codec.request_class(36, 2), auth_bytes=token)
    return codec.encode_request(body, correlation_id=correlation)[4:]


async def _logins(port: int, context: ssl.SSLContext | None, count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        wire = await _login(port, context)
        times.append((time.perf_counter() - start) * 1000)
        wire.writer.close()
    return times


async def _writes(
    port: int, context: ssl.SSLContext | None, connections: int, seconds: float, login: bool
) -> float:
    stats = Stats()
    wires = []
    for _ in range(connections):
        if login:
            wires.append(await _login(port, context))
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            wires.append(Wire(reader, writer))
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    await asyncio.gather(
        *(_connection_loop(wire, index, deadline, stats) for index, wire in enumerate(wires))
    )
    elapsed = time.perf_counter() - start
    for wire in wires:
        wire.writer.close()
    if stats.errors:
        raise SystemExit(f"{len(stats.errors)} requests failed, e.g. {stats.errors[:3]}")
    return stats.writes / elapsed


GUESSER = "127.0.0.2"
"""The flood's source address: the server bounds derivations per address."""


async def _guess(port: int, stop: asyncio.Event, guesses: list[int]) -> None:
    """PLAIN logins of unknown users from GUESSER until `stop` (each refused)."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(GUESSER, 0)
            )
        except OSError:
            await asyncio.sleep(0.01)
            continue
        wire = Wire(reader, writer)
        try:
            await wire.call(17, 1, _handshake, "PLAIN")
            token = f"\0guess{guesses[0]}\0wrong".encode()
            await wire.call(36, 2, _authenticate, token)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the server closes a connection whose login failed
        finally:
            guesses[0] += 1
            writer.close()


async def _flooded_logins(port: int, guessers: int, count: int) -> tuple[list[float], int]:
    """SCRAM logins (ms) at `port` beside `guessers` PLAIN guess loops; and the guesses sent."""
    stop = asyncio.Event()
    guesses = [0]
    tasks = [asyncio.create_task(_guess(port, stop, guesses)) for _ in range(guessers)]
    await asyncio.sleep(0.5)  # the flood is under way
    try:
        times = await _logins(port, None, count)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    return times, guesses[0]


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def _secured(
    args: argparse.Namespace,
    scratch: Path,
    keystore: Path,
    context: ssl.SSLContext,
    *,
    tree: Path,
    name: str = "secured",
) -> tuple[list[float], list[float], float]:
    """The secured server of `tree`: SASL_SSL and SASL_PLAINTEXT logins (ms), writes/s."""
    secured_dir = scratch / name
    _prepare(secured_dir)
    _add_user(secured_dir)
    config = scratch / "server.properties"
    lines = [
        "listeners=SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-256" + (",PLAIN" if args.flood else ""),
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
    ]
    if args.authorizer:
        lines += [f"authorizer.class.name={STANDARD_AUTHORIZER}", f"super.users=User:{USER}"]
    config.write_text("\n".join(lines) + "\n")
    process, ports = _serve(
        secured_dir, scratch / f"{name}.log", "--config", str(config), tree=tree
    )
    try:
        tls_logins = asyncio.run(_logins(ports["SASL_SSL"], context, args.logins))
        plain_logins = asyncio.run(_logins(ports["SASL_PLAINTEXT"], None, args.logins))
        secured = asyncio.run(
            _writes(ports["SASL_SSL"], context, args.connections, args.seconds, login=True)
        )
        if args.flood and tree == THIS:
            flooded, guesses = asyncio.run(
                _flooded_logins(ports["SASL_PLAINTEXT"], args.flood, args.logins)
            )
            calm = statistics.median(plain_logins)
            title = f"SCRAM login beside {args.flood} PLAIN guessers (ms)"
            print(
                f"{title:<40}{'median':>10}{'p99':>10}{'worst':>10}{'calm median':>13}{'ratio':>8}"
            )
            print(
                f"{f'{guesses} guesses meanwhile':<40}{statistics.median(flooded):>10.2f}"
                f"{_p99(flooded):>10.2f}{max(flooded):>10.2f}{calm:>13.2f}"
                f"{statistics.median(flooded) / calm:>8.2f}\n"
            )
    finally:
        _stop(process)
    return tls_logins, plain_logins, secured


def against(
    args: argparse.Namespace, scratch: Path, keystore: Path, context: ssl.SSLContext
) -> None:
    """The secured server of this checkout and of `--against`, taking turns."""
    other = args.against.resolve()
    rows: dict[str, list[tuple[float, float]]] = {"tls": [], "plain": [], "writes": []}
    for round_ in range(args.rounds):

        def measure(tree: Path, round_: int = round_) -> tuple[list[float], list[float], float]:
            name = f"secured-{round_}-{'this' if tree == THIS else 'other'}"
            return _secured(args, scratch, keystore, context, tree=tree, name=name)

        ours, theirs = paired(round_, other, measure)
        rows["tls"].append((statistics.median(ours[0]), statistics.median(theirs[0])))
        rows["plain"].append((statistics.median(ours[1]), statistics.median(theirs[1])))
        rows["writes"].append((ours[2], theirs[2]))
    authorizer = " + StandardAuthorizer" if args.authorizer else ""
    print(
        f"{args.logins} logins per listener, {args.connections} connections for "
        f"{args.seconds:g} s; scratch {scratch}"
    )
    print_table(
        [
            Figure(
                label="SCRAM login, SASL_PLAINTEXT (median)",
                pairs=rows["plain"],
                unit="ms",
                lower_is_better=True,
            ),
            Figure(
                label="SCRAM login, SASL_SSL (median)",
                pairs=rows["tls"],
                unit="ms",
                lower_is_better=True,
            ),
            Figure(label=f"admin writes, SASL_SSL{authorizer}", pairs=rows["writes"], unit="/s"),
        ],
        other=other,
    )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--logins", type=int, default=200)
    parser.add_argument("--authorizer", action="store_true", help="StandardAuthorizer on")
    parser.add_argument(
        "--flood", type=int, default=0, metavar="N", help="also time logins beside N guessers"
    )
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to compare with (baseline)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="paired rounds with --against")
    args = parser.parse_args()
    if args.flood < 0:
        parser.error("--flood must be 0 or more")
    _check_encoders()
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="auth-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    ca, keystore = _certificates(scratch)
    client_context = ssl.create_default_context(cafile=str(ca))
    if args.against is not None:
        against(args, scratch, keystore, client_context)
        return

    plain_dir = scratch / "plain"
    _prepare(plain_dir)
    process, ports = _serve(plain_dir, scratch / "plain.log", "--listen", "127.0.0.1:0")
    try:
        baseline = asyncio.run(
            _writes(ports["PLAINTEXT"], None, args.connections, args.seconds, login=False)
        )
    finally:
        _stop(process)

    tls_logins, plain_logins, secured = _secured(args, scratch, keystore, client_context, tree=THIS)
    authorizer = " + StandardAuthorizer" if args.authorizer else ""
    print(f"{'':<40}{'median':>10}{'p99':>10}  target")
    for name, times in (
        ("SCRAM-SHA-256 login, SASL_PLAINTEXT (ms)", plain_logins),
        ("SCRAM-SHA-256 login, SASL_SSL (ms)", tls_logins),
    ):
        print(f"{name:<40}{statistics.median(times):>10.2f}{_p99(times):>10.2f}  <= 15")
    print()
    print(f"{'admin writes/s':<40}{'value':>10}{'ratio':>10}  target")
    print(f"{'PLAINTEXT (baseline)':<40}{baseline:>10,.0f}{1:>10.2f}")
    print(f"{'SASL_SSL' + authorizer:<40}{secured:>10,.0f}{secured / baseline:>10.2f}  >= 0.8")
    print(f"\n({args.connections} connections, {args.seconds:.0f} s each; scratch {scratch})")


if __name__ == "__main__":
    main()
