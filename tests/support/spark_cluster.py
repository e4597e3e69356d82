"""A real Spark standalone cluster for the tests: a master and two workers on 127.0.0.1.

Started from the launch classes in PySpark's own package (`org.apache.spark.deploy.master.
Master`, `org.apache.spark.deploy.worker.Worker`, with `<pyspark>/jars/*` on the class path,
what `sbin/start-master.sh` and `start-worker.sh` run), each JVM in a process group of its own.
Every port is chosen by the JVM itself (`--port 0`) and read from its log: the master's URL
from "Starting Spark master at spark://...", a worker's readiness from "Successfully
registered with master". Each worker has one core; an application's executors are separate
processes the workers start (in their process groups), whose Python workers run
`PYSPARK_PYTHON` (set here to this interpreter) with this repository on `PYTHONPATH`.

`SparkCluster.stop()` ends each JVM's whole process group (SIGTERM, then SIGKILL after a grace
period): the master, the workers, their executors and Python workers, so no JVM outlives the
cluster. Nothing else is given to the workers: an application that needs its executors to have
more of the environment (the S3 endpoint's credentials) must pass it itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.paths import REPO

START_TIMEOUT = 240.0
"""Seconds the master or a worker may take to be up (a JVM start on a loaded 2-core machine)."""
STOP_GRACE = 15.0
"""Seconds a process group gets after SIGTERM before SIGKILL."""
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
"""What each executor asks (`spark.executor.memory`): it must fit in a worker's memory."""
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""The daemons' JVMs: small heaps, client JIT and one GC thread, as the tests' drivers."""

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[^\s]+)")
_REGISTERED = "Successfully registered with master"

# Variables that would make the daemons differ from what the test gives them: a cluster
# configured elsewhere, another Spark's home, the S3 endpoint's credentials.
_DROPPED_ENV = (
    "SPARK_CONF_DIR",
    "SPARK_MASTER_HOST",
    "SPARK_WORKER_OPTS",
    "SPARK_DAEMON_JAVA_OPTS",
)


def spark_home() -> Path:
    """PySpark's package directory, which holds Spark's jars (`jars/`) like a Spark install."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scala_version(home: Path) -> str:
    """The Scala version Spark's jars were built for (`spark-core_2.13-...jar`: 2.13)."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    raise RuntimeError(f"no spark-core jar under {home / 'jars'}: is PySpark installed whole?")


def cluster_env(work: Path) -> dict[str, str]:
    """The environment of the daemons (and of the executors they start)."""
    env = {
        k: v for k, v in os.environ.items() if k not in _DROPPED_ENV and not k.startswith("AWS_")
    }
    home = spark_home()
    python_path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env.update(
        SPARK_HOME=str(home),
        # What Spark's bin/load-spark-env.sh exports: a worker builds its executors' class
        # path from it (without it, it looks for a source tree's build directories).
        SPARK_SCALA_VERSION=scala_version(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_WORKER_DIR=str(work / "work"),
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=python_path,
    )
    return env


@dataclass(slots=True)
class _Daemon:
    """One JVM of the cluster, its log lines collected by a thread."""

    name: str
    process: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def follow(self) -> None:
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            with self.changed:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str] | str, timeout: float) -> str:
        """The first log line matching `pattern`; fails the test (with the log) if none comes."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.changed:
            while True:
                for line in self.lines[seen:]:
                    if pattern.search(line) if isinstance(pattern, re.Pattern) else pattern in line:
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    tail = "\n".join(self.lines[-40:])
                    raise RuntimeError(
                        f"the Spark {self.name} did not log {pattern!r} (exit code "
                        f"{self.process.poll()}); its log ends:\n{tail}"
                    )
                self.changed.wait(min(left, 1.0))


