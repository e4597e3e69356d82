"""What a CLI command runs against: the targets of `api.targets`, chosen from the flags.

`open_target` opens the data directory (`LocalTarget`) or the server of `--bootstrap-server`
(`RemoteTarget`, logged in as the client config of `--command-config` or MLOG_COMMAND_CONFIG
says); `describe_quorum` and `change_voters` are the quorum's calls, through a server only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from api.cli.common import CliError, given_principal
from api.history_dir import ARCHIVE_URL_ENV, ArchiveSource, HistoryDir, default_cache_dir
from api.service.settings import Settings
from api.targets import LocalTarget, RemoteTarget, Target

COMMAND_CONFIG_ENV = "MLOG_COMMAND_CONFIG"
"""The environment variable naming the client config when `--command-config` is not given."""

if TYPE_CHECKING:
    import argparse

    from api.security.client_config import ClientSecurity
    from replay.image import MetadataImage


def describe_quorum(settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    """DescribeQuorum through `--bootstrap-server` (any node: the client finds the leader)."""
    if not settings.bootstrap_server:
        raise CliError(
            "mlog quorum describe asks a running node: give --bootstrap-server HOST:PORT"
        )
    target = RemoteTarget(settings.bootstrap_server, security=client_security(args))
    try:
        answer = target.wait(target.client.describe_quorum)
    finally:
        target.close()
    now = int(time.time() * 1000)
    end = max((r.log_end_offset for r in answer.current_voters), default=0)

    def replica(state: Any) -> dict[str, Any]:
        fetched = state.last_fetch_timestamp
        return {
            "replica_id": state.replica_id,
            "directory_id": state.directory_id or None,
            "log_end_offset": state.log_end_offset,
            "lag": max(0, end - state.log_end_offset),
            "last_fetch_timestamp": fetched,
            "last_fetch_ms_ago": None if fetched < 0 else max(0, now - fetched),
        }

    return {
        "leader_id": answer.leader_id,
        "leader_epoch": answer.leader_epoch,
        "high_watermark": answer.high_watermark,
        "voters": [replica(r) for r in answer.current_voters],
        "observers": [replica(r) for r in answer.observers],
        # DescribeQuorum v2's listeners of the voters (how a tool reaches each node).
        "nodes": [
            {"node_id": n.node_id, "name": n.name, "host": n.host, "port": n.port}
            for n in getattr(answer, "nodes", ())
        ],
    }


def change_voters(
    settings: Settings,
    args: argparse.Namespace,
    *,
    add: tuple[int, str, str, int] | None = None,
    remove: tuple[int, str] | None = None,
    timeout_ms: int,
) -> None:
    """AddRaftVoter (id, directory id, host, port) or RemoveRaftVoter (id, directory id).

    Sent to the quorum's leader (the client finds it from `--bootstrap-server`); a refusal
    is a one-line `CliError` with Kafka's code and what to do.
    """
    if not settings.bootstrap_server:
        raise CliError("a voter change is sent to a running quorum: give --bootstrap-server")
    target = RemoteTarget(settings.bootstrap_server, security=client_security(args))
    try:
        if add is not None:
            node_id, directory, host, port = add
            target.write(
                lambda: target.client.add_raft_voter(
                    node_id, directory_id=directory, host=host, port=port, timeout_ms=timeout_ms
                )
            )
        elif remove is not None:
            node_id, directory = remove
            target.write(lambda: target.client.remove_raft_voter(node_id, directory_id=directory))
    finally:
        target.close()


@contextlib.contextmanager
def open_target(
    settings: Settings, args: argparse.Namespace, *, check_pending: bool = True
) -> Iterator[Target]:
    """The data directory, or the server of `--bootstrap-server` / MLOG_BOOTSTRAP_SERVER."""
    target: Target
    given = given_principal(args)
    if settings.bootstrap_server:
        if given is not None:
            raise CliError(
                "--principal applies to the data directory only: a server records the "
                "principal of its connection; drop --principal or --bootstrap-server"
            )
        target = RemoteTarget(settings.bootstrap_server, security=client_security(args))
    else:
        # A read records nobody: the login is looked up only if the command writes.
        target = LocalTarget(
            settings,
            given,
            check_pending=check_pending,
            archive=archive_of(settings, args),
            note=print_note,
        )
    try:
        yield target
    finally:
        target.close()


def archive_of(settings: Settings, args: argparse.Namespace) -> ArchiveSource | None:
    """The archive of `--archive-url` (or MLOG_ARCHIVE_URL) and `--archive-cache`, if named.

    Only for a command that reads the history (`add_archive_options`); the URL is checked
    here, before anything is read (`ArchiveError`, one line, exit 2).
    """
    if not getattr(args, "reads_history", False):
        return None
    given = getattr(args, "archive_url", None)
    url = given if given is not None else os.environ.get(ARCHIVE_URL_ENV) or None
    cache = getattr(args, "archive_cache", None)
    if url is None:
        if cache is not None:
            raise CliError(
                "--archive-cache is where an archive's segments are kept: give --archive-url "
                f"too (or {ARCHIVE_URL_ENV})"
            )
        return None
    if settings.bootstrap_server:
        if given is None:
            return None  # the environment's archive is for the data directory's commands
        raise CliError(
            "--archive-url reads the data directory's history; a server reads its own archive "
            "(metadata.log.archive.url): drop --archive-url or --bootstrap-server"
        )
    if cache is not None and not cache:
        raise CliError("--archive-cache needs a directory, e.g. --archive-cache /var/cache/mlog")
    return ArchiveSource.open(url, Path(cache) if cache else default_cache_dir(settings))


def print_note(text: str) -> None:
    """A note about the archive (it could not be joined to the log yet), one line on stderr."""
    print(f"mlog: note: {text}", file=sys.stderr)


@contextlib.contextmanager
def open_history(settings: Settings, args: argparse.Namespace) -> Iterator[HistoryDir]:
    """The data directory's history (over the archive of the flags, if one is named)."""
    history = HistoryDir(settings, archive_of(settings, args), note=print_note)
    try:
        yield history
    finally:
        history.close()


