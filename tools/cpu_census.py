"""Where a command's CPU goes, process by process: `python -m tools.cpu_census -- make test`.

The suite is CPU-bound on two cores, so its time is its CPU-seconds over two; this tells which
processes spend them. While the command runs, every process on the machine is read from `/proc`
every `--interval` seconds (its own user + system time, its command line), then grouped by kind
(`kind`): the pytest workers, `mlog serve` and each other `mlog` command, Spark's JVMs (driver,
executor, master, worker, the SQL parser, an archive's dump), PySpark's Python workers,
Chromium, bench scripts, and the rest by executable. The machine's busy and idle seconds come
from `/proc/stat` over the same span.

What the samples miss: a process that ends within one interval of its last sample loses that
tail (and one shorter than an interval may not be seen at all), and the kernel's own threads
show as processes of their own. The table prints the sampled total beside the machine's.

Options: `--interval S` (default 0.25), `--top N` rows (default 30), `--json FILE` to keep
every process's row (pid, command line, CPU-seconds, parent pid).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

MLOG = re.compile(
    r"(?:-m api\.cli|/mlog)(?: --?[a-z-]+(?:[ =](?!-)\S+)?)* ([a-z][a-z.-]*(?: [a-z][a-z-]+)?)"
)
"""An `mlog` command line's noun and verb, after any global flags (`--data-dir D`, ...)."""

JAVA_KINDS = (
    ("-XX:ArchiveClassesAtExit", "java archive dump"),
    ("deploy.master.Master", "java spark master"),
    ("deploy.worker.Worker", "java spark worker"),
    ("CoarseGrainedExecutorBackend", "java spark executor"),
    ("spark-sql-parser", "java sql parser"),
    ("SparkSubmit", "java spark driver"),
)
"""The first marker a Java command line holds names its kind (else `java other`)."""


@dataclass(slots=True)
class Seen:
    """One process as last sampled: `cpu` is what it spent since the census began."""

    command: str
    cpu: float
    parent: int
    before: float = 0.0
    """Its CPU-seconds when the census began (0 for a process started since)."""


def kind(command: str) -> str:
    """The kind of process a command line (arguments joined by spaces) is."""
    words = command.split(" ")
    exe = words[0].rsplit("/", 1)[-1]
    if exe == "java":
        return next((name for mark, name in JAVA_KINDS if mark in command), "java other")
    if exe.startswith("chrom") or "chrome" in exe:
        return "chromium"
    if exe.startswith("python") and command.startswith(f"{words[0]} -u -c import sys;exec("):
        return "pytest worker (xdist)"
    if "pyspark.daemon" in command or "pyspark/daemon.py" in command:
        return "pyspark python worker"
    if "/bench/" in command or command.startswith("bench/"):
        script = next((w for w in words if w.endswith(".py")), "?")
        return f"bench {script.rsplit('/', 1)[-1]}"
    if "tests.support.serve_forks" in command:  # the tests' zygote and its children
        return "mlog serve (forked)"
    if (found := MLOG.search(command)) is not None:
        return f"mlog {found.group(1)}"
    if exe.startswith("python") and len(words) > 2 and words[1] == "-m":
        return f"python -m {words[2]}"
    return exe or "?"


def read_stat(text: str) -> tuple[str, int, float, int]:
    """(name, parent pid, own CPU-seconds, start time in ticks) of a `/proc/PID/stat` line.

    The name sits in parentheses and may hold spaces and parentheses itself: the fields after
    it are counted from its last `)`.
    """
    close = text.rindex(")")
    name = text[text.index("(") + 1 : close]
    fields = text[close + 2 :].split()
    own = (int(fields[11]) + int(fields[12])) / TICKS
    return name, int(fields[1]), own, int(fields[19])


