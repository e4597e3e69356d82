"""The mutation runner's choices: what it mutates, which tests a mutant runs, --again, --since,
resuming a run cut short."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tools.mutate import runner as mutate
from tools.mutate import targets
from tools.mutate.mutants import Mutant, enumerate_mutants
from tools.mutate.runner import _previous_survivors, _progress, _tests_for, changed_lines

SOURCE = '''
from __future__ import annotations
from collections.abc import Callable

Hook = Callable[[int], int]
LIMIT = 3
Pair = tuple[int, int] | None


def f(x: int, hook: Hook) -> int:
    """Docs."""
    return hook(x) + LIMIT if x < LIMIT else 0
'''


def test_type_aliases_that_only_annotate_are_not_mutated() -> None:
    lines = {m.source_line for m, _, _ in enumerate_mutants(SOURCE)}
    assert "LIMIT = 3" in lines
    assert not any(line.startswith(("Hook =", "Pair =")) for line in lines)


def _mutant(*, module_level: bool = False) -> Mutant:
    return Mutant(
        index=0,
        line=1,
        last_line=1,
        module_level=module_level,
        operator="constant",
        description="1 -> 2",
        source_line="x",
    )


def test_a_line_run_at_import_runs_every_test() -> None:
    tests = {"t.py::a", "t.py::b", "u.py::c"}
    assert _tests_for(_mutant(), [], tests) == set()
    assert _tests_for(_mutant(), ["t.py::a"], tests) == {"t.py::a"}
    assert _tests_for(_mutant(), ["import:t.py", "u.py::c"], tests) == tests
    assert _tests_for(_mutant(module_level=True), ["t.py::a"], tests) == tests


def test_again_takes_the_last_report_of_an_unchanged_module(tmp_path: Path) -> None:
    source = "x = 1\ny = 2\n"
    survivor = {"line": 2, "operator": "constant", "mutation": "2 -> 3", "source": "y = 2"}
    report = {
        "killed": 5,
        "timed_out": 1,
        "survived": [survivor],
        "uncovered": [],
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
    }
    (tmp_path / "m.py.json").write_text(json.dumps(report))
    score, keys = _previous_survivors("m.py", tmp_path, source)
    assert (score.killed, score.timed_out) == (5, 1)
    assert keys == {(2, "constant", "2 -> 3", "y = 2"): 1}
    with pytest.raises(SystemExit, match="changed since its last run"):
        _previous_survivors("m.py", tmp_path, source + "z = 3\n")
    with pytest.raises(SystemExit, match="no earlier report"):
        _previous_survivors("other.py", tmp_path, source)


def test_since_takes_the_lines_added_or_changed_since_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "m.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n")
    git("add", "m.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m")
    # b changed, d removed (a hunk of no new line), f added at the end.
    (tmp_path / "m.py").write_text("a = 1\nb = 20\nc = 3\ne = 5\nf = 6\n")
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    assert changed_lines("m.py", "HEAD") == {2, 5}
    (tmp_path / "n.py").write_text("x = 1\ny = 2\n")
    git("add", "n.py")
    assert changed_lines("n.py", "HEAD") == {1, 2}  # a new file: every line


def test_a_cut_short_run_resumes_from_its_progress_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py.progress.jsonl"
    assert _progress(path, "d1", again=False, since=None) == {}  # a fresh start writes the header
    entry = {"line": 1, "operator": "constant", "mutation": "1 -> 2", "source": "x = 1"}
    with path.open("a") as out:
        out.write(json.dumps({"n": 1, "verdict": "killed", "entry": entry}) + "\n")
        out.write(json.dumps({"n": 2, "verdict": "survived", "entry": entry}) + "\n")
        out.write('{"n": 3, "verd')  # killed mid-append
    done = _progress(path, "d1", again=False, since=None)
    assert {n: r["verdict"] for n, r in done.items()} == {1: "killed", 2: "survived"}
    score = mutate.Score(target="m.py")
    for record in done.values():
        mutate._count(score, record["verdict"], record["entry"])
    assert (score.killed, score.survived) == (1, [entry])
    # Another module or test digest, or another mode: the old verdicts do not apply.
    assert _progress(path, "d1", again=True, since=None) == {}
    assert path.read_text().count("\n") == 1
    path.write_text("not json\n")
    assert _progress(path, "d1", again=False, since=None) == {}


@pytest.mark.process  # forks a coverage run and mutant children, each a pytest session
def test_a_run_with_two_jobs_judges_every_mutant_and_resumes(tmp_path: Path) -> None:
    # The runner forks the process it runs in: a test worker that ran hundreds of tests
    # before (threads, servers, a collector left as another test set it) is no such process,
    # and once forked a coverage child that crashed. A fresh interpreter runs it, as
    # `python -m tools.mutate` does.
    code = f"from tests.tools import test_mutate_runner as t; t._run_and_resume({str(tmp_path)!r})"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard only: the run takes seconds
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _run_and_resume(directory: str) -> None:
    """The whole runner on a module of five mutants: a coverage run, two mutant children at
    once, the report; then a run cut short after two verdicts resumes with the other three."""
    tmp_path = Path(directory)
    (tmp_path / "toy.py").write_text(
        "def double(x: int) -> int:\n    return x * 2\n\n\ndef unused() -> int:\n    return 1\n"
    )
    (tmp_path / "test_toy.py").write_text(
        "import toy\n\n\ndef test_double() -> None:\n    assert toy.double(3) == 6\n"
    )
    mutate.ROOT = tmp_path
    # No mutant of toy.py loops: the limits only guard against a hang, and a loaded host
    # (another suite beside this one) once took the runner's 30 s floor to judge one.
    mutate.MIN_TEST_SECONDS = 300.0
    mutate.MIN_MUTANT_SECONDS = 600.0
    targets.TARGETS["toy.py"] = ("test_toy.py",)
    sys.path.insert(0, str(tmp_path))
    os.chdir(tmp_path)
    report, logs = tmp_path / "report", tmp_path / "logs"
    logs.mkdir()
    assert len(enumerate_mutants((tmp_path / "toy.py").read_text())) == 5
    score = mutate.run_target("toy.py", report, log_dir=logs, jobs=2)
    # `return x * 2`: `*` -> `+`, 2 -> 3 and `return None` caught; `unused`'s two uncovered.
    assert (score.killed, score.timed_out, score.survived) == (3, 0, [])
    assert [e["source"] for e in score.uncovered] == ["return 1", "return 1"]
    written = json.loads((report / "toy.py.json").read_text())
    assert (written["killed"], written["total"], written["timed_out_mutants"]) == (3, 5, [])
    assert not (report / "toy.py.progress.jsonl").exists()  # a finished run leaves none

    progress = report / "toy.py.progress.jsonl"
    real_record = mutate._count
    calls = 0

    def cut_short(*args: object) -> None:
        nonlocal calls
        calls += 1
        if calls > 2:
            raise KeyboardInterrupt
        real_record(*args)  # type: ignore[arg-type]

    mutate._count = cut_short  # type: ignore[assignment]
    try:
        mutate.run_target("toy.py", report, log_dir=logs, jobs=2)
        raise AssertionError("the run was not cut short")
    except KeyboardInterrupt:
        pass
    finally:
        mutate._count = real_record
    lines = progress.read_text().splitlines()
    assert len(lines) == 1 + 2  # the header and two verdicts
    again = mutate.run_target("toy.py", report, log_dir=logs, jobs=1)
    assert (again.killed, len(again.uncovered)) == (3, 2)
