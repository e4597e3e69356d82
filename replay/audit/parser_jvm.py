"""Spark's SQL parser in a small JVM of its own, to report a syntax error before Spark is up.

`mlog audit sql` checks its statement with Spark's own parser (`SparkSqlParser`), so an error
is Spark's own message. In the JVM PySpark starts, that parse can only begin once
`spark-submit` has launched it (two JVMs in turn: Spark's launcher, then the driver), 2.7-3 s
into the command on an idle 2-core machine. Here the parser runs in a JVM started directly
(`java -cp <Spark's jars> py4j.GatewayServer`, through py4j), beside the full start rather
than before it (`session.audit_session` runs both at once): no launcher, no SparkSubmit,
client-only JIT (`-XX:TieredStopAtLevel=1`: the C2 compiler's threads would take CPU from the
full start for a parse that runs once) and Spark's logging quietened by our log4j2 config.

Spark's jars are found at run time: `$SPARK_HOME/jars`, else the `jars` directory of the
installed `pyspark`. The whole directory is the classpath: the parser's first use loads about
5,000 classes (the SQL config, log4j, jackson for the error texts) whichever jars are listed,
and a hand-picked list measured no cheaper (2.3 CPU-seconds either way) while it would break
with the next Spark's jar names.

Anything else than a parse error (no Java, no jars, a JVM that dies) is not the statement's
fault: `check_statements` then answers False and the caller parses in Spark's own JVM, as
before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyspark
from py4j.java_gateway import (  # type: ignore[import-untyped]  # py4j ships no type hints
    GatewayParameters,
    JavaClass,
    JavaGateway,
    is_instance_of,
    launch_gateway,
)
from py4j.protocol import Py4JError, Py4JJavaError  # type: ignore[import-untyped]  # as above

from replay.audit.errors import AuditSqlError
from replay.audit.sql_check import spark_parse_error

JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""Client JIT only and one GC thread: the parse runs once, beside the full Spark start."""

ARCHIVE_FORMAT = "mlog-sql-parser-1"
"""Part of the archive's name: a new value when what the archive holds changes."""

KEPT_ARCHIVES = 2
"""Archives of one kind kept in the cache directory (the newest): one a Java and Spark install,
and the one before it for a second install used beside it."""

BUILD_MIN_FREE_BYTES = 2 << 30
"""Free bytes a build needs where the archive is kept: a driver's draft is ~160 MB, and an
archive is not worth a full disk to the controller's log beside it (a build on a full disk
fails and publishes nothing, but fills it while it runs)."""

ARCHIVE_BUILD_S = 600.0
"""How long building the archive may take before another run may try again."""

ANALYSIS_EXCEPTION = "org.apache.spark.sql.AnalysisException"
"""What Spark's parser raises for a statement it refuses (`ParseException` extends it)."""


def spark_jars() -> Path | None:
    """The directory of Spark's jars (`$SPARK_HOME/jars`, else pyspark's), None if absent."""
    home = os.environ.get("SPARK_HOME")
    candidate = Path(home or Path(pyspark.__file__).parent) / "jars"
    return candidate if candidate.is_dir() else None


