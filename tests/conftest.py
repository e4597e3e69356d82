"""Suite-wide settings, the markers each directory implies, and the shared fixtures.

Markers (registered in pyproject.toml, `--strict-markers`): `process` (starts real processes:
`mlog serve`, crash writers, quorum nodes, interpreters whose imports are checked), `spark` (a
JVM), `postgres` (a PostgreSQL server), `interop` (clients we did not write). `make test-fast`
deselects all four.
"""

from __future__ import annotations

import gc
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy.engine import make_url

from tests.support.paths import TESTS
from tests.support.s3_endpoint import S3Endpoint
from tests.support.schedule import spread
from tests.support.sql_backends import BACKENDS, DEFAULT_POSTGRES_URL, libpq
from tests.support.sweeps import SWEEP_STRIDE, sampled_examples

# Hypothesis' per-example deadline is a timing assertion: on a loaded 2-core CI machine a first
# example that imports and compiles codecs lazily can take longer than 200 ms. The suite asserts
# behaviour only; speed is measured by the scripts under bench/.
settings.register_profile("mlog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mlog")

# A suite started in the background (`make test &`, nohup, a CI runner's shell) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: the Ctrl-C tests' commands would
# never see their Ctrl-C. A handled signal is reset to the default at exec, so handle it here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SPARK_TEST_JVM_OPTIONS = " ".join(
    (
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dspark.sql.codegen.wholeStage=false",
        "-Dspark.sql.codegen.factoryMode=NO_CODEGEN",
        "-Dspark.sql.adaptive.enabled=false",
    )
)
"""Options of every Spark driver JVM the tests start (`spark-submit` adds `SPARK_SUBMIT_OPTS`),
in a test's own process or in a child `mlog audit` or bench, which inherit the environment.

Client JIT only and one GC thread, as `replay/audit/parser_jvm.py` starts its parser: a test's
queries run over logs of a few hundred entries, where the C2 compiler's threads were half of a
session's CPU (a start and seven queries: 22.8 CPU-seconds in the JVM, 12.1 without C2; the
tests marked `spark`, 311 CPU-seconds against 211). And Spark's defaults for these sizes: a
driver reads `spark.*` system properties as its configuration's defaults, so no generated
code compiled per query (whole-stage and expression codegen: Janino's compiles were a fifth
of test_audit.py's CPU) and no adaptive re-planning of each stage (a tenth): test_audit.py
70.3 -> 52.8 CPU-seconds. A session's own settings still win: the cluster test runs Spark's
defaults (tests/support/spark_cluster.py), so the generated-code path stays tested. A value
set in the environment is kept."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_TEST_JVM_OPTIONS)

DIRECTORY_MARKERS = {
    TESTS / "system": ("process",),
    TESTS / "interop": ("interop",),
}
"""Every test under these directories carries these markers."""

FIXTURE_MARKERS = {
    "postgres_server": "postgres",
    "spark": "spark",
}
"""A test that uses one of these fixtures (directly or through another) carries the marker."""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark each test of the directories and fixtures above as it is collected.

    Marked here, before `-m` deselects, so that the markers select; in a sampled run
    (`MLOG_SWEEP_STRIDE`, the fast tier) each property test runs a share of its examples,
    whatever its own `@settings` asks (tests/support/sweeps.py)."""
    if SWEEP_STRIDE > 1:
        sample_examples(item)
    path = Path(item.path)
    for directory, names in DIRECTORY_MARKERS.items():
        if path.is_relative_to(directory):
            for name in names:
                item.add_marker(name)
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in FIXTURE_MARKERS:
            item.add_marker(FIXTURE_MARKERS[fixture])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the run: the slow files spread over the workers' shares
    (tests/support/schedule.py). Last, after `-m` deselected: the shares are cut from what
    runs."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = spread(items, workers, reads_the_source_tree)


def sample_examples(item: pytest.Item) -> None:
    """Give a Hypothesis test of `item` `sampled_examples` of its examples, once per function.

    Hypothesis reads a test's settings when it runs, from the attribute `@settings` and `@given`
    set on it; the test's own values (deadline, health checks) are kept."""
    test = getattr(getattr(item, "function", None), "__func__", getattr(item, "function", None))
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or getattr(test, "_mlog_sampled", False):
        return
    test._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
        current, max_examples=sampled_examples(current.max_examples)
    )
    test._mlog_sampled = True  # type: ignore[union-attr]


def reads_the_source_tree(item: pytest.Item) -> bool:
    """Whether `item`'s module uses tests/support/source_tree.py (a static check).

    Parsing the whole tree costs about 6 CPU-seconds in each process that does it; the static
    checks run side by side, so they mostly run in one worker and parse it once."""
    module = getattr(item, "module", None)
    return module is not None and any(
        getattr(value, "__module__", None) == "tests.support.source_tree"
        for value in vars(module).values()
    )


# ---------------------------------------------------------------------- object storage


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """An S3-compatible endpoint on 127.0.0.1 (moto's server) with a bucket, for the session.

    Tests reach it with its `env` (os.environ for this process, a child's environment, Spark's
    `spark.executorEnv.*`); each test writes under a prefix of its own.
    """
    endpoint = S3Endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


# ---------------------------------------------------------------------- databases


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The SQLAlchemy URL of a database created for this test run (dropped afterwards)."""
    base = os.environ.get("MLOG_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        admin = psycopg.connect(libpq(base), autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        reason = f"PostgreSQL at {make_url(base).render_as_string()} is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: both backends must be tested)")
        pytest.skip(f"{reason}; set MLOG_TEST_POSTGRES_URL to test PostgreSQL")
    name = f"mlog_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh schema in the run's database, as a URL whose search_path points at it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq(postgres_server), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(postgres_server).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(libpq(postgres_server), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'snapshots.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(autouse=True)
def _collector_policy_ends_with_its_test() -> Iterator[None]:
    """The cyclic collector's switch, callbacks and thresholds put back after every test.

    A quorum node or server started in the test's process sets the collector's policy
    (`api.service.gc_policy`) for the whole process, as it should in production; in a test
    worker it would stay for the tests after it (a node left running, a loop closed under a
    mass change: the collector off for every later test of that worker). Frozen objects
    stay frozen (an unfreeze would have the next collection walk every test's leftovers).
    """
    enabled = gc.isenabled()
    callbacks = list(gc.callbacks)
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()


@pytest.fixture
def collector() -> Iterator[None]:
    """No collector callbacks during the test; its switch put back, all unfrozen, after (the
    callbacks and thresholds: `_collector_policy_ends_with_its_test`, set up before it)."""
    enabled = gc.isenabled()
    gc.callbacks.clear()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()
