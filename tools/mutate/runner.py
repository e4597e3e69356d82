"""Mutation testing: small changes to a module (mutants) run against the tests that exercise it.

Usage: python -m tools.mutate [--min-score PCT] [--report DIR] [--list] [--again] [--jobs N]
                               [--since COMMIT] [MODULE ...]

MODULE is a source file of `TARGETS` (tools/mutate/targets.py; default: all of them, one after
another). For each:

1. the module's tests run once under coverage, each test in its own context: which tests run
   which line, and how long each takes (they must all pass);
2. each mutant is one AST change (operators below) compiled in place of the module: its
   tests are the ones that run the mutated line, fastest first, stopping at the first failure
   (`pytest -x`), with a per-test timeout (pytest-timeout) and a hard one per mutant, so a
   mutant that loops forever counts as caught, quickly;
3. a mutant is caught (killed, or timed out) if a test fails, survives if they all pass, and
   is uncovered if no test runs its line (counted as surviving).

Each mutant runs in a forked child of a process that has imported the third-party libraries
but none of the project, so the child imports the project afresh with the mutant in place of
the module; the file on disk is never changed. The report (`--report`, default
`.mutation/`) has one JSON file per module with every survivor; while a module runs, each
mutant's verdict is appended to `<module>.progress.jsonl` beside it, so a run cut short (a
killed session, a machine restart) resumes where it stopped while the module, its tests and
the runner are unchanged. Exit 1 if a module scores
below `--min-score` (default 90). `--since COMMIT` makes only the mutants of lines added or
changed since COMMIT (`git diff`): a cheap re-score of a module's new code, reported as such.

Operators: comparison flips (`==`/`!=`, `in`/`not in`, `is`/`is not`, `<` -> `>=`, ...),
boundaries (`<` <-> `<=`, `>` <-> `>=`), boolean negation (`and` <-> `or`, `not x` -> `x`, an
`if`/`while` condition negated), arithmetic (`+` <-> `-`, ...), constants (an int n -> n + 1,
`True` <-> `False`), return values (`return x` -> `return None`) and statement deletion (a
call, assignment, `raise`, `continue` or `break` -> `pass`). Strings (messages, docstrings),
`assert`s (type narrowing) and class decorators (`@dataclass` options) are left alone, and so
is a line marked `# pragma: no mutate`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from tools.mutate.mutants import Change, Mutant, enumerate_mutants, mutated_code
from tools.mutate.scores import TABLE as SCORE_TABLE
from tools.mutate.scores import Row
from tools.mutate.scores import record as record_score
from tools.mutate.targets import SIM_SEEDS, SWEEP_TARGETS, SWEEPS, TARGETS

ROOT = Path(__file__).resolve().parents[2]
"""The repository: the modules under mutation and their tests are named relative to it."""
RUNNER = tuple(sorted(Path(__file__).resolve().parent.glob("*.py")))
"""The runner's own modules: a change to them starts a module's run afresh."""

MIN_TEST_SECONDS = 10.0
"""The shortest per-test timeout a mutant's child gets (else five times the test's own time)."""

MIN_MUTANT_SECONDS = 30.0
"""The shortest hard limit on a mutant's child (else three times its tests' time plus 20 s)."""

# ---------------------------------------------------------------------- the child side


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads one module from a given code object instead of its file."""

    def __init__(self, name: str, path: str, code: CodeType) -> None:
        self.name = name
        self.path = path
        self.code = code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)  # the point: the mutant's code, not the file's


def _module_name(relative: str) -> str:
    return relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