def busy_idle() -> tuple[float, float]:
    """The machine's busy and idle CPU-seconds since boot (`/proc/stat`, all CPUs)."""
    values = [int(v) for v in (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / TICKS, idle / TICKS


class Census:
    """Every process's CPU, sampled from `/proc` until `stop`."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.seen: dict[tuple[int, int], Seen] = {}
        self._stop = threading.Event()

    def begin(self) -> None:
        """Take the processes already running, with what they spent so far (not counted)."""
        self.sample()
        for seen in self.seen.values():
            seen.before, seen.cpu = seen.cpu, 0.0

    def sample(self) -> None:
        """Read every process once."""
        for entry in os.scandir(PROC):
            if not entry.name.isdigit():
                continue
            try:
                name, parent, cpu, started = read_stat(
                    Path(entry.path, "stat").read_text(errors="replace")
                )
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
            key = (int(entry.name), started)
            known = self.seen.get(key)
            if known is not None and known.before + known.cpu == cpu:
                continue
            # Read again when it ran: a fork shows its parent's command line until it execs.
            # An exiting process has none left: it keeps the one read before.
            command = _command_line(entry.path)
            if known is None:
                self.seen[key] = Seen(command or name, cpu, parent)
            else:
                known.cpu = cpu - known.before
                if command:
                    known.command = command

    def run(self) -> None:
        """Sample every `interval` until `stop` (meant for a thread of its own)."""
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """End `run` after its current sample."""
        self._stop.set()

    def by_kind(self) -> list[tuple[str, float, int]]:
        """(kind, CPU-seconds, processes that spent some), most CPU first."""
        cpu: dict[str, float] = {}
        count: Counter[str] = Counter()
        for seen in self.seen.values():
            if seen.cpu <= 0:
                continue
            name = kind(seen.command)
            cpu[name] = cpu.get(name, 0.0) + seen.cpu
            count[name] += 1
        ordered = sorted(cpu.items(), key=lambda item: -item[1])
        return [(name, seconds, count[name]) for name, seconds in ordered]


def _command_line(path: str) -> str:
    try:
        raw = Path(path, "cmdline").read_bytes()
    except OSError:
        return ""
    # Whole: a JVM's kind (its main class) comes after a class path of thousands of characters.
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def main(argv: list[str] | None = None) -> int:
    """Run the command under the census; print the table; the command's exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.cpu_census", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--top", type=int, default=30, help="rows of the table")
    parser.add_argument("--json", type=Path, default=None, help="keep every process's row here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --, e.g. -- make test")
    if not 0.01 <= args.interval <= 10:
        parser.error(f"--interval must be 0.01..10 seconds, not {args.interval}")
    if args.top < 1:
        parser.error(f"--top must be 1 or more, not {args.top}")
    if not (PROC / "stat").is_file():
        parser.error("no /proc/stat here: the census reads Linux's /proc")
    if args.json is not None and not os.access(args.json.parent, os.W_OK):
        parser.error(f"--json {args.json}: its directory is missing or not writable")
    census = Census(args.interval)
    sampler = threading.Thread(target=census.run, name="cpu-census", daemon=True)
    census.begin()
    busy0, idle0 = busy_idle()
    sampler.start()
    try:
        code = subprocess.call(command)
    except OSError as exc:
        parser.error(f"cannot run {command[0]}: {exc.strerror}")
    finally:
        census.stop()
        sampler.join()
    census.sample()
    busy1, idle1 = busy_idle()
    rows = census.by_kind()
    sampled = sum(seconds for _, seconds, _ in rows)
    print(
        f"\nmachine: {busy1 - busy0:.1f} CPU-seconds busy, {idle1 - idle0:.1f} idle",
        file=sys.stderr,
    )
    print(f"sampled: {sampled:.1f} CPU-seconds in {len(census.seen)} processes", file=sys.stderr)
    print(f"{'CPU-s':>8} {'procs':>6}  kind", file=sys.stderr)
    for name, seconds, count in rows[: args.top]:
        print(f"{seconds:8.1f} {count:6d}  {name}", file=sys.stderr)
    if args.json is not None:
        rows_out = [[pid, s.command, s.cpu, s.parent] for (pid, _), s in census.seen.items()]
        try:
            args.json.write_text(json.dumps(rows_out))
        except OSError as exc:  # a full disk after a long run: the table above stands
            print(f"cpu_census: error: --json {args.json}: {exc.strerror}", file=sys.stderr)
            return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
