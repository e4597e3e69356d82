"""Run a line of Kafka's docs through `mlog`, with only the script's name changed.

`bin/kafka-topics.sh --bootstrap-server localhost:9092 ...` becomes `mlog kafka-topics.sh
--bootstrap-server <the test server> ...`: the `bin/` goes (mlog is one command), the host
and port are the test's server, every other word stays as the docs wrote it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from collections.abc import Sequence

from api.cli.main import main

DOC_ADDRESS = "localhost:9092"
"""The address Kafka's docs use for the cluster."""


def run(args: Sequence[str], *, stdin: str = "") -> tuple[int, str, str]:
    """`mlog ARGS...` in process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stderr(err):
            try:
                code = main(list(args), out=out)
            except SystemExit as exc:  # argparse's refusals
                code = int(exc.code or 0)
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def doc_args(line: str, address: str) -> list[str]:
    """The words of a doc line for `mlog`: `bin/` dropped, localhost:9092 the test's server."""
    words = shlex.split(line.replace("\\\n", " "))
    assert words[0].startswith("bin/kafka-"), line
    return [words[0].removeprefix("bin/"), *(address if w == DOC_ADDRESS else w for w in words[1:])]


def kafka(line: str, address: str, *, stdin: str = "") -> tuple[int, str, str]:
    """Run a line of Kafka's docs against the server at `address`."""
    return run(doc_args(line, address), stdin=stdin)


def ok(line: str, address: str, *, stdin: str = "") -> str:
    """Run a doc line that must succeed with nothing on stderr; its stdout."""
    code, out, err = kafka(line, address, stdin=stdin)
    assert code == 0, f"{line}\n{err}"
    assert err == "", err
    return out


def refused(line: str, address: str, *words: str) -> str:
    """Run a doc line mlog refuses: exit 2, one line on stderr naming each of `words`."""
    code, out, err = kafka(line, address)
    assert code == 2, f"{line}\n{out}{err}"
    assert out == "" and err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    return err


def shapes(text: str, *patterns: str) -> None:
    """Every line of `text` fully matches its pattern, in order, and there are as many."""
    lines = text.split("\n")
    assert lines[-1] == "", f"no final newline: {text!r}"
    assert len(lines) - 1 == len(patterns), text
    for line, pattern in zip(lines, patterns, strict=False):
        assert re.fullmatch(pattern, line), f"{line!r} !~ {pattern!r}"
