"""The protocol package's own import: kio is loaded without Hypothesis where it can be.

kio imports `hypothesis.strategies` at its own import when Hypothesis is installed (as it is
with the test extras) to register strategies nothing of ours uses; `api.protocol` hides it for
that import, so a server, a console or a CLI call does not pay for it (`mlog serve` as its
zygotes in `tests/support/serve_forks.py` import it). Checked in fresh interpreters: this one
has imported both long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO

_CHILD = """
import json, sys
{first}
import api.protocol.codec
from kio.static import _phantom
loaded = "hypothesis" in sys.modules
import hypothesis.strategies as st
print(json.dumps({{"loaded": loaded, "kio_sees": _phantom.hypothesis is not None,
                   "usable": st.integers(0, 1).example() in (0, 1)}}))
"""


def _child(first: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(first=first)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=120,
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_protocol_is_imported_without_hypothesis_which_stays_importable() -> None:
    assert _child("") == {"loaded": False, "kio_sees": False, "usable": True}


def test_a_process_that_imported_hypothesis_first_leaves_kio_as_it_is() -> None:
    found = _child("import hypothesis")
    assert found == {"loaded": True, "kio_sees": True, "usable": True}
