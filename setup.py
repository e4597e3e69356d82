"""Build the optional compiled block decoder (`records._fastdecode`); metadata is in pyproject.

Without a C compiler (or if the build fails for any reason) the install still succeeds and the
log is read through fastavro, about 2-3x slower for replay: see `records.fast_decode`.
Set MLOG_NO_EXTENSION=1 to skip the build on purpose.
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
            print(f"warning: compiled decoder not built ({exc}); using fastavro", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        """Build one extension, or warn and go on without it."""
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"warning: {ext.name} not built ({exc}); using fastavro", file=sys.stderr)


def _extensions() -> list[Extension]:
    if os.environ.get("MLOG_NO_EXTENSION"):
        return []
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional build dependency
    except ImportError:
        print("warning: Cython is missing; the compiled decoder is not built", file=sys.stderr)
        return []
    extension = Extension("records._fastdecode", ["records/_fastdecode.pyx"])
    built: list[Extension] = cythonize([extension], quiet=True)
    return built


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
