"""The README's Python examples run in order in one fresh directory, as a reader runs them."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.process
@pytest.mark.spark
def test_readme_audit_examples_run(tmp_path: Path) -> None:
    """The Audit section's commands on a small ./mlog-data, in one shell session (one Spark
    start, not one per line): each one-shot query typed into `mlog audit shell`, as its README
    line invites, then the README's piped line's `printf` run verbatim by bash on the same pipe."""
    pytest.importorskip("pyspark")
    commands = audit_commands((ROOT / "README.md").read_text())
    assert "mlog audit shell" in commands, commands
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mlog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m api.cli "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

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
