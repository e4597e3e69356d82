"""The whole history as one log directory: the archive's segments below the local log's.

Every reader of the history (history, time travel, diff, dump, verify, digests, proofs) reads a
log directory. Below the local log start they read a **view**: a directory under the archive
cache that holds the archive's run up to where the local log takes over, then the local
segments, as links; it is a log directory like any other, so every reader gives the answers it
gives on a log that was never trimmed, and every check a reader makes (CRCs, dense offsets,
segment links, the hash chain) runs over the archived part too.

Archived objects are downloaded once into `<cache>/objects/`, each checked against the SHA-256
the manifest names before it is used: a changed or missing object is `ArchiveDamage`, never
served. Indexes a reader rebuilds for archived segments are kept there too, and the view's
Merkle index lives in `<cache>/merkle/` (extended from the segments, which the chain checks,
never taken from the archive's leaf files), so a second read costs what a read of a local log
does. A view is made per command and removed after (`HistoryView.close`); a server keeps one
for its life (api/server/archive_reads.py) and removes at start those of processes that are
gone (`ArchiveCache.remove_stale_views`).

Where the local log takes over: at its first segment whose base offset is the end of one of
the run's entries (segments are cut at each replica's own offsets). When the local log holds
everything the archive does, the view is the local directory itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from metadata_log.archive.errors import ArchiveDamage, ArchiveError
from metadata_log.archive.location import ArchiveLocation, file_sha256
from metadata_log.archive.manifest import Manifest, ManifestEntry, read_manifest
from metadata_log.chain import CHAIN_SUFFIX
from metadata_log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from metadata_log.extent import trimmed_leftovers
from metadata_log.merkle import MERKLE_DIR
from metadata_log.private_files import make_dirs
from metadata_log.segment import parse_segment_name, segment_name

_LOCAL_FILES = ("leader-epoch",)
"""Files of the local log directory a view takes along (beside segments and chain files)."""
_INDEX_SUFFIXES = (".index", ".timeindex")


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewPlan:
    """Which archived entries a view holds, and from which offset the local segments."""

    archived: tuple[ManifestEntry, ...]
    local_from: int | None
    """The base offset of the first local segment in the view (None: no local segment)."""
    note: str | None = None
    """Why the archive could not be joined to the local log (one line), or None."""


def local_bases(directory: Path) -> list[int]:
    """The base offsets of the local log's segments at or above its start, sorted."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    bases = sorted(b for n in names if (b := parse_segment_name(n)) is not None)
    checkpoint = read_checkpoint(directory)
    start = 0 if checkpoint is None else checkpoint.log_start_offset
    return bases[trimmed_leftovers(bases, start) :]


def plan_view(manifest: Manifest, bases: list[int]) -> ViewPlan:
    """What a view of `manifest`'s run and the local segments at `bases` holds."""
    run = manifest.run
    if not run:
        return ViewPlan(archived=(), local_from=bases[0] if bases else None)
    if not bases:
        return ViewPlan(archived=run, local_from=None)
    if bases[0] <= run[0].base_offset:
        return ViewPlan(archived=(), local_from=bases[0])  # the local log holds it all
    ends = {entry.next_offset: i for i, entry in enumerate(run)}
    for base in bases:
        if base in ends:
            return ViewPlan(archived=run[: ends[base] + 1], local_from=base)
    held = f"the archive (offsets {run[0].base_offset}..{run[-1].next_offset - 1})"
    if run[-1].next_offset < bases[0]:
        note = (
            f"{held} does not reach the local log (from offset {bases[0]}): offsets "
            f"{run[-1].next_offset}..{bases[0] - 1} were trimmed before they were archived; "
            "only the local log is read"
        )
    else:
        note = (
            f"{held} does not meet the local log (from offset {bases[0]}) at a segment "
            f"boundary yet; offsets below {bases[0]} are readable once the archive reaches "
            "the next local segment"
        )
    return ViewPlan(archived=(), local_from=bases[0], note=note)