class _Collector:
    """pytest plugin of the coverage run: a coverage context and a duration per test."""

    def __init__(self, cov: Any) -> None:
        self.cov = cov
        self.durations: dict[str, float] = {}
        self.failed: list[str] = []

    def pytest_collectstart(self, collector: Any) -> None:
        # A test module's import runs code too (fixtures built at import): its own context.
        if type(collector).__name__ == "Module":
            self.cov.switch_context(f"import:{collector.nodeid}")

    def pytest_runtest_setup(self, item: Any) -> None:
        self.cov.switch_context(item.nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            self.failed.append(report.nodeid)


def _pytest_args(extra: Sequence[str]) -> list[str]:
    return [
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "--rootdir",
        str(ROOT),
        "-W",
        "ignore",
        *extra,
    ]


def _coverage_child(target: str, tests: Sequence[str], out: Path) -> None:
    import coverage
    import pytest

    path = str(ROOT / target)
    cov = coverage.Coverage(include=[path], data_file=None, branch=False)
    collector = _Collector(cov)
    cov.start()
    sweeps = () if target in SWEEP_TARGETS else SWEEPS
    deselect = [arg for nodeid in sweeps for arg in ("--deselect", nodeid)]
    code = pytest.main(_pytest_args([*deselect, *tests]), plugins=[collector])
    cov.stop()
    data = cov.get_data()
    contexts = data.contexts_by_lineno(path)
    out.write_text(
        json.dumps(
            {
                "exit": int(code),
                "failed": collector.failed,
                "durations": collector.durations,
                "lines": {str(k): sorted(v) for k, v in contexts.items()},
            }
        )
    )


def _mutant_child(target: str, code: CodeType, nodeids: Sequence[str], timeout: float) -> int:
    import pytest

    sys.meta_path.insert(0, _MutantFinder(_module_name(target), str(ROOT / target), code))
    return int(pytest.main(_pytest_args(["-x", f"--timeout={timeout:.0f}", *nodeids])))


def _fork(work: Callable[[], int | None], log: Path) -> int:
    """Start `work` in a forked child in its own process group, its output to `log`; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.setpgrp()  # its own group: a timeout kills what it started too
            result = work()
            code = 0 if result is None else result
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _reap(pid: int, deadline: float) -> str | None:
    """A child's end ("exit N" | "timeout", killing it and its group), or None while it runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        return f"exit {os.waitstatus_to_exitcode(status)}"
    if time.monotonic() > deadline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout"
    return None


def _in_child(work: Callable[[], int | None], *, limit: float, log: Path) -> tuple[str, float]:
    """Run `work` in a forked child; ("exit N" | "timeout", seconds)."""
    start = time.monotonic()
    pid = _fork(work, log)
    while (outcome := _reap(pid, start + limit)) is None:
        select.select([], [], [], 0.05)
    return outcome, time.monotonic() - start


# ---------------------------------------------------------------------- the campaign


@dataclass(slots=True)
class Score:
    """What became of one module's mutants."""

    target: str
    killed: int = 0
    timed_out: int = 0
    timeouts: list[dict[str, Any]] = field(default_factory=list)  # this run's, to check
    survived: list[dict[str, Any]] = field(default_factory=list)
    uncovered: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        """Mutants made."""
        return self.killed + self.timed_out + len(self.survived) + len(self.uncovered)

    @property
    def caught(self) -> int:
        """Mutants killed or timed out."""
        return self.killed + self.timed_out

    @property
    def percent(self) -> float:
        """The score: caught of made, in percent (100 when none were made)."""
        return 100.0 * self.caught / self.total if self.total else 100.0


LAYERS = ("records", "metadata_log", "replay", "api")
"""The project's packages, lowest first: a package imports only those before it."""


def _prepare_parent(targets: Sequence[str]) -> None:
    """Import what no mutant changes once, so each forked child starts warm.

    The third-party libraries, and the project's layers below the lowest target (imports run
    one way, so those never import a target).
    """
    for name in (
        "pytest", "hypothesis", "pytest_asyncio", "pytest_timeout", "fastavro", "cramjam",
        "immutables", "sqlalchemy", "alembic", "kio", "asyncio", "coverage",
    ):  # fmt: skip
        with contextlib.suppress(ImportError):  # optional ones
            importlib.import_module(name)
    lowest = min(LAYERS.index(t.split("/")[0]) for t in targets)
    for layer in LAYERS[:lowest]:
        for path in sorted((ROOT / layer).glob("*.py")):
            importlib.import_module(_module_name(str(path.relative_to(ROOT))))
    for name in list(sys.modules):
        if name.split(".")[0] in LAYERS[lowest:]:
            raise SystemExit(f"the runner imported project module {name} before forking")


def _tests_for(mutant: Mutant, contexts: Sequence[str], tests: Collection[str]) -> set[str]:
    """The tests a mutant can change: those that run its line, and every test where it runs early.

    Module-level code runs once, at the module's import, and every test may use what it made.
    So may a line run while a test module was imported: the first test module that imports the
    project builds its module-level objects (`DEFAULT_CODEC`, its compiled encoders), and every
    later test module shares them.
    """
    if not contexts:
        return set()
    if mutant.module_level or any(c == "" or c.startswith("import:") for c in contexts):
        return set(tests)
    return set(contexts)


def _entry(mutant: Mutant) -> dict[str, Any]:
    return {
        "line": mutant.line,
        "operator": mutant.operator,
        "mutation": mutant.description,
        "source": mutant.source_line,
    }


def _survivor_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """A mutant in a report: its line, operator, mutation and source (several may share one)."""
    return (entry["line"], entry["operator"], entry["mutation"], entry["source"])


def _previous_survivors(
    target: str, report: Path, source: str
) -> tuple[Score, Counter[tuple[Any, ...]]]:
    """The last full run's score of `target` with its survivors taken out, and their keys.

    `--again` runs only those survivors (after tests were added); the module must be unchanged
    since, or the mutants would not be the same.
    """
    path = report / (target.replace("/", "__") + ".json")
    if not path.exists():
        raise SystemExit(f"{target}: no earlier report in {report}; run it without --again first")
    earlier = json.loads(path.read_text())
    survivors = (*earlier["survived"], *earlier["uncovered"])
    lines = source.splitlines()
    sha = earlier.get("source_sha256")  # reports before it: the survivors' lines must match
    if (sha is not None and sha != hashlib.sha256(source.encode()).hexdigest()) or any(
        e["line"] > len(lines) or lines[e["line"] - 1].strip() != e["source"] for e in survivors
    ):
        raise SystemExit(f"{target} changed since its last run; run it without --again")
    score = Score(target=target, killed=earlier["killed"], timed_out=earlier["timed_out"])
    return score, Counter(_survivor_key(e) for e in survivors)


def changed_lines(target: str, since: str) -> set[int]:
    """The lines of `target` as it is now that were added or changed since commit `since`."""
    diff = subprocess.run(
        ["git", "diff", "--unified=0", "--no-color", "--no-ext-diff", since, "--", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines: set[int] = set()
    for match in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.MULTILINE):
        start, count = int(match[1]), int(match[2] if match[2] is not None else 1)
        lines.update(range(start, start + count))  # a count of 0: lines only removed
    return lines


def _progress(path: Path, digest: str, *, again: bool, since: str | None) -> dict[int, Any]:
    """The verdicts a cut-short run of the same module, tests, runner and mode left, by mutant.

    The file's first line says what it was run on; a file of another run is started afresh.
    A last line cut mid-write (the run killed while appending) is dropped.
    """
    header = {"digest": digest, "again": again, "since": since}
    if path.exists():
        lines = path.read_text().splitlines()
        with contextlib.suppress(ValueError, IndexError):
            if json.loads(lines[0]) == header:
                done: dict[int, Any] = {}
                for line in lines[1:]:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        break
                    done[record["n"]] = record
                print(f"  resuming: {len(done)} mutants judged by an earlier run", flush=True)
                return done
    path.write_text(json.dumps(header) + "\n")
    return {}


def _count(score: Score, verdict: str, entry: dict[str, Any]) -> None:
    if verdict == "killed":
        score.killed += 1
    elif verdict == "timed_out":
        score.timed_out += 1
        score.timeouts.append(entry)
    elif verdict == "survived":
        score.survived.append(entry)
    else:
        score.uncovered.append(entry)


def _plan(
    target: str,
    source: str,
    made: tuple[Mutant, Change, int],
    *,
    by_line: dict[int, list[str]],
    durations: dict[str, float],
) -> tuple[Callable[[], int], float] | None:
    """What a mutant's child runs (its tests against it) and its hard limit; None if uncovered."""
    mutant, change, position = made
    contexts = sorted(
        {c for n in range(mutant.line, mutant.last_line + 1) for c in by_line.get(n, [])}
    )
    nodeids = sorted(_tests_for(mutant, contexts, durations), key=lambda t: durations.get(t, 0.0))
    if not nodeids:
        return None
    code = mutated_code(source, str(ROOT / target), change, position)
    budget = sum(durations.get(t, 1.0) for t in nodeids)
    per_test = max(MIN_TEST_SECONDS, 5 * max(durations.get(t, 1.0) for t in nodeids))
    limit = max(MIN_MUTANT_SECONDS, 3 * budget + 20)
    return lambda: _mutant_child(target, code, nodeids, per_test), limit


def _verdict(outcome: str, entry: dict[str, Any]) -> str:
    """A child's end as a verdict: "killed", "timed_out" or "survived".

    An unusual end (nothing ran, or the child died of a signal) is noted in `entry`.
    """
    if outcome == "timeout":
        return "timed_out"
    if outcome == "exit 0":
        return "survived"
    if outcome in ("exit 1", "exit 2", "exit 3", "exit 4"):
        # Tests failed, or the mutant broke their collection (an import-time error makes
        # pytest find no test of a node id the unmutated run had: exit 4).
        return "killed"
    entry["outcome"] = outcome
    if outcome == "exit 5":  # nothing ran: the runner's fault, never the mutant's credit
        return "survived"
    return "killed"  # the child crashed (a signal): the mutant broke it, so it is caught


def run_target(
    target: str,
    report: Path,
    *,
    log_dir: Path,
    again: bool = False,
    since: str | None = None,
    jobs: int = 1,
) -> Score:
    """Mutate one module; the score, with every survivor.

    With `again`, only the survivors of the module's last report run; the others keep their
    verdict (the tests only grew since). With `since`, only the mutants of lines changed since
    that commit are made (and the report says so). `jobs` mutants run at once.
    """
    tests = TARGETS[target]
    source = (ROOT / target).read_text()
    score = Score(target=target)
    only: Counter[tuple[Any, ...]] | None = None
    if again:
        score, only = _previous_survivors(target, report, source)
    started = time.monotonic()
    # The coverage run is kept beside the report while the module and its tests are unchanged.
    digest = hashlib.sha256()
    for path in (ROOT / target, *(ROOT / test for test in tests), *RUNNER):
        digest.update(path.read_bytes())
    report.mkdir(parents=True, exist_ok=True)
    coverage_file = report / (target.replace("/", "__") + f".coverage-{digest.hexdigest()[:16]}")
    outcome, seconds = "kept", 0.0
    if not coverage_file.exists():
        outcome, seconds = _in_child(
            lambda: _coverage_child(target, tests, coverage_file),
            limit=3600,
            log=log_dir / "coverage.log",
        )
    measured = json.loads(coverage_file.read_text()) if coverage_file.exists() else None
    if measured is None or measured["exit"] != 0:
        coverage_file.unlink(missing_ok=True)
        # The scratch directory goes with the run: keep the log where the report is.
        kept = report / (target.replace("/", "__") + ".coverage.log")
        shutil.copyfile(log_dir / "coverage.log", kept)
        status = outcome if measured is None else f"pytest exit {measured['exit']}"
        raise SystemExit(f"{target}: its tests do not pass unmutated ({status}); see {kept}")
    progress_file = report / (target.replace("/", "__") + ".progress.jsonl")
    done = _progress(progress_file, digest.hexdigest(), again=again, since=since)
    durations: dict[str, float] = measured["durations"]
    by_line: dict[int, list[str]] = {int(k): v for k, v in measured["lines"].items()}
    mutants = enumerate_mutants(source)
    if since is not None:
        changed = changed_lines(target, since)
        mutants = [
            m for m in mutants if not changed.isdisjoint(range(m[0].line, m[0].last_line + 1))
        ]
    if only is not None:
        # Mutants sharing a survivor's key all run again; those of them the last run caught
        # leave its count (they are counted afresh below).
        sharing = Counter(k for m, _, _ in mutants if (k := _survivor_key(_entry(m))) in only)
        score.killed -= sum(sharing[k] - only[k] for k in sharing)
    print(
        f"{target}: {len(mutants)} mutants, {len(durations)} tests ({seconds:.0f} s unmutated)",
        flush=True,
    )
    judged = 0

    def record(n: int, verdict: str, entry: dict[str, Any]) -> None:
        nonlocal judged
        _count(score, verdict, entry)
        with progress_file.open("a") as out:
            out.write(json.dumps({"n": n, "verdict": verdict, "entry": entry}) + "\n")
        judged += 1
        if judged % 50 == 0:
            print(f"  {judged} judged: {score.percent:.1f}% caught so far", flush=True)

    # Up to `jobs` mutants at once, each in its own child (and log); verdicts as they end.
    running: dict[int, tuple[int, dict[str, Any], float, Path]] = {}
    free_logs = [log_dir / f"mutant-{k}.log" for k in range(jobs)]
    queue = iter(enumerate(mutants, 1))
    exhausted = False
    try:
        while not exhausted or running:
            while not exhausted and len(running) < jobs:
                item = next(queue, None)
                if item is None:
                    exhausted = True
                    break
                n, (mutant, change, position) = item
                entry = _entry(mutant)
                if only is not None and _survivor_key(entry) not in only:
                    continue
                if n in done:  # an earlier, cut-short run judged it
                    _count(score, done[n]["verdict"], done[n]["entry"])
                    continue
                plan = _plan(
                    target, source, (mutant, change, position), by_line=by_line, durations=durations
                )
                if plan is None:
                    record(n, "uncovered", entry)
                    continue
                work, limit = plan
                log = free_logs.pop()
                running[_fork(work, log)] = (n, entry, time.monotonic() + limit, log)
            for pid, (n, entry, deadline, log) in list(running.items()):
                ended = _reap(pid, deadline)
                if ended is not None:
                    del running[pid]
                    free_logs.append(log)
                    record(n, _verdict(ended, entry), entry)
            if running:
                select.select([], [], [], 0.05)
    finally:  # cut short (Ctrl-C, an error): the children in their own groups go too
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    score.survived.sort(key=lambda e: e["line"])
    score.uncovered.sort(key=lambda e: e["line"])
    score.seconds = time.monotonic() - started
    (report / (target.replace("/", "__") + ".json")).write_text(
        json.dumps(
            {
                "target": target,
                "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
                "since": since,
                "tests": list(tests),
                "total": score.total,
                "killed": score.killed,
                "timed_out": score.timed_out,
                "timed_out_mutants": sorted(score.timeouts, key=lambda e: e["line"]),
                "survived": score.survived,
                "uncovered": score.uncovered,
                "percent": round(score.percent, 1),
                "seconds": round(score.seconds),
            },
            indent=1,
        )
    )
    progress_file.unlink(missing_ok=True)
    return score


def main(argv: Sequence[str] | None = None) -> int:
    """Run the modules named (or all of `TARGETS`); exit 1 if any scores below --min-score."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="files of TARGETS (default: all)")
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument("--report", type=Path, default=ROOT / ".mutation")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--again",
        action="store_true",
        help="run only the survivors of each module's last report (after adding tests)",
    )
    parser.add_argument(
        "--since",
        metavar="COMMIT",
        help="only the mutants of lines added or changed since COMMIT (git diff)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="mutants run at once, each in its own child (default 1; at most one per core)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= (os.cpu_count() or 1):
        parser.error(f"--jobs must be 1 to {os.cpu_count() or 1} (this machine's cores)")
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"not in TARGETS: {', '.join(unknown)} (known: {', '.join(TARGETS)})")
    modules = args.modules or list(TARGETS)
    if args.list:
        for target in modules:
            changed = changed_lines(target, args.since) if args.since else None
            for mutant, _, _ in enumerate_mutants((ROOT / target).read_text()):
                if changed is not None and changed.isdisjoint(
                    range(mutant.line, mutant.last_line + 1)
                ):
                    continue
                print(f"{target}:{mutant.line}: {mutant.operator}: {mutant.description}")
        return 0
    os.chdir(ROOT)
    # This checkout's project, not the one an editable install finds: with a venv shared
    # between git worktrees, the other worktree's modules were imported and coverage saw no
    # line of the target (all uncovered).
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="mutate-hypothesis-")
    os.environ.setdefault("MLOG_SIM_SEEDS", SIM_SEEDS)
    _prepare_parent(modules)
    scores = []
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        for target in modules:
            scores.append(
                run_target(
                    target,
                    args.report,
                    log_dir=Path(scratch),
                    again=args.again,
                    since=args.since,
                    jobs=args.jobs,
                )
            )
    print()
    print(f"{'module':<32}{'mutants':>8}{'caught':>8}{'timeout':>8}{'survived':>9}{'uncov.':>7}"
          f"{'score':>8}")  # fmt: skip
    for s in scores:
        print(
            f"{s.target:<32}{s.total:>8}{s.caught:>8}{s.timed_out:>8}{len(s.survived):>9}"
            f"{len(s.uncovered):>7}{s.percent:>7.1f}%"
        )
    if args.since:
        print(f"only the mutants of lines changed since {args.since}")
    else:
        for s in scores:
            record_score(Row(module=s.target, mutants=s.total, caught=s.caught))
        print(f"scores: {SCORE_TABLE.relative_to(ROOT)}")
    print(f"survivors: {args.report}/<module>.json")
    return 0 if all(s.percent >= args.min_score for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
