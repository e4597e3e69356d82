"""The README's examples run as a reader runs them: the Python ones in order in one fresh
directory, the audit commands, and the quorum recipe pasted into bash."""

from __future__ import annotations

import asyncio
import os
import random
import re
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme

from api.client import AdminClient
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED
from replay.controller.commands import CreatableTopic
from tests.support.quorum_attacks import attack_frames, exchange, refusal_code, tls_context
from tests.support.quorum_processes import PORT_RANGE, reserve_port

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order."""
    return [match.group(1) for match in _BLOCK.finditer(markdown)]


def test_the_block_extractor_finds_fenced_python_only() -> None:
    text = "```sh\nls\n```\n```python\nx = 1\n```\ntext\n```python\ny = 2\nz = 3\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = 2\nz = 3\n"]


@pytest.mark.process
def test_readme_python_examples_run_in_order(tmp_path: Path) -> None:
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2, "the README's Python examples were not found"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outputs = []
    # Each block in its own interpreter, as pasted one after the other, all in one directory:
    # a later example must not trip over what an earlier one wrote.
    for number, code in enumerate(blocks, 1):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"README Python example {number} failed:\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        outputs.append(done.stdout.splitlines())
    api, raw_log = outputs[0], outputs[1]
    # The public API's example creates its topic (code 0), shows it, travels to the end of
    # the topic's batch (5), and names it in the diff and the history.
    assert api[0].startswith("0 "), api
    assert api[1].startswith("TopicImage(") and "name='orders'" in api[1], api
    assert api[2] == "5", api
    assert "orders" in api[3] and api[4].startswith("[2,"), api
    # The log example prints its two entries.
    assert len(raw_log) == 2 and raw_log[0].startswith("0 ")


def audit_commands(markdown: str) -> list[str]:
    """The commands of the README's Audit section's ```sh block, without their comments."""
    section = markdown.split("\n## Audit\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def mlog_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose `mlog` (in `tmp_path/bin`) runs this checkout, as bash finds it.

    The user's MLOG_DATA_DIR and MLOG_BOOTSTRAP_SERVER are left out: the README's lines name
    what they use.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mlog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m api.cli "$@"\n')
    shim.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path}
    env.pop("MLOG_DATA_DIR", None)
    env.pop("MLOG_BOOTSTRAP_SERVER", None)
    return env


@pytest.mark.process
@pytest.mark.spark
def test_readme_audit_examples_run(tmp_path: Path) -> None:
    """The Audit section's commands on a small ./mlog-data, in one shell session (one Spark
    start, not one per line): each one-shot query typed into `mlog audit shell`, as its README
    line invites, then the README's piped line's `printf` run verbatim by bash on the same pipe."""
    pytest.importorskip("pyspark")
    commands = audit_commands((ROOT / "README.md").read_text())
    assert "mlog audit shell" in commands, commands
    env = mlog_on_path(tmp_path)

    def run(command: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    for setup in (
        "mlog brokers register --id 1",
        "mlog topics create --topic orders --partitions 2 --replication-factor 1 "
        "--principal User:alice",
        "mlog configs alter --topic orders --set retention.ms=3600000 --principal User:alice",
    ):
        assert run(setup).returncode == 0, setup
    one_shot = [c.removeprefix("mlog audit ") for c in commands if c.startswith("mlog audit ")]
    queries = [q for q in one_shot if not q.startswith("shell")]
    assert len(queries) == 3, commands
    (piped_line,) = [c for c in commands if c.endswith("| mlog audit shell")]
    feed = piped_line.removesuffix("| mlog audit shell").strip()
    # One shell session, one Spark start: the one-shot queries typed first, then the README's
    # piped line verbatim on the same pipe.
    typed = " ".join(shlex.quote(q) for q in queries)
    piped = run(f"{{ printf '%s\\n' {typed}; {feed}; }} | mlog audit shell")
    assert piped.returncode == 0, piped.stderr
    assert "Traceback" not in piped.stderr, piped.stderr
    assert piped.stdout.count("User:alice") >= 2, piped.stdout  # who-changed and the GROUP BY
    assert "state at offset 4: the Spark replay matches the image" in piped.stdout
    answered = [line for line in piped.stderr.splitlines() if line.startswith("mlog: (")]
    fed = shlex.split(feed)[2:]  # printf '%s\n' QUERY...
    assert len(answered) == len(queries) + len(fed), piped.stderr
    assert "entries" in piped.stdout and "6" in piped.stdout.split("entries", 1)[1], piped.stdout


def verifiable_history_block(markdown: str) -> str:
    """The ```sh block of the README's "Verifiable history" section."""
    section = markdown.split("### Verifiable history", 1)[1].split("\n### ", 1)[0]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


@pytest.mark.process
def test_readme_verifiable_history_runs_as_written(tmp_path: Path) -> None:
    """The digest, verify and prove lines pasted into bash on a small ./mlog-data."""
    block = verifiable_history_block((ROOT / "README.md").read_text())
    env = mlog_on_path(tmp_path)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "mlog brokers register --id 1\n" + block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert ": MATCHES: the log up to offset 1 " in done.stdout, done.stdout
    assert '"type": "inclusion"' in done.stdout and '"type": "consistency"' in done.stdout


def quorum_recipe(markdown: str, block: int = 0) -> str:
    """A ```sh block of the README's "A quorum of three controllers" section.

    0: the recipe that starts the static quorum; 1: how it is made dynamic and grown.
    """
    section = markdown.split("### A quorum of three controllers", 1)[1].split("\n### ", 1)[0]
    return section.split("```sh\n")[block + 1].split("```", 1)[0]


