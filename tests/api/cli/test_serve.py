"""`mlog serve`'s start: what it imports before it serves."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import REPO


def test_the_codecs_come_without_hypothesis_hooks_and_hypothesis_stays_importable() -> None:
    """kio's Hypothesis strategies (a sixth of a start's CPU) are not made in a server; the
    hiding lasts for kio's import only. In a fresh interpreter, as `mlog serve` starts."""
    code = (
        "import sys\n"
        "from api.cli.serve import _import_kafka_codecs_alone\n"
        "_import_kafka_codecs_alone()\n"
        "import kio.static._phantom as phantom\n"
        "import api.protocol.codec\n"
        "assert phantom.hypothesis is None, phantom.hypothesis\n"
        "assert 'hypothesis' not in sys.modules, 'hypothesis was imported'\n"
        "import hypothesis.strategies\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
