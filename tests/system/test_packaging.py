from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

MODULES = ("records", "metadata_log", "api", "api.cli", "replay.sql.store", "migrations")

# Copy the sources rather than build in place: an in-tree build writes build/ and *.egg-info
# into the working copy.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "mlog-data",
    ".bench-data",
    "*.so",
    "_fastdecode.c",
)


def _run(
    args: list[str | Path], cwd: Path, timeout: float, **more_env: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(more_env)
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, (
        f"{args} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


def test_wheel_installs_and_runs_outside_the_repo(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    dist = tmp_path / "dist"
    # The decoder is compiled unoptimised (CFLAGS replaces Python's -O3 flags): this wheel is
    # only installed and imported, and the optimised compile was 10 of the test's 30 s.
    _run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", dist, source],
        tmp_path,
        600,  # a deadline, not a bound: a loaded host compiles the extensions slowly
        CFLAGS="-O0",
    )
    (wheel,) = dist.glob("*.whl")

    # A venv without pip of its own (its bootstrap took 4 s), installed into by this pip.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, 120)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", wheel],
        tmp_path,
        300,
    )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import importlib, json\n"
        f"names = {list(MODULES)!r}\n"
        "print(json.dumps({n: importlib.import_module(n).__file__ for n in names}))\n"
    )
    result = _run([python, "-I", "-c", script], elsewhere, 60)
    files = json.loads(result.stdout)
    assert set(files) == set(MODULES)
    venv_root = venv.resolve()
    for name, file in files.items():
        path = Path(file).resolve()
        assert path.is_relative_to(venv_root), f"{name} imported from {path}"
        assert not path.is_relative_to(REPO), f"{name} imported from the repo: {path}"

    # The wheel carries the compiled block decoder, built from the .pyx by the build backend.
    decoder = _run(
        [
            python,
            "-I",
            "-c",
            "from records.codec import DEFAULT_CODEC; print(DEFAULT_CODEC.decoder_name)",
        ],
        elsewhere,
        60,
    )
    assert decoder.stdout.strip() == "compiled"

    mlog = bin_dir / "mlog"
    assert mlog.is_file(), "the mlog console script was not installed"
    help_result = _run([mlog, "--help"], elsewhere, 60)
    assert "usage" in help_result.stdout.lower()
    # The Alembic environment is found inside the installed package, from any directory.
    upgraded = _run([mlog, "--data-dir", elsewhere / "data", "db", "upgrade"], elsewhere, 60)
    assert "upgraded from empty" in upgraded.stdout
