"""etcd beside the quorum: a three-member etcd cluster on loopback and a put load over HTTP.

`bench/quorum_bench.py --etcd` runs replicated writes of the same shape against both: here,
one put of a new key per write through etcd's v3 JSON gateway (`POST /v3/kv/put`), answered
once committed (etcd's default: every member fsyncs its WAL); there, one CreateTopics of one
topic per write, answered at commit. Debian's `etcd-server` is installed with apt-get when
`etcd` is missing (the bench must then run as root). With several writes a request
(`--topics-per-request N`), a request here is one transaction of N puts (`POST /v3/kv/txn`),
there one CreateTopics of N topics. The HTTP client is a few lines of
asyncio over keep-alive connections (no HTTP or gRPC dependency): the load costs the shared
cores about what the Kafka load's hand-made frames cost.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.quorum_processes import free_ports


def ensure_etcd() -> str:
    """The path of `etcd`, installing Debian's `etcd-server` first when it is missing."""
    found = shutil.which("etcd")
    if found is not None:
        return found
    print("etcd is missing: apt-get install -y etcd-server", flush=True)
    subprocess.run(["apt-get", "install", "-y", "etcd-server"], check=True, capture_output=True)
    found = shutil.which("etcd")
    if found is None:
        raise SystemExit("apt-get installed etcd-server but no `etcd` is on the PATH")
    return found


@dataclass(slots=True)
class EtcdCluster:
    """Three etcd members on 127.0.0.1, each its own process and data directory."""

    root: Path
    size: int = 3
    client_ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        """Start every member and wait until the cluster has a leader."""
        etcd = ensure_etcd()
        ports = free_ports(2 * self.size)
        self.client_ports = ports[: self.size]
        peers = ports[self.size :]
        cluster = ",".join(f"e{i}=http://127.0.0.1:{peers[i]}" for i in range(self.size))
        for i in range(self.size):
            directory = self.root / f"etcd{i}"
            directory.mkdir(parents=True, exist_ok=True)
            with (directory / "stderr.txt").open("a") as err:
                self.processes.append(
                    subprocess.Popen(
                        [
                            etcd,
                            f"--name=e{i}",
                            f"--data-dir={directory / 'data'}",
                            f"--listen-client-urls=http://127.0.0.1:{self.client_ports[i]}",
                            f"--advertise-client-urls=http://127.0.0.1:{self.client_ports[i]}",
                            f"--listen-peer-urls=http://127.0.0.1:{peers[i]}",
                            f"--initial-advertise-peer-urls=http://127.0.0.1:{peers[i]}",
                            f"--initial-cluster={cluster}",
                            "--initial-cluster-state=new",
                            "--initial-cluster-token=mlog-bench",
                            "--log-level=error",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                    )
                )
        self.leader_port(timeout=60)

    def leader_port(self, timeout: float = 30) -> int:
        """The client port of the member that leads (asked of each member's status)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for port in self.client_ports:
                try:
                    status = _post(port, "/v3/maintenance/status", {})
                except OSError:
                    continue
                header = status.get("header")
                member = header.get("member_id") if isinstance(header, dict) else None
                leader = status.get("leader")
                if leader and leader == member:
                    return port
            time.sleep(0.1)
        raise SystemExit("the etcd cluster elected no leader in time")

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL)."""
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
        self.processes = []


def _post(port: int, path: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        result: dict[str, object] = json.loads(answer.read())
        return result


class HttpWire:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the answer (one in flight)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int):
        self.reader, self.writer = reader, writer
        self.host = f"127.0.0.1:{port}"

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """The status code and body of the answer."""
        self.writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        chunks: list[bytes] = []
        while True:  # chunked
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return status, b"".join(chunks)
            chunks.append(chunk[:-2])


async def put_loop(
    port: int,
    index: int,
    deadline: float,
    latencies_ms: list[float],
    errors: list[str],
    *,
    keys: int = 1,
) -> int:
    """One writer's requests until `deadline`; how many were acknowledged.

    A request is a put of a new key, or with `keys` above 1 a transaction of that many puts.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wire = HttpWire(reader, writer, port)
    value = base64.b64encode(b"x" * 64).decode()
    path = "/v3/kv/put" if keys == 1 else "/v3/kv/txn"
    done = 0
    try:
        i = 0
        while time.perf_counter() < deadline:
            if keys == 1:
                key = base64.b64encode(f"load-{index}-{i}".encode()).decode()
                body = json.dumps({"key": key, "value": value}).encode()
            else:
                puts = [
                    {
                        "requestPut": {
                            "key": base64.b64encode(f"load-{index}-{i}-{k}".encode()).decode(),
                            "value": value,
                        }
                    }
                    for k in range(keys)
                ]
                body = json.dumps({"success": puts}).encode()
            i += 1
            start = time.perf_counter()
            status, answer = await wire.post(path, body)
            latencies_ms.append((time.perf_counter() - start) * 1000)
            if status != 200:
                errors.append(f"put: HTTP {status} {answer[:80]!r}")
                continue
            done += 1
    finally:
        writer.close()
    return done
