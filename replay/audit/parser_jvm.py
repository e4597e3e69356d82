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

import os
from collections.abc import Sequence
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

from replay.audit.sql_check import spark_parse_error

JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""Client JIT only and one GC thread: the parse runs once, beside the full Spark start."""

ANALYSIS_EXCEPTION = "org.apache.spark.sql.AnalysisException"
"""What Spark's parser raises for a statement it refuses (`ParseException` extends it)."""


def spark_jars() -> Path | None:
    """The directory of Spark's jars (`$SPARK_HOME/jars`, else pyspark's), None if absent."""
    home = os.environ.get("SPARK_HOME")
    candidate = Path(home or Path(pyspark.__file__).parent) / "jars"
    return candidate if candidate.is_dir() else None


def check_statements(statements: Sequence[str], *, log4j_config: str) -> bool:
    """Parse `statements` with Spark's parser in a JVM started for it, then end that JVM.

    Raises `AuditSqlError` (Spark's message, one line) for the first statement the parser
    refuses. True: every statement parsed; False: the parser could not be run (the caller
    parses them in Spark's own JVM instead).
    """
    jars = spark_jars()
    if jars is None or not statements:
        return False
    try:
        port, token, process = launch_gateway(
            classpath=str(jars / "*"),
            javaopts=[*JVM_OPTIONS, f"-Dlog4j2.configurationFile=file:{log4j_config}"],
            die_on_exit=True,
            java_path=None,  # $JAVA_HOME/bin/java when set, as Spark's scripts
            create_new_process_group=True,  # a Ctrl-C is ours to act on, not the JVM's
            enable_auth=True,
            return_proc=True,
        )
    except (OSError, ValueError):  # no java; a JVM that printed no port (it failed to start)
        return False
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(port=port, auth_token=token, auto_convert=False)
    )
    try:
        return _parse_all(gateway, statements)
    finally:
        _end(gateway, process)


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