def _free_prefix(taken: set[int]) -> int:
    """A 4-digit prefix P whose ports P1-P4 are free on 127.0.0.1 now and reserved for this test.

    Below the ephemeral range, where no outgoing connection takes them (`PORT_RANGE`).
    """

    low, high = PORT_RANGE
    while True:
        prefix = random.randint(low // 10, (high - 10) // 10)
        if prefix in taken or not all(reserve_port(prefix * 10 + i) for i in (1, 2, 3, 4)):
            continue
        sockets = []
        try:
            for i in (1, 2, 3, 4):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", prefix * 10 + i))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return prefix


@pytest.mark.process
def test_readme_quorum_recipe_runs_and_its_edge_holds(tmp_path: Path) -> None:
    """The quorum recipe, pasted into bash (its ports moved to free ones), gives a quorum whose
    client listeners refuse every Raft API and Envelope, whose controller listeners refuse a
    peer without the controllers' certificate, and which takes writes through every node."""

    recipe = quorum_recipe((ROOT / "README.md").read_text())
    assert "controller.listener.names=CONTROLLER" in recipe and "openssl" in recipe
    clients = _free_prefix(set())
    controllers = _free_prefix({clients})

    def moved(text: str) -> str:
        return text.replace("127.0.0.1:909", f"127.0.0.1:{clients}").replace(
            "127.0.0.1:919", f"127.0.0.1:{controllers}"
        )

    script = moved(recipe)
    env = mlog_on_path(tmp_path)
    (tmp_path / "recipe.sh").write_text(script + "\njobs -p > pids.txt\n")
    with (tmp_path / "out.txt").open("w") as out, (tmp_path / "err.txt").open("w") as err:
        done = subprocess.run(
            ["bash", "recipe.sh"],
            check=False,
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
            timeout=180,
        )
    pids = (
        [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
        if (tmp_path / "pids.txt").exists()
        else []
    )
    try:
        assert done.returncode == 0, (tmp_path / "err.txt").read_text()[-3000:]
        assert len(pids) == 3
        pids = list(pids)
        assert "created topic t" in (tmp_path / "out.txt").read_text()
        asyncio.run(_check_recipe_quorum(tmp_path, clients, controllers))
        # The README's next block: made dynamic in place, a fourth controller, one removed.
        growth = moved(quorum_recipe((ROOT / "README.md").read_text(), 1))
        (tmp_path / "grow.sh").write_text(growth + "\njobs -p > pids4.txt\n")
        # Output to files: node 4, left running in the background, holds them open.
        with (tmp_path / "grow.txt").open("w") as out, (tmp_path / "grow-err.txt").open("w") as err:
            grown = subprocess.run(
                ["bash", "grow.sh"],
                check=False,
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=err,
                timeout=600,  # a hang guard: the block retries add-controller until it is in
            )
        if (tmp_path / "pids4.txt").exists():
            pids += [int(p) for p in (tmp_path / "pids4.txt").read_text().split()]
        assert grown.returncode == 0, (tmp_path / "grow-err.txt").read_text()[-3000:]
        said = (tmp_path / "grow.txt").read_text()
        for line in (
            "kraft.version upgraded to level 1",
            "added controller 4",
            "removed controller 1",
        ):
            assert line in said, said
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for pid in pids:
            for _ in range(300):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)


async def _check_recipe_quorum(directory: Path, clients: int, controllers: int) -> None:

    ca = str(directory / "quorum-ca.pem")
    # A certificate of the controllers' CA under another name (CN=mallory), and one of
    # another CA under the controllers' own name.
    subprocess.run(
        "openssl req -newkey rsa:2048 -nodes -subj /CN=mallory -keyout m.key -out m.csr && "
        "openssl x509 -req -in m.csr -CA quorum-ca.pem -CAkey quorum-ca.key -CAcreateserial "
        "-days 1 -out m.crt && cat m.key m.crt > mallory.pem",
        shell=True,
        cwd=directory,
        check=True,
        capture_output=True,
    )
    other = trustme.CA().issue_cert("127.0.0.1", common_name="controller")
    other.private_key_and_cert_chain_pem.write_to_path(str(directory / "other.pem"))
    outsiders = {
        "no certificate": tls_context(ca),
        "another CA": tls_context(ca, str(directory / "other.pem")),
        "another name": tls_context(ca, str(directory / "mallory.pem")),
    }
    for node_id in (1, 2, 3):
        frames = attack_frames(
            cluster_id=_cluster_id(directory, node_id), destination=node_id, sender=1 + node_id % 3
        )
        for name, frame in frames.items():
            (answer,) = await exchange(clients * 10 + node_id, [frame])
            assert answer is None, f"node {node_id}'s client listener answered {name}"
            for who, context in outsiders.items():
                try:
                    (answer,) = await exchange(controllers * 10 + node_id, [frame], context=context)
                except (ssl.SSLError, ConnectionError):
                    continue  # the handshake was refused
                if answer is not None:
                    code = refusal_code(name, answer)
                    assert code == CLUSTER_AUTHORIZATION_FAILED, (node_id, name, who, code)
    for node_id in (1, 2, 3):
        client = await AdminClient.connect_controller(
            f"127.0.0.1:{clients * 10 + node_id}", timeout_ms=10_000
        )
        try:
            (result,) = await client.create_topics([CreatableTopic(name=f"via-{node_id}")])
        finally:
            await client.close()
        assert result.outcome.error_code == 0, result


def _cluster_id(directory: Path, node_id: int) -> str:
    """The cluster id `mlog quorum format` wrote into node `node_id`'s data directory."""
    for line in (directory / f"data{node_id}" / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no cluster.id in meta.properties")
