"""Run `mlog` in this process against a data directory, as the CLI tests do."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from api.cli.main import main
from metadata_log.reader import LogReader


def mlog(data_dir: Path, *args: str, stdin: str = "") -> tuple[int, str]:
    """Run `mlog --data-dir DIR ARGS...` in-process: (exit code, stdout).

    `stdin` is what the command reads from standard input. An argparse refusal (SystemExit)
    is an exit code like any other.
    """
    out = io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(["--data-dir", str(data_dir), *args], out=out)
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue()


def ok(data_dir: Path, *args: str, stdin: str = "") -> str:
    """Run a command that must succeed; its stdout."""
    code, text = mlog(data_dir, *args, stdin=stdin)
    assert code == 0, text
    return text


def as_json(data_dir: Path, *args: str) -> Any:
    """Run a command that must succeed with `--output json`; its output, parsed."""
    return json.loads(ok(data_dir, "--output", "json", *args))


def entries(data_dir: Path) -> int:
    """The end offset of the data directory's log (how many entries it holds)."""
    with LogReader.open(data_dir / "log") as log:
        return log.end_offset


def error(data_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run a command that must be refused (exit 2, nothing written); its one-line error."""
    capsys.readouterr()
    before = entries(data_dir)
    code, _ = mlog(data_dir, *args)
    assert code == 2
    assert entries(data_dir) == before
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err
