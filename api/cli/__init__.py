"""The `mlog` command line: one module per noun, plus shared parts (targets, tables, progress)."""

from api.cli.main import main

__all__ = ["main"]
