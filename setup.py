"""Build the optional compiled helpers; the package's metadata is in pyproject.

- `records._fastdecode`, the block decoder: without it the log is read through fastavro,
  about 2-3x slower for replay (`records.fast_decode`);
- `replay.sql._partition_rows`, which builds a snapshot's partition records from its rows:
  without it they are built in Python, about twice as slowly (`replay.sql.topic_builder`);
- `replay.sql._sqlite_rows`, which reads a SQLite snapshot's partition rows through SQLite's
  C API into those records (SQLite's headers, Debian's libsqlite3-dev): without it they are
  read through the sqlite3 module, a 1M-partition start 1.28x as long (`replay.sql.partition_runs`);
- `replay.sql._row_runs`, which builds those records from a database's rows read in C, and
  `replay.sql._pg_copy_rows`, which reads a PostgreSQL snapshot's partition rows by COPY through
  psycopg's own libpq (no header or library needed to build it): without them, the rows are
  read through the driver (`replay.sql.partition_runs`);
- `replay.sql._topic_adder`, which adds each topic those runs built to the snapshot's image:
  without it that is done in Python (`replay.sql.topic_builder`);
- `replay._untrack`, which keeps the image's map nodes out of the cyclic collector's walks:
  without it they are walked, as any container is (`replay.map_nodes`);
- `metadata_log._syncer`, the thread that writes and fdatasyncs without the interpreter lock:
  without it those jobs run on a Python worker thread (`metadata_log.syncer`);
- `api.protocol._native_reader` and `_native_writer`, the server's reader of plain requests
  and writer of plain answers: without them the generated readers and writers do all of it
  (`api.protocol.native_reader`, `api.protocol.native_writer`).

Without a C compiler (or if a build fails for any reason) the install still succeeds, without
that helper. Set MLOG_NO_EXTENSION=1 to skip the builds on purpose.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the extension only makes reads faster."""

    def run(self) -> None:
        """Build, or warn and go on without the extension."""
        try:
            super().run()
        except Exception as exc:
            print(f"warning: compiled helpers not built ({exc}); going on without", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        """Build one extension, or warn and go on without it."""
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"warning: {ext.name} not built ({exc}); going on without it", file=sys.stderr)


def _extensions() -> list[Extension]:
    if os.environ.get("MLOG_NO_EXTENSION"):
        return []
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional build dependency
    except ImportError:
        print("warning: Cython is missing; the compiled helpers are not built", file=sys.stderr)
        return []
    extensions = [
        Extension("records._fastdecode", ["records/_fastdecode.pyx"]),
        Extension("replay._untrack", ["replay/_untrack.pyx"]),
        Extension("replay.sql._partition_rows", ["replay/sql/_partition_rows.pyx"]),
        Extension("replay.sql._row_runs", ["replay/sql/_row_runs.pyx"]),
        Extension("replay.sql._topic_adder", ["replay/sql/_topic_adder.pyx"]),
        Extension("replay.sql._pg_copy_rows", ["replay/sql/_pg_copy_rows.pyx"]),
        Extension(
            "replay.sql._sqlite_rows", ["replay/sql/_sqlite_rows.pyx"], libraries=["sqlite3"]
        ),
        Extension("metadata_log._syncer", ["metadata_log/_syncer.pyx"]),
        Extension("api.protocol._native_reader", ["api/protocol/_native_reader.pyx"]),
        Extension("api.protocol._native_writer", ["api/protocol/_native_writer.pyx"]),
    ]
    built: list[Extension] = cythonize(extensions, quiet=True)
    return built


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