class HistoryView:
    """A log directory of the whole history (see the module's docstring); close it after."""

    def __init__(self, path: Path, plan: ViewPlan, *, owned: bool) -> None:
        self.path = path
        self.plan = plan
        self._owned = owned

    @property
    def note(self) -> str | None:
        """Why the archive was not joined to the local log, or None."""
        return self.plan.note

    @property
    def archived_through(self) -> int | None:
        """One past the last archived offset the view holds (None: it holds none)."""
        return self.plan.archived[-1].next_offset if self.plan.archived else None

    def close(self) -> None:
        """Remove the view's links (the cache stays)."""
        if self._owned:
            shutil.rmtree(self.path, ignore_errors=True)
            self._owned = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ArchiveCache:
    """The local copies of an archive's objects, checked, and the views made of them."""

    def __init__(self, location: ArchiveLocation, directory: Path) -> None:
        self.location = location
        self.directory = directory
        self.objects = directory / "objects"

    def open_view(self, local: Path | None, manifest: Manifest | None = None) -> HistoryView:
        """A view of the archive's run below the local log directory `local` (None: none).

        `ArchiveUnreachable` if an object must be fetched and cannot be; `ArchiveDamage` if
        one differs from the manifest.
        """
        manifest = manifest if manifest is not None else read_manifest(self.location)
        bases = local_bases(local) if local is not None else []
        plan = plan_view(manifest, bases)
        if not plan.archived and local is not None:
            return HistoryView(local, plan, owned=False)
        if not plan.archived:
            raise ArchiveError(
                f"the archive at {self.location.url} holds no segment yet and there is no local "
                "log to read: give the data directory whose log it archives (--data-dir)"
            )
        fetched = [self.fetch(entry) for entry in plan.archived]
        view = self.directory / f"view-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        make_dirs(view)
        try:
            for entry, (segment, chain) in zip(plan.archived, fetched, strict=True):
                name = segment_name(entry.base_offset)
                _link(segment, view / name)
                _link(chain, (view / name).with_suffix(CHAIN_SUFFIX))
                for suffix in _INDEX_SUFFIXES:
                    cached = segment.with_suffix(suffix)
                    if cached.exists():
                        _link(cached, (view / name).with_suffix(suffix))
            if local is not None and plan.local_from is not None:
                for base in (b for b in bases if b >= plan.local_from):
                    name = segment_name(base)
                    _link(local / name, view / name)
                    for suffix in (CHAIN_SUFFIX, *_INDEX_SUFFIXES):
                        source = (local / name).with_suffix(suffix)
                        if source.exists():
                            _link(source, (view / name).with_suffix(suffix))
                for extra in _LOCAL_FILES:
                    if (local / extra).exists():
                        shutil.copyfile(local / extra, view / extra)
            self._write_checkpoint(view, plan, local)
            make_dirs(self.directory / MERKLE_DIR)
            os.symlink(self.directory / MERKLE_DIR, view / MERKLE_DIR)
        except BaseException:
            shutil.rmtree(view, ignore_errors=True)
            raise
        return HistoryView(view, plan, owned=True)

    def remove_stale_views(self) -> int:
        """Remove the views left by processes that are gone (killed before `close`); how many.

        A view is `view-<pid>-<id>`: one whose process no longer runs is nobody's. For a
        long-lived reader (a server), when it starts; the cache's objects stay.
        """
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names:
            parts = name.split("-")
            if len(parts) != 3 or parts[0] != "view" or not parts[1].isdigit():
                continue
            pid = int(parts[1])
            if pid == os.getpid() or _running(pid):
                continue
            shutil.rmtree(self.directory / name, ignore_errors=True)
            removed += 1
        return removed

    def keep_indexes(self, view: HistoryView, rebuilt: list[Path]) -> None:
        """Keep the indexes a reader rebuilt for the view's archived segments, for later views.

        `rebuilt`: the view's segment paths whose `save_indexes` wrote them.
        """
        archived = {segment_name(e.base_offset): e for e in view.plan.archived}
        for path in rebuilt:
            entry = archived.get(path.name)
            if entry is None:
                continue
            for suffix in _INDEX_SUFFIXES:
                made = path.with_suffix(suffix)
                target = (self.objects / entry.stem).with_suffix(suffix)
                if made.exists() and not target.exists():
                    with contextlib.suppress(OSError):
                        shutil.copyfile(made, target)

    def fetch(self, entry: ManifestEntry) -> tuple[Path, Path]:
        """The local copies of `entry`'s segment and chain file, downloaded and checked once."""
        make_dirs(self.objects)  # `check_archive` fetches before any view made the cache
        paths = []
        for kind, suffix in (("segment", ".avro"), ("chain", CHAIN_SUFFIX)):
            obj = entry.objects[kind]
            target = self.objects / f"{entry.stem}{suffix}"
            if not target.exists():
                try:
                    self.location.download(obj.name, target)
                except FileNotFoundError:
                    raise ArchiveDamage(
                        f"{self.location.describe(obj.name)} is missing: the manifest names it "
                        f"for offsets {entry.base_offset}..{entry.next_offset - 1}; `mlog "
                        "archive verify` lists what else is"
                    ) from None
                if file_sha256(target) != (obj.size, obj.sha256):
                    target.unlink(missing_ok=True)
                    raise ArchiveDamage(
                        f"{self.location.describe(obj.name)} differs from what the manifest "
                        f"says it holds (offsets {entry.base_offset}..{entry.next_offset - 1}): "
                        "it was changed after it was archived; it is not read"
                    )
            paths.append(target)
        return paths[0], paths[1]

    @staticmethod
    def _write_checkpoint(view: Path, plan: ViewPlan, local: Path | None) -> None:
        held = read_checkpoint(local) if local is not None and plan.local_from is not None else None
        start = plan.archived[0].base_offset if plan.archived else (plan.local_from or 0)
        if held is not None:
            checkpoint = Checkpoint(
                log_start_offset=start,
                recovery_point=held.recovery_point,
                newest_segment=held.newest_segment,
            )
        else:
            last = plan.archived[-1]
            checkpoint = Checkpoint(
                log_start_offset=start,
                recovery_point=last.next_offset,
                newest_segment=last.base_offset,
            )
        write_checkpoint(view, checkpoint)


def _running(pid: int) -> bool:
    """Whether process `pid` runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _link(source: Path, target: Path) -> None:
    """`target` names `source`'s file: a hard link (it outlives a trim), else a symlink."""
    try:
        os.link(source, target)
    except OSError:
        os.symlink(source.resolve(), target)
