"""The CPU census: what kind each command line is, `/proc` stat lines, a run measured."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tools.cpu_census import Census, kind, main, read_stat

PY = "/work/.venv/bin/python"
BURN = "while time.process_time() < 0.3: pass\n"
"""0.3 CPU-seconds, however busy the machine is."""


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"{PY} -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest worker (xdist)"),
        (f"{PY} -m api.cli serve --config /tmp/n1/server.properties", "mlog serve"),
        (f"{PY} -m tests.support.serve_forks 7", "mlog serve (forked)"),
        (f"{PY} -m api.cli --data-dir /tmp/d audit sql SELECT 1", "mlog audit sql"),
        ("/repo/.venv/bin/mlog --output json topics list", "mlog topics list"),
        (f"{PY} -m api.cli quorum format --config c --data-dir d", "mlog quorum format"),
        (
            "/usr/bin/java -cp jars/* org.apache.spark.deploy.SparkSubmit pyspark-shell",
            "java spark driver",
        ),
        (
            "/usr/bin/java -cp x org.apache.spark.deploy.master.Master --host 127.0.0.1",
            "java spark master",
        ),
        (
            "/usr/bin/java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend",
            "java spark executor",
        ),
        ("/usr/bin/java -XX:ArchiveClassesAtExit=/tmp/a.jsa -cp x Main", "java archive dump"),
        (
            "/usr/bin/java -Xshare:auto -XX:SharedArchiveFile=/c/spark-sql-parser-ab.jsa -cp x",
            "java sql parser",
        ),
        (f"{PY} -m pyspark.daemon pyspark.sql.worker.create_data_source", "pyspark python worker"),
        ("/usr/lib/chromium/chromium --type=renderer", "chromium"),
        (f"{PY} /repo/bench/quorum_bench.py --connections 2", "bench quorum_bench.py"),
        (f"{PY} -m tests.support.crash_writer /tmp/log", "python -m tests.support.crash_writer"),
        ("/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql", "postgres"),
        ("", "?"),
    ],
)
def test_each_command_line_is_named_by_its_kind(command: str, expected: str) -> None:
    assert kind(command) == expected


def test_a_stat_line_is_read_past_a_name_holding_spaces_and_parentheses() -> None:
    fields = ["S", "41"] + ["0"] * 9 + ["250", "50"] + ["0"] * 6 + ["12345", "0"]
    name, parent, cpu, started = read_stat("77 (a (b) c) " + " ".join(fields))
    assert (name, parent, started) == ("a (b) c", 41, 12345)
    assert cpu == pytest.approx(300 / 100)


@pytest.mark.process
def test_a_process_that_burns_cpu_is_counted_under_its_kind() -> None:
    # CPU time, not wall time: the child burns 0.3 CPU-seconds however busy the machine is,
    # then lives on so that a sample sees its total.
    burn = "import time\n" + BURN + "time.sleep(3)\n"
    census = Census(interval=0.05)
    sampler = threading.Thread(target=census.run, daemon=True)
    sampler.start()
    child = subprocess.Popen([sys.executable, "-c", burn])
    child.wait()
    census.stop()
    sampler.join()
    ours = [s for (pid, _), s in census.seen.items() if pid == child.pid]
    assert ours and ours[0].cpu >= 0.25


@pytest.mark.process
def test_the_command_runs_and_its_exit_code_is_the_census(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--interval", "0.05", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    err = capsys.readouterr().err
    assert "machine:" in err and "sampled:" in err and "kind" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "give the command to measure"),
        (["--interval", "0", "--", "true"], "--interval must be"),
        (["--top", "0", "--", "true"], "--top must be"),
        (["--", "/no/such/command"], "cannot run /no/such/command"),
        (["--json", "/no/such/dir/rows.json", "--", "true"], "missing or not writable"),
    ],
)
def test_bad_input_is_one_line_that_says_what_to_do(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.process
def test_what_a_process_spent_before_the_census_began_is_not_counted() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\n" + BURN + "time.sleep(60)\n"])
    try:
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 120
        while read_stat(stat.read_text())[2] < 0.25:  # the clock ticks: 0.3 may read 0.29
            assert time.monotonic() < deadline, "the child never burnt its CPU"
            time.sleep(0.05)
        census = Census(interval=0.05)
        census.begin()
        census.sample()
        ours = [s for (pid, _), s in census.seen.items() if pid == child.pid]
        assert ours and ours[0].before >= 0.25 and ours[0].cpu < 0.1
    finally:
        child.kill()
        child.wait()


@pytest.mark.process
def test_a_process_keeps_its_command_line_once_it_has_exited() -> None:
    # A zombie (exited, not yet waited for) has no command line left in /proc, only its name.
    census = Census(interval=0.05)
    census.begin()
    child = subprocess.Popen([sys.executable, "-c", "import time\n" + BURN])
    try:
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 120
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            census.sample()
            assert time.monotonic() < deadline, "the child never ended"
            time.sleep(0.01)
        census.sample()
        ours = [s for (pid, _), s in census.seen.items() if pid == child.pid]
        assert ours and "process_time" in ours[0].command and ours[0].cpu >= 0.25
    finally:
        child.wait()
