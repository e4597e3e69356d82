"""The archive's layout and its append-only manifest.

    archive.json                  {"format": 1, "cluster_id": ...}, written once
    segments/<base>-<next>.avro   a sealed segment file, byte for byte
    segments/<base>-<next>.chain  its hash chain file (metadata_log.chain)
    segments/<base>-<next>.leaves the Merkle leaf hash of each entry, 32 bytes each
    manifest/<base>-<next>.json   the entry: what the three objects hold, written last

`<base>` and `<next>` are 20-digit offsets: the segment's first entry and one past its last.
An entry is written only after its objects were uploaded and read back with the hashes it
names, so an entry names objects that were whole when it was written; its bytes depend only on
the segment (no writer, no time), so two controllers that archive the same segment (a failover
mid-upload) write the same entry. Entries are never changed or removed.

The history an archive holds is its **run**: from its lowest base offset, each next entry the
one starting where the run ends (the longest, if several do). Entries that start inside the run
(a segment another replica cut at other offsets) are redundant; the run ends at the first gap.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from metadata_log.archive.errors import ArchiveDamage, ArchiveError
from metadata_log.archive.location import ArchiveLocation

FORMAT = 1
IDENTITY = "archive.json"
MANIFEST_DIR = "manifest"
SEGMENTS_DIR = "segments"
_MAX_OFFSET = (1 << 63) - 1
_NAME = re.compile(r"^(\d{20})-(\d{20})$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
KINDS = ("segment", "chain", "leaves")
SUFFIXES = {"segment": ".avro", "chain": ".chain", "leaves": ".leaves"}


def entry_name(base_offset: int, next_offset: int) -> str:
    """`<base>-<next>`, the stem every object of one archived segment shares."""
    return f"{base_offset:020d}-{next_offset:020d}"


def object_name(stem: str, kind: str) -> str:
    """The name of the `kind` object (`segment`, `chain`, `leaves`) of entry `stem`."""
    return f"{SEGMENTS_DIR}/{stem}{SUFFIXES[kind]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedObject:
    """One uploaded object, as the manifest names it."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestEntry:
    """One archived segment: its offsets, its chain ends and its three objects."""

    base_offset: int
    next_offset: int
    max_timestamp: int
    chain_before: str
    """The chain value before its first block (hex): the previous segment's last."""
    chain_after: str
    """The chain value after its last block (hex)."""
    objects: dict[str, ArchivedObject]
    """`segment`, `chain` and `leaves`."""

    @property
    def stem(self) -> str:
        """`<base>-<next>`."""
        return entry_name(self.base_offset, self.next_offset)

    @property
    def manifest_name(self) -> str:
        """Where the entry is stored."""
        return f"{MANIFEST_DIR}/{self.stem}.json"

    @property
    def entries(self) -> int:
        """How many log entries the segment holds."""
        return self.next_offset - self.base_offset

    @property
    def size_bytes(self) -> int:
        """The bytes of its three objects."""
        return sum(o.size for o in self.objects.values())

    def encode(self) -> bytes:
        """The entry's bytes: canonical JSON (sorted keys), the same for the same segment."""
        document = {
            "format": FORMAT,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "max_timestamp": self.max_timestamp,
            "chain_before": self.chain_before,
            "chain_after": self.chain_after,
            "objects": {
                kind: {"name": o.name, "size": o.size, "sha256": o.sha256}
                for kind, o in sorted(self.objects.items())
            },
        }
        return (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()

    @classmethod
    def decode(cls, name: str, data: bytes) -> ManifestEntry:
        """Parse and check the entry stored as `name`; `ArchiveDamage` says what is wrong."""
        stem = name.removeprefix(f"{MANIFEST_DIR}/").removesuffix(".json")
        named = _NAME.match(stem)
        if named is None:
            raise ArchiveDamage(f"manifest entry {name!r} is not named <base>-<next>.json")
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ArchiveDamage(f"manifest entry {name} is not JSON: {exc}") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ArchiveDamage(f"manifest entry {name} is not a format-{FORMAT} entry")
        try:
            entry = cls(
                base_offset=_offset(document, "base_offset"),
                next_offset=_offset(document, "next_offset"),
                max_timestamp=_int(document, "max_timestamp", -1),
                chain_before=_hex(document, "chain_before"),
                chain_after=_hex(document, "chain_after"),
                objects={kind: _object(document, kind) for kind in KINDS},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArchiveDamage(f"manifest entry {name}: {exc}") from None
        if (entry.base_offset, entry.next_offset) != (int(named[1]), int(named[2])):
            raise ArchiveDamage(f"manifest entry {name} holds offsets its name does not")
        if entry.next_offset <= entry.base_offset:
            raise ArchiveDamage(f"manifest entry {name} holds no entries")
        for kind, obj in entry.objects.items():
            if obj.name != object_name(stem, kind):
                raise ArchiveDamage(f"manifest entry {name} names {obj.name!r} as its {kind}")
        return entry


def _int(document: dict[str, object], key: str, low: int) -> int:
    value = document[key]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= _MAX_OFFSET:
        raise ValueError(f"{key} is not an integer in {low}..{_MAX_OFFSET}")
    return value


def _offset(document: dict[str, object], key: str) -> int:
    return _int(document, key, 0)


def _hex(document: dict[str, object], key: str) -> str:
    value = document[key]
    if not isinstance(value, str) or not _HEX64.match(value):
        raise ValueError(f"{key} is not 64 hex digits")
    return value


def _object(document: dict[str, object], kind: str) -> ArchivedObject:
    objects = document["objects"]
    if not isinstance(objects, dict) or not isinstance(objects.get(kind), dict):
        raise ValueError(f"objects.{kind} is missing")
    value = objects[kind]
    name, sha = value.get("name"), value.get("sha256")
    if not isinstance(name, str) or not isinstance(sha, str) or not _HEX64.match(sha):
        raise ValueError(f"objects.{kind} has no name or no SHA-256")
    return ArchivedObject(name=name, size=_int(value, "size", 0), sha256=sha)


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """Every entry of an archive, its run (the history it holds) and what lies outside it."""

    entries: tuple[ManifestEntry, ...]
    run: tuple[ManifestEntry, ...]
    damaged: tuple[str, ...] = ()
    """One line per entry that could not be read or parsed (left out of the run)."""

    @property
    def start_offset(self) -> int | None:
        """The first offset the run holds (None for an empty archive)."""
        return self.run[0].base_offset if self.run else None

    @property
    def end_offset(self) -> int | None:
        """One past the run's last offset (None for an empty archive)."""
        return self.run[-1].next_offset if self.run else None

    @property
    def gaps(self) -> list[tuple[int, int]]:
        """Offset ranges past the run's end that entries beyond a gap skip over."""
        out = []
        end = self.end_offset
        for entry in self.entries:
            if end is not None and entry.base_offset > end:
                out.append((end, entry.base_offset))
                end = entry.next_offset
            elif end is not None:
                end = max(end, entry.next_offset)
        return out

    def holding(self, offset: int) -> ManifestEntry | None:
        """The run's entry that holds `offset`, or None."""
        for entry in self.run:
            if entry.base_offset <= offset < entry.next_offset:
                return entry
        return None


def build_manifest(entries: Iterable[ManifestEntry], damaged: Sequence[str] = ()) -> Manifest:
    """The manifest of `entries`: sorted, with its run."""
    ordered = tuple(sorted(entries, key=lambda e: (e.base_offset, e.next_offset)))
    run: list[ManifestEntry] = []
    if ordered:
        end = ordered[0].base_offset
        while True:
            following = [e for e in ordered if e.base_offset == end]
            if not following:
                break
            chosen = max(following, key=lambda e: e.next_offset)
            run.append(chosen)
            end = chosen.next_offset
    return Manifest(entries=ordered, run=tuple(run), damaged=tuple(damaged))


def read_manifest(location: ArchiveLocation) -> Manifest:
    """Every entry of the archive at `location` (unreadable ones named in `damaged`)."""
    entries = []
    damaged = []
    for name in location.names(MANIFEST_DIR):
        if not name.endswith(".json"):
            continue
        data = location.read(name)
        if data is None:
            continue  # listed, then gone: not an entry (entries are never removed)
        try:
            entries.append(ManifestEntry.decode(name, data))
        except ArchiveDamage as exc:
            damaged.append(str(exc))
    return build_manifest(entries, damaged)


def claim(location: ArchiveLocation, cluster_id: str | None) -> str | None:
    """The archive's cluster id, written first if the archive is new and `cluster_id` given.

    `ArchiveError` if it holds another cluster's history (two clusters never share one).
    """
    data = location.read(IDENTITY)
    if data is None:
        if cluster_id is None:
            return None
        location.write(
            IDENTITY, json.dumps({"format": FORMAT, "cluster_id": cluster_id}).encode() + b"\n"
        )
        return cluster_id
    try:
        document = json.loads(data)
        held = document["cluster_id"]
        if not isinstance(held, str):
            raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ArchiveDamage(
            f"{location.describe(IDENTITY)} is not an archive's identity file"
        ) from None
    if cluster_id is not None and held != cluster_id:
        raise ArchiveError(
            f"the archive at {location.url} holds cluster {held}'s history, not cluster "
            f"{cluster_id}'s; give each cluster its own archive URL"
        )
    return held