def java_executable() -> str | None:
    """The `java` Spark's scripts would run: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.is_file() else None
    return shutil.which("java")


def archive_path(
    jars: Path,
    java: str,
    *,
    name: str = "spark-sql-parser",
    facts_of_use: Sequence[str] = (ARCHIVE_FORMAT, *JVM_OPTIONS),
) -> Path | None:
    """Where the class-data-sharing archive `name` for this `java` and these jars is kept.

    Its name is a digest of what the JVM checks an archive against (the java binary, every
    jar's name, size and time) and of `facts_of_use` (what it holds, the options): another
    Java or Spark gets another archive. None when there is no cache directory to keep it in.
    (`replay.audit.driver_archive` keeps Spark's driver's archive the same way.)
    """
    try:
        real = Path(java).resolve()
        facts = [*facts_of_use[:1], str(real), *facts_of_use[1:]]  # the format first
        stat = real.stat()
        facts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
        for jar in sorted(jars.iterdir()):
            info = jar.stat()
            facts.append(f"{jar.name}:{info.st_size}:{info.st_mtime_ns}")
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mlog"
    except (OSError, RuntimeError):  # no home directory, a jar gone meanwhile
        return None
    digest = hashlib.sha256("\n".join(facts).encode()).hexdigest()[:20]
    return cache / f"{name}-{digest}.jsa"


def check_statements(statements: Sequence[str], *, log4j_config: str) -> bool:
    """Parse `statements` with Spark's parser in a JVM started for it, then end that JVM.

    Raises `AuditSqlError` (Spark's message, one line) for the first statement the parser
    refuses. True: every statement parsed; False: the parser could not be run (the caller
    parses them in Spark's own JVM instead). The JVM maps the class-data-sharing archive of
    an earlier run if there is one; else one is built for the next runs, in the background.
    """
    jars = spark_jars()
    java = java_executable()
    if jars is None or java is None or not statements:
        return False
    archive = archive_path(jars, java)
    sharing: list[str] = []
    if archive is not None and archive.is_file():
        sharing = [f"-XX:SharedArchiveFile={archive}"]
    elif archive is not None:
        build_archive_in_background(archive, log4j_config)
    launched = _launch(jars, java, [*sharing, _log4j_option(log4j_config)])
    if launched is None:
        if sharing and archive is not None:
            archive.unlink(missing_ok=True)  # unusable (a JVM update it missed): built anew
        return False
    gateway, process = launched
    try:
        return _parse_all(gateway, statements)
    finally:
        _end(gateway, process)


def _log4j_option(log4j_config: str) -> str:
    return f"-Dlog4j2.configurationFile=file:{log4j_config}"


def _launch(jars: Path, java: str, options: Sequence[str]) -> tuple[Any, Any] | None:
    """A py4j gateway to a new JVM with Spark's jars, and its process; None if it failed."""
    # The JVM's warnings go to its stderr (dropped), never to the stdout py4j reads the
    # port from; a crash report goes to the temporary directory, not the user's.
    crash = Path(tempfile.gettempdir()) / "mlog-sql-parser-hs_err_%p.log"
    try:
        port, token, process = launch_gateway(
            classpath=str(jars / "*"),
            javaopts=[
                *JVM_OPTIONS,
                "-Xlog:disable",
                "-Xlog:all=warning:stderr",
                f"-XX:ErrorFile={crash}",
                *options,
            ],
            die_on_exit=True,
            java_path=java,
            create_new_process_group=True,  # a Ctrl-C is ours to act on, not the JVM's
            enable_auth=True,
            return_proc=True,
        )
    except (OSError, ValueError):  # no java; a JVM that printed no port (it failed to start)
        return None
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(port=port, auth_token=token, auto_convert=False)
    )
    return gateway, process


def _parse_all(gateway: Any, statements: Sequence[str]) -> bool:
    """True once every statement parsed; `AuditSqlError` for a refused one; False on failure."""
    try:
        parser_class = gateway.jvm.org.apache.spark.sql.execution.SparkSqlParser
        if not isinstance(parser_class, JavaClass):  # py4j's answer for a class not found
            return False
        parser = parser_class()
        for statement in statements:
            try:
                parser.parsePlan(statement)
            except Py4JJavaError as exc:
                java = exc.java_exception
                if not is_instance_of(gateway, java, ANALYSIS_EXCEPTION):
                    return False  # not the statement's fault (a missing class, ...)
                raise spark_parse_error(str(java.getMessage() or java.toString())) from None
    except Py4JError:  # the JVM is gone, or Spark's classes are not there
        return False
    return True


def _end(gateway: Any, process: Any) -> None:
    """Close the connection and end the parser's JVM (it holds nothing worth a clean exit)."""
    try:
        gateway.close()
    finally:
        process.kill()
        process.wait()


# ---------------------------------------------------------------------- the archive

TRAINING = ("SELECT a, count(*) FROM t WHERE b = 1 GROUP BY a", "SELECT a FROM t WHERE b = = 1")
"""What the archive's JVM parses: a statement, and one refused (its error's classes too)."""


def build_archive_in_background(
    archive: Path, *args: str, module: str = "replay.audit.parser_jvm"
) -> None:
    """Build `archive` in a detached process (`python -m <module> <archive> <args...>`), once.

    Nothing waits for it: this run goes without the archive, the next ones with it. A
    build already under way (its lock file younger than `ARCHIVE_BUILD_S`) is left alone, and
    none starts where less than `BUILD_MIN_FREE_BYTES` are free.
    """
    lock = archive.with_name(archive.name + ".lock")
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(archive.parent).free < BUILD_MIN_FREE_BYTES:
            return
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > ARCHIVE_BUILD_S:
                lock.unlink()  # a build that died: try again
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:  # a build under way, or no cache directory to write to
        return
    try:
        subprocess.Popen(
            [sys.executable, "-m", module, str(archive), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command; a Ctrl-C here does not reach it
        )
    except OSError:
        lock.unlink(missing_ok=True)


def build_archive(archive: Path, log4j_config: str) -> bool:
    """Build `archive`: run the parser once with `-XX:ArchiveClassesAtExit`, check, publish.

    The JVM writes the archive as it exits; it is used only if a JVM started with it
    (`-Xshare:on`: refuse rather than ignore) parses again, and only then renamed into place,
    so a half-written archive (which crashes the JVM that maps it) is never published.
    """
    jars = spark_jars()
    java = java_executable()
    if jars is None or java is None:
        return False
    extra = [_log4j_option(log4j_config)]
    return dump_and_publish(archive, lambda options: _train(jars, java, [*options, *extra]))


def dump_and_publish(archive: Path, train: Callable[[list[str]], bool]) -> bool:
    """An archive's build: `train` a JVM that dumps a draft, then one that must map it.

    `train(options)` runs a JVM with `options` through its work and lets it exit, and says
    whether all went well. The first run's options dump the draft as the JVM exits
    (`-XX:ArchiveClassesAtExit`), the second's map it and refuse rather than ignore it
    (`-Xshare:on`); only then is the draft renamed to `archive`. The draft and the build's
    lock file are gone when this returns; of the archives of its kind (another Java, another
    Spark install: each reinstall of the jars is another digest) the `KEPT_ARCHIVES` newest
    stay, so the cache does not grow by an archive at every install.
    """
    draft = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        if train([f"-XX:ArchiveClassesAtExit={draft}"]) and train(
            ["-Xshare:on", f"-XX:SharedArchiveFile={draft}"]
        ):
            os.replace(draft, archive)
            _prune(archive)
            return True
        return False
    except OSError:
        return False
    finally:
        draft.unlink(missing_ok=True)
        archive.with_name(archive.name + ".lock").unlink(missing_ok=True)


def _prune(archive: Path) -> None:
    """Delete the archives of `archive`'s kind but the `KEPT_ARCHIVES` newest."""
    kind = re.compile(re.escape(archive.name.rsplit("-", 1)[0]) + r"-[0-9a-f]{20}\.jsa")
    found = []
    for path in archive.parent.iterdir():
        if kind.fullmatch(path.name):
            with contextlib.suppress(OSError):  # deleted meanwhile by another build
                found.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(found, reverse=True)[KEPT_ARCHIVES:]:
        if path != archive:
            path.unlink(missing_ok=True)  # a JVM mapping it keeps its pages


def _train(jars: Path, java: str, options: Sequence[str]) -> bool:
    """Run the parser on `TRAINING` in a JVM with `options`, let it exit; whether all went well."""
    launched = _launch(jars, java, options)
    if launched is None:
        return False
    gateway, process = launched
    parsed = False
    try:
        good, bad = TRAINING
        if _parse_all(gateway, [good]):
            try:
                _parse_all(gateway, [bad])
            except AuditSqlError:  # refused, as it must be: its error's classes are loaded
                parsed = True
    finally:
        gateway.close()
        process.stdin.close()  # end of input: the JVM exits (and writes an archive it dumps)
    try:
        return parsed and process.wait(ARCHIVE_BUILD_S) == 0
    except subprocess.TimeoutExpired:
        process.kill()
        return False


if __name__ == "__main__":
    sys.exit(0 if build_archive(Path(sys.argv[1]), sys.argv[2]) else 1)
