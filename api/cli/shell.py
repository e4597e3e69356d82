"""`mlog shell`: an interactive shell over the image tree, with time travel.

Like Kafka's metadata shell: `ls`, `cd`, `cat`, `tree`, `find`, `pwd` walk the image as a tree
of paths (`/topics/byName/orders/0`); `at` moves the whole tree to another offset or time,
`diff` lists what changed between the shown image and another point, `history` lists the log
entries that touched what the current directory shows. Sans-IO in spirit: `run(line)` takes one
command line and writes to the given stream, so tests and `mlog shell -c` drive it without a
terminal.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    add_archive_options,
    add_global_options,
    offset_arg,
)
from api.cli.image_tree import Directory, Leaf, Node, PathError, lookup, walk
from api.cli.interrupts import wait_for_input
from api.cli.output import format_time
from api.cli.targets import note_batch_end, open_history
from api.service.snapshots import existing_store
from records.errors import MetadataLogError
from records.uuids import Uuid
from replay.timetravel import (
    Entity,
    diff,
    history,
    image_at,
    point_offset,
)

if TYPE_CHECKING:
    from api.service.settings import Settings
    from metadata_log.stored_log import StoredLog
    from replay.image import MetadataImage
    from replay.sql.store import SnapshotStore

HELP = """\
commands:
  ls [PATH]             list a directory (directories end with /)
  cd [PATH]             change directory (.. goes up, / is the root)
  cat PATH              print a leaf as JSON
  tree [PATH]           every leaf under PATH with its value
  find [PATH] TEXT      paths under PATH that contain TEXT
  pwd                   the current directory
  at OFFSET|TIME        show the image at another offset (or ISO-8601 time)
  diff OFFSET|TIME      what changed from the shown image to another point
  history [PATH]        log entries that touched a topic, namespace, broker or user (PATH or here)
  help                  this text
  exit                  leave the shell"""


class ShellExit(Exception):
    """`exit` was typed."""


class ShellError(MetadataLogError):
    """A shell command was malformed; the message says how to use it."""


class ImageShell:
    """The state of one shell session: where in the tree, and at which point of the log."""

    def __init__(
        self, log: StoredLog, store: SnapshotStore | None, image: MetadataImage, out: TextIO
    ) -> None:
        self.log = log
        self.store = store
        self.image = image
        self.out = out
        self.cwd: list[str] = []
        self._commands: dict[str, Callable[[list[str]], None]] = {
            "ls": self._ls,
            "cd": self._cd,
            "cat": self._cat,
            "tree": self._tree,
            "find": self._find,
            "pwd": self._pwd,
            "at": self._at,
            "diff": self._diff,
            "history": self._history,
            "help": self._help,
        }

    @property
    def prompt(self) -> str:
        """`[offset N] /path $ `."""
        return f"[offset {self.image.provenance.offset}] {self._path(self.cwd)} $ "

    def run(self, line: str) -> None:
        """Run one command line; raises ShellExit on `exit`, ShellError on a bad command."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise ShellError(f"cannot parse {line!r}: {exc}") from None
        if not words:
            return
        name, args = words[0], words[1:]
        if name in ("exit", "quit"):
            raise ShellExit
        command = self._commands.get(name)
        if command is None:
            raise ShellError(f"unknown command {name!r}; `help` lists the commands")
        command(args)

    # ------------------------------------------------------------------ paths

    @staticmethod
    def _path(parts: list[str]) -> str:
        return "/" + "/".join(parts)

    def _resolve(self, path: str | None) -> list[str]:
        if path is None:
            return list(self.cwd)
        parts = [] if path.startswith("/") else list(self.cwd)
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                parts = parts[:-1]
            else:
                parts.append(part)
        return parts

    def _node(self, parts: list[str]) -> Node:
        try:
            return lookup(self.image, self._path(parts))
        except PathError:
            raise ShellError(
                f"{self._path(parts)}: no such path at offset {self.image.provenance.offset}"
            ) from None

    @staticmethod
    def _one_path(args: list[str], command: str) -> str | None:
        if len(args) > 1:
            raise ShellError(f"{command} takes at most one path")
        return args[0] if args else None

    # ------------------------------------------------------------------ commands

    def _ls(self, args: list[str]) -> None:
        parts = self._resolve(self._one_path(args, "ls"))
        node = self._node(parts)
        if isinstance(node, Leaf):
            self.out.write(f"{parts[-1] if parts else '/'}\n")
            return
        for name in node.list_children():
            child = node.child(name)
            self.out.write(f"{name}/\n" if isinstance(child, Directory) else f"{name}\n")

    def _cd(self, args: list[str]) -> None:
        path = self._one_path(args, "cd")
        parts = [] if path is None else self._resolve(path)
        if not isinstance(self._node(parts), Directory):
            raise ShellError(f"{self._path(parts)} is not a directory")
        self.cwd = parts

    def _cat(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("cat takes one path, e.g. cat /topics/byName/orders/0")
        parts = self._resolve(args[0])
        node = self._node(parts)
        if isinstance(node, Directory):
            raise ShellError(f"{self._path(parts)} is a directory; use ls or tree")
        self.out.write(json.dumps(node.value, indent=2) + "\n")

    def _tree(self, args: list[str]) -> None:
        parts = self._resolve(self._one_path(args, "tree"))
        prefix = "" if not parts else self._path(parts)
        for path, value in walk(self._node(parts), prefix):
            shown = "" if value is None else json.dumps(value, separators=(",", ":"))
            self.out.write(f"{path}  {shown}".rstrip() + "\n")

    def _find(self, args: list[str]) -> None:
        if not args or len(args) > 2:
            raise ShellError("find takes [PATH] TEXT, e.g. find /topics orders")
        path, text = (None, args[0]) if len(args) == 1 else (args[0], args[1])
        parts = self._resolve(path)
        prefix = "" if not parts else self._path(parts)
        for found, _ in walk(self._node(parts), prefix):
            if text in found:
                self.out.write(found + "\n")

    def _pwd(self, args: list[str]) -> None:
        self.out.write(self._path(self.cwd) + "\n")

    def _point(self, args: list[str], command: str) -> int:
        if len(args) != 1:
            raise ShellError(f"{command} takes one offset or ISO-8601 time")
        return point_offset(self.log, args[0])

    def _at(self, args: list[str]) -> None:
        offset = self._point(args, "at")
        self.image = image_at(self.log, self.store, at_offset=offset)
        self.out.write(f"now at offset {offset}\n")
        while self.cwd:
            try:
                lookup(self.image, self._path(self.cwd))
                break
            except PathError:
                self.cwd = self.cwd[:-1]

    def _diff(self, args: list[str]) -> None:
        offset = self._point(args, "diff")
        other = image_at(self.log, self.store, at_offset=offset)
        here = self.image.provenance.offset
        changes = diff(self.image, other) if offset >= here else diff(other, self.image)
        if not changes:
            self.out.write("no changes\n")
        for change in changes:
            self.out.write(change.text() + "\n")

    def _history(self, args: list[str]) -> None:
        entity = _entity_of(self._resolve(self._one_path(args, "history")))
        if entity is None:
            raise ShellError(
                "history needs a topic, namespace or broker: give a path like "
                "/topics/byName/NAME, /namespaces/NAME or /brokers/ID, or cd into a topic"
            )
        lte = self.image.provenance.offset
        for item in history(self.log, entity, lte=lte):
            incarnation = f" [{item.topic_id}]" if item.topic_id else ""
            self.out.write(
                f"{item.offset}  {format_time(item.timestamp)}  {item.principal or '-'}  "
                f"{item.description}{incarnation}\n"
            )

    def _help(self, args: list[str]) -> None:
        self.out.write(HELP + "\n")


def _entity_of(cwd: list[str]) -> Entity | None:
    if len(cwd) >= 3 and cwd[0] == "topics" and cwd[1] == "byName":
        return Entity(topic=cwd[2])
    if len(cwd) >= 3 and cwd[0] == "topics" and cwd[1] == "byId":
        try:
            return Entity(topic_id=Uuid.parse(cwd[2]))
        except ValueError:
            return None
    if len(cwd) >= 2 and cwd[0] == "namespaces":
        return Entity(namespace=cwd[1])
    if len(cwd) >= 2 and cwd[0] == "brokers" and cwd[1].isdigit():
        return Entity(broker=int(cwd[1]))
    if len(cwd) >= 2 and cwd[0] == "users" and cwd[1]:
        return Entity(user=urllib.parse.unquote(cwd[1]))  # the tree escapes '/' and '%'
    return None


# ---------------------------------------------------------------------- the command


def cmd_shell(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """An interactive shell over the image tree; -c runs commands and exits.

    With `--archive-url`, `at`, `diff` and `history` reach below the local log start.
    """
    with open_history(settings, args) as history, history.reader() as log:
        store = existing_store(settings)
        try:
            return _session(args, log, store, out)
        finally:
            if store is not None:
                store.close()


def _session(
    args: argparse.Namespace, log: StoredLog, store: SnapshotStore | None, out: TextIO
) -> int:
    offset = args.at_offset
    if args.at_time is not None:
        offset = point_offset(log, args.at_time)
    image = image_at(log, store, at_offset=offset)
    if args.at_offset is not None:
        note_batch_end(args.at_offset, image)
    shell = ImageShell(log, store, image, out)
    if args.command is not None:
        return _run_lines(shell, args.command.split(";"), stop_on_error=True)
    interactive = sys.stdin.isatty()
    if interactive:
        out.write("metadata-log shell; `help` lists the commands\n")
    while True:
        if interactive:
            out.write(shell.prompt)
            out.flush()
            wait_for_input(sys.stdin.fileno())
        line = sys.stdin.readline()
        if not line:
            return EXIT_OK
        code = _run_lines(shell, [line], stop_on_error=not interactive)
        if code != EXIT_OK and not interactive:
            return code
        if code == -1:
            return EXIT_OK


def _run_lines(shell: ImageShell, lines: list[str], *, stop_on_error: bool) -> int:
    for line in lines:
        try:
            shell.run(line)
        except ShellExit:
            return -1 if not stop_on_error else EXIT_OK
        except (ShellError, MetadataLogError) as exc:
            print(f"mlog shell: {exc}", file=sys.stderr)
            if stop_on_error:
                return EXIT_ERROR
    return EXIT_OK


def add_verbs(shell: argparse.ArgumentParser) -> None:
    """The flags of `mlog shell`, on its parser."""
    add_global_options(shell)
    shell.add_argument("-c", dest="command", help="run commands (';'-separated) and exit")
    when = shell.add_mutually_exclusive_group()
    when.add_argument("--at-offset", type=offset_arg, help="start at offset N")
    when.add_argument("--at-time", metavar="T", help="start at a time (ISO-8601 or epoch ms)")
    add_archive_options(shell)
    shell.set_defaults(handler=cmd_shell)
