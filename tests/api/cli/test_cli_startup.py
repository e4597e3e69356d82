"""What `mlog` imports to start: the heavy libraries only in the commands that use them.

Structural checks, not timings (bench/cli_bench.py measures the time): each runs a fresh
interpreter and looks at `sys.modules` when it exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

from api.cli import serve
from api.protocol.connection import DEFAULT_MAX_REQUEST_BYTES

HEAVY = ("alembic", "sqlalchemy", "pyspark", "kio")
"""Libraries that cost more to import than a small command costs to run."""

_REPORT = textwrap.dedent(
    """
    import atexit, json, sys

    def _report():
        roots = sorted({name.split(".")[0] for name in sys.modules})
        sys.stderr.write("MODULES " + json.dumps(roots) + "\\n")

    atexit.register(_report)
    """
)


def _modules_after(code: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Run `code` in a fresh interpreter; the top-level packages imported by its exit."""
    proc = subprocess.run(
        [sys.executable, "-c", _REPORT + code],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("MODULES ")]
    assert lines, proc.stderr
    return set(json.loads(lines[-1].removeprefix("MODULES "))), proc


def _mlog(data_dir: Path, *args: str) -> tuple[set[str], str]:
    """Run `mlog --data-dir DIR ARGS` in a fresh interpreter; (packages imported, stdout)."""
    argv = ["--data-dir", str(data_dir), *args]
    modules, proc = _modules_after(
        f"from api.cli.main import main\nraise SystemExit(main({argv!r}))"
    )
    assert proc.returncode == 0, proc.stderr
    return modules, proc.stdout


@pytest.mark.process
def test_importing_the_cli_imports_no_heavy_library() -> None:
    modules, proc = _modules_after("import api.cli")
    assert proc.returncode == 0, proc.stderr
    assert not modules & set(HEAVY)


@pytest.mark.process
def test_building_every_command_imports_no_heavy_library() -> None:
    # Each noun module keeps kio, SQLAlchemy, Alembic and PySpark inside its handlers.
    modules, proc = _modules_after(
        "from api.cli.main import build_parser\nbuild_parser(filled=True)"
    )
    assert proc.returncode == 0, proc.stderr
    assert not modules & set(HEAVY)


@pytest.fixture
def small_cluster(tmp_path: Path) -> Path:
    from api.cli.main import main

    for broker in ("1", "2", "3"):
        assert main(["--data-dir", str(tmp_path), "brokers", "register", "--id", broker]) == 0
    for topic in ("orders", "payments"):
        args = ["topics", "create", "--topic", topic, "--partitions", "3"]
        assert main(["--data-dir", str(tmp_path), *args, "--replication-factor", "2"]) == 0
    return tmp_path


@pytest.mark.process
def test_topics_list_on_a_data_directory_imports_no_heavy_library(small_cluster: Path) -> None:
    modules, out = _mlog(small_cluster, "topics", "list")
    assert "orders" in out and "payments" in out
    assert not modules & set(HEAVY)
    # Nor asyncio: only the server and --bootstrap-server need an event loop.
    assert "asyncio" not in modules
    # Nor the login name's lookup: only a write records a principal.
    assert "getpass" not in modules


@pytest.mark.process
def test_topics_create_without_snapshots_opens_no_database(small_cluster: Path) -> None:
    modules, out = _mlog(small_cluster, "topics", "create", "--topic", "audit")
    assert "created topic audit" in out
    assert not modules & set(HEAVY)
    # No snapshot yet: the default SQLite file is created with the first one, not before.
    assert not (small_cluster / "snapshots.db").exists()


@pytest.mark.process
def test_with_a_snapshot_at_the_head_revision_alembic_stays_out(small_cluster: Path) -> None:
    _mlog(small_cluster, "snapshot", "create")
    assert (small_cluster / "snapshots.db").exists()
    modules, out = _mlog(small_cluster, "topics", "list")
    assert "orders" in out
    assert "sqlalchemy" in modules  # the snapshot is read
    assert not modules & {"alembic", "pyspark", "kio"}


@pytest.mark.process
def test_version_prints_the_installed_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"mlog {version('metadata-log')}\n"


def test_serve_default_request_size_is_the_protocols() -> None:
    # `mlog serve` spells it so that its parser does not import the protocol.
    assert serve.DEFAULT_MAX_REQUEST_BYTES == DEFAULT_MAX_REQUEST_BYTES


TRICKY_ARGUMENTS = [
    ["topics", "list"],
    ["--data-dir", "/tmp/x", "brokers", "list"],
    ["--output", "json", "topics", "list"],
    ["topics", "list", "--output", "json"],
    ["topics", "list", "--bogus"],
    ["topics", "list", "extra"],
    ["--bogus", "topics", "list"],
    ["topics", "create"],
    ["topics", "create", "--topic", "x", "--partitions", "y"],
    ["log", "dump", "--gt", "x"],
    ["log", "nope"],
    ["tpoics", "list"],
    ["topics", "list", "--output", "xml"],
    ["--output", "xml", "topics", "list"],
    ["topics", "-h"],
    ["topics", "list", "-h"],
    ["image", "show", "/a", "/b"],
    ["serve", "--listen", "bad"],
    ["audit", "sql"],
    ["--deb", "history", "--topic", "x"],
    ["--d", "x", "topics", "list"],
    ["--data-dir"],
    ["--", "topics", "list"],
    ["topics", "--", "list"],
    ["--data-dir=x", "log", "dump"],
    ["topics", "list", "--"],
    ["--data-dir", "x", "--", "topics"],
    ["--output=json", "topics", "list"],
    ["--out", "json", "brokers", "list"],
    ["--debug", "--debug", "topics", "list"],
    ["-", "topics"],
    ["topics", "list", "-"],
    ["--data-dir", "-x", "topics", "list"],
    ["--db", "sqlite:///x", "db", "current"],
    ["shell", "-c", "ls; pwd"],
    ["history", "--topic"],
    ["-h"],
    ["--version"],
    [],
]


@pytest.mark.parametrize("argv", TRICKY_ARGUMENTS, ids=" ".join)
def test_the_chosen_nouns_parser_parses_as_the_parser_of_every_noun(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from api.cli.main import build_parser, chosen_noun

    def outcome(only: str | None) -> tuple[object, str, str]:
        try:
            parsed = vars(build_parser(only=only).parse_args(argv))
            handler = parsed.pop("handler", None)
            result: object = (sorted(parsed.items()), getattr(handler, "__doc__", None))
        except SystemExit as exc:
            result = ("exit", exc.code)
        captured = capsys.readouterr()
        return result, captured.out, captured.err

    assert outcome(chosen_noun(argv)) == outcome(None)