def client_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The client config of `--command-config` or MLOG_COMMAND_CONFIG, if one is named.

    Its warnings (keys it ignores) go to stderr, one line each. The security modules are
    imported only here, so commands without a server never load them.
    """
    path = getattr(args, "command_config", None) or os.environ.get(COMMAND_CONFIG_ENV)
    if not path:
        return None
    from api.security.client_config import load_client_security

    security = load_client_security(path)
    for warning in security.warnings:
        print(f"mlog: warning: {path}: {warning}", file=sys.stderr)
    return security


def fetch_image(
    settings: Settings,
    args: argparse.Namespace,
    *,
    at_offset: int | None = None,
    at_time: str | None = None,
) -> MetadataImage:
    """The image of the target: now, or at an offset or time (time travel)."""
    with open_target(settings, args) as target:
        image = target.image(at_offset=at_offset, at_time=at_time)
    if at_offset is not None:
        note_batch_end(at_offset, image)
    return image


def note_batch_end(asked: int, image: MetadataImage) -> None:
    """Say on stderr when the offset asked for lay inside an atomic batch (time travel).

    The state inside a batch never existed (a topic without its partitions), so the image
    is the one at the batch's end: its offset is the image's provenance.
    """
    note_batch_end_at(asked, image.provenance.offset)


def note_batch_end_at(asked: int, at: int) -> None:
    """`note_batch_end` given the offset the answer is at (`image diff`'s ends)."""
    if asked >= 0 and at != asked:
        print(
            f"mlog: note: offset {asked} is inside an atomic batch that ends at offset {at}; "
            f"this is the image at offset {at} (time travel shows committed batches only)",
            file=sys.stderr,
        )
