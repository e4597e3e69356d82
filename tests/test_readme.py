"""The README's Python examples run in order in one fresh directory, as a reader runs them."""

from __future__ import annotations

import os
import re
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