def _launch(name: str, main_class: str, arguments: list[str], env: dict[str, str]) -> _Daemon:
    """Start `main_class` of Spark's jars in a JVM of its own process group."""
    java = shutil.which("java", path=env.get("PATH"))
    java_home = env.get("JAVA_HOME")
    if java_home:
        java = str(Path(java_home) / "bin" / "java")
    if java is None:
        raise RuntimeError("the Spark cluster needs Java 17 (`java` on PATH or JAVA_HOME)")
    classpath = f"{spark_home() / 'jars'}/*"
    command = [java, *JVM_OPTIONS, "-cp", classpath, main_class, *arguments]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    daemon = _Daemon(name=name, process=process)
    threading.Thread(target=daemon.follow, name=f"spark-{name}-log", daemon=True).start()
    return daemon


def _end_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """End `process`'s whole process group: SIGTERM, then SIGKILL after `grace` seconds."""
    pgid = process.pid  # start_new_session: the group is the process's own id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace)
    # Executors and Python workers the JVM started are in its group: whatever is left of it
    # (the JVM itself if it did not stop in time) is killed.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait()


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` is still running (zombies aside)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass(slots=True)
class SparkCluster:
    """A running standalone cluster: its master URL and its daemons."""

    master_url: str
    work: Path
    daemons: list[_Daemon]
    owns_work: bool = True

    @classmethod
    def start(cls, workers: int = 2, work: Path | None = None) -> SparkCluster:
        """Start a master and `workers` workers of one core each; wait until all registered."""
        owned = work is None
        base = Path(tempfile.mkdtemp(prefix="mlog-spark-cluster-")) if work is None else work
        env = cluster_env(base)
        daemons: list[_Daemon] = []
        cluster = cls(master_url="", work=base, daemons=daemons, owns_work=owned)
        try:
            master = _launch(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
                env,
            )
            daemons.append(master)
            found = _MASTER_URL.search(master.wait_for(_MASTER_URL, START_TIMEOUT))
            assert found is not None
            cluster.master_url = found[1]
            for n in range(workers):
                work_dir = base / f"worker-{n}"
                work_dir.mkdir(parents=True, exist_ok=True)
                daemons.append(
                    _launch(
                        f"worker {n}",
                        "org.apache.spark.deploy.worker.Worker",
                        [
                            "--host",
                            "127.0.0.1",
                            "--port",
                            "0",
                            "--webui-port",
                            "0",
                            "--cores",
                            "1",
                            "--memory",
                            WORKER_MEMORY,
                            "--work-dir",
                            str(work_dir),
                            cluster.master_url,
                        ],
                        env,
                    )
                )
            for worker in daemons[1:]:
                worker.wait_for(_REGISTERED, START_TIMEOUT)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def conf(self) -> dict[str, str]:
        """Settings for an application on this cluster: executors that fit the workers.

        Few shuffle partitions (Spark's 200 are 200 tasks per shuffle on two cores, for
        queries over a few hundred entries) and executors' JVMs with client JIT and one GC
        thread, as the tests' drivers (tests/conftest.py's SPARK_TEST_JVM_OPTIONS). Spark's own
        defaults for generated code and adaptive execution, which the other tests' drivers
        turn off for their tiny logs: a deployment's path stays tested here.
        """
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.sql.shuffle.partitions": "4",
            "spark.executor.defaultJavaOptions": " ".join(JVM_OPTIONS[1:]),
            "spark.sql.codegen.wholeStage": "true",
            "spark.sql.codegen.factoryMode": "FALLBACK",
            "spark.sql.adaptive.enabled": "true",
        }

    def executor_logs(self) -> list[Path]:
        """The stderr files of every executor the workers started so far."""
        return sorted(self.work.glob("worker-*/app-*/*/stderr"))

    def stop(self) -> None:
        """End every process of the cluster (workers first, then the master)."""
        for daemon in reversed(self.daemons):
            _end_group(daemon.process, STOP_GRACE)
        if self.owns_work:
            shutil.rmtree(self.work, ignore_errors=True)

    @property
    def process_groups(self) -> list[int]:
        """The process group of each daemon (its executors are in its worker's group)."""
        return [daemon.process.pid for daemon in self.daemons]


@contextlib.contextmanager
def spark_cluster(workers: int = 2) -> Iterator[SparkCluster]:
    """A cluster for the block, stopped after it whatever happens."""
    cluster = SparkCluster.start(workers)
    try:
        yield cluster
    finally:
        cluster.stop()
