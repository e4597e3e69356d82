"""A Merkle tree over the log's entries (RFC 9162), with inclusion and consistency proofs.

Leaf `i` is entry `i` (offset `i`, from 0): its hash is SHA-256(0x00 || the entry's Avro
binary encoding, as its block's body holds it); an inner node is SHA-256(0x01 || left ||
right), and the tree of `n` leaves splits at the largest power of two below `n`, as RFC 9162
section 2.1.1 defines MTH. Proofs are RFC 9162's PATH (2.1.3.1) and PROOF (2.1.4.1).

So a proof does not rehash the log, `<log dir>/merkle/` keeps an index, rebuildable from the
segments at any time:

    leaves   32 bytes per entry, the leaf hashes in offset order
    chunks   32 bytes per complete, aligned run of 1024 leaves: the root of its subtree
    state    text: entries indexed and the chain value after them (metadata_log.chain)

The index is extended from the log by whoever asks for a root or a proof (`mlog log digest`,
`mlog log prove`), by a serving node as it goes (`index_through`, off the write path), and by
every trim before it removes a segment (`MetadataLog.trim_before`): a trim that cannot extend
it first is held back, so the index keeps the leaves of trimmed entries and the tree still
starts at offset 0. `state` names the chain value at its end, so an index whose log was cut
and written again (another chain value there) is rewound to the log's start (the leaves of
trimmed entries stay) and rebuilt from the entries, not trusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro

from metadata_log.chain import ZERO
from metadata_log.container import fsync_directory, replace_file, write_all
from metadata_log.digest import DigestError, chain_value_at
from metadata_log.private_files import FILE_MODE, make_dirs
from metadata_log.segment import Segment
from records.fast_decode import entry_walker
from records.varint import encode_long, read_long

MERKLE_DIR = "merkle"
CHUNK_LEVEL = 10
CHUNK = 1 << CHUNK_LEVEL
"""Leaves per cached subtree root."""
_HASH = 32


def leaf_hash(entry: bytes) -> bytes:
    """RFC 9162 leaf hash: SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than `n` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


@lru_cache(maxsize=8)
def _parsed(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


@lru_cache(maxsize=8)
def _walker(schema_json: str) -> Callable[[bytes, int], None] | None:
    return entry_walker(json.loads(schema_json))


def _split_fast(schema_json: str, count: int, body: bytes) -> list[bytes] | None:
    """The `count` entries of a whole block body, split without decoding them; None if not.

    The entries of a block share its epoch and timestamp and have consecutive offsets, so
    entry `i + 1` starts with the bytes of (offset + 1, epoch, timestamp): each candidate
    start is found by searching for them, and each piece is then checked to be exactly one
    entry by the compiled walk (an entry's encoding is prefix-free, so a piece that is exactly
    one entry ends where that entry ends). Any doubt (a piece that is not one entry, no
    compiled walk, entries stamped otherwise) gives None: the caller decodes instead.
    """
    walk = _walker(schema_json)
    if walk is None or count < 1:
        return None
    try:
        first, pos = read_long(body, 0)
        _, pos = read_long(body, pos)
        _, pos = read_long(body, pos)
        stamp = body[len(encode_long(first)) : pos]
        out = []
        start = 0
        for i in range(1, count):
            end = body.find(encode_long(first + i) + stamp, start + 1)
            if end < 0:
                return None
            piece = body[start:end]
            walk(piece, 1)
            out.append(piece)
            start = end
        piece = body[start:]
        walk(piece, 1)
        out.append(piece)
    except (ValueError, TypeError, IndexError):
        return None
    return out


def entry_bytes(schema_json: str, count: int, body: bytes) -> list[bytes]:
    """The first `count` entries of a block body, each as its own bytes (with the writer schema).

    Entries are found by decoding them: `count` may stop short of the block's entries.
    """
    schema = _parsed(schema_json)
    stream = io.BytesIO(body)
    out = []
    start = 0
    for _ in range(count):
        fastavro.schemaless_reader(stream, schema, None)
        end = stream.tell()
        out.append(body[start:end])
        start = end
    return out


class MerkleError(DigestError):
    """The index cannot answer; the message says why and what to do."""


class NotFromZero(MerkleError):
    """The log starts after the index's end: the entries between were never indexed here."""


class IndexHeldBack(MerkleError):
    """The index could not be extended to a trim's cut, so the trim waits (no leaf is lost)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InclusionProof:
    """RFC 9162 inclusion proof of leaf `index` in the tree of `tree_size` leaves."""

    index: int
    tree_size: int
    entry: bytes | None
    """The entry's bytes; None for an entry trimmed from the log (the index keeps its leaf)."""
    leaf: bytes
    path: tuple[bytes, ...]
    root: bytes

    def to_json(self) -> dict[str, object]:
        """The proof as JSON values (hashes and entry bytes in hex; entry null if trimmed)."""
        return {
            "type": "inclusion",
            "leaf_index": self.index,
            "tree_size": self.tree_size,
            "entry": None if self.entry is None else self.entry.hex(),
            "leaf_hash": self.leaf.hex(),
            "path": [h.hex() for h in self.path],
            "root": self.root.hex(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistencyProof:
    """RFC 9162 consistency proof between the trees of `first_size` and `second_size` leaves."""

    first_size: int
    second_size: int
    first_root: bytes
    second_root: bytes
    path: tuple[bytes, ...]

    def to_json(self) -> dict[str, object]:
        """The proof as JSON values (hashes in hex)."""
        return {
            "type": "consistency",
            "first_size": self.first_size,
            "second_size": self.second_size,
            "first_root": self.first_root.hex(),
            "second_root": self.second_root.hex(),
            "path": [h.hex() for h in self.path],
        }


def block_leaves(segment: Segment, start: int) -> Iterator[tuple[list[bytes], int]]:
    """The leaf hashes of each block of `segment` from the one holding `start`, and its offset.

    Each block's leaves from its first entry, even where `start` falls inside it.
    """
    schema = segment.header.schema_json
    sha256 = hashlib.sha256
    for block, first in segment.blocks_with_offsets(start):
        entries = _split_fast(schema, block.count, block.body)
        if entries is None:
            entries = entry_bytes(schema, block.count, block.body)
        yield [sha256(b"\x00" + e).digest() for e in entries], first  # leaf_hash


class MerkleIndex:
    """The `merkle/` index of one log directory, opened under its own lock."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / MERKLE_DIR
        if not self.directory.is_dir():
            make_dirs(self.directory)
        self._lock_fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self.size = 0
        self.chain = ZERO
        self._chunks: list[bytes] = []
        self._leaves_fd = -1
        self._memo: dict[tuple[int, int], bytes] = {}
        """Subtree roots computed by this open (the index only grows while it is held)."""
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the index."""
        if self._leaves_fd >= 0:
            os.close(self._leaves_fd)
            self._leaves_fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> MerkleIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- files

    def _load(self) -> None:
        state = self.directory / "state"
        leaves = self.directory / "leaves"
        self._leaves_fd = os.open(leaves, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            size_text, chain_text = state.read_text().split()
            size, chain = int(size_text), bytes.fromhex(chain_text)
        except (OSError, ValueError):
            size, chain = 0, ZERO
        chunks = b""
        with contextlib.suppress(OSError):
            chunks = (self.directory / "chunks").read_bytes()
        if (
            os.fstat(self._leaves_fd).st_size < size * _HASH
            or len(chunks) < (size // CHUNK) * _HASH
            or len(chain) != _HASH
        ):
            size, chain, chunks = 0, ZERO, b""
        self.size, self.chain = size, chain
        self._chunks = [chunks[i : i + _HASH] for i in range(0, (size // CHUNK) * _HASH, _HASH)]

    def _rewind(self, segments: Sequence[Segment]) -> None:
        """Back to the log's start: the leaves of trimmed entries stay, the rest is rebuilt.

        Entries below the start were trimmed, and only committed entries are ever trimmed, so
        their leaves still hold; the chain value there is the one the start carries.
        """
        self._memo.clear()
        keep = min(self.size, segments[0].base_offset)
        chain = chain_value_at(segments, keep) if keep else ZERO
        os.ftruncate(self._leaves_fd, keep * _HASH)
        self.size, self.chain = keep, chain
        del self._chunks[keep // CHUNK :]

    def _save(self) -> None:
        os.fsync(self._leaves_fd)
        replace_file(self.directory / "chunks", b"".join(self._chunks), sync_directory=False)
        replace_file(
            self.directory / "state",
            f"{self.size} {self.chain.hex()}\n".encode(),
            sync_directory=False,
        )
        fsync_directory(self.directory)

    # ---------------------------------------------------------------- building

    def extend(self, segments: Sequence[Segment], end: int) -> None:
        """Index the log's entries up to `end` (a block end), from the segments (oldest first).

        An index whose end no longer has its chain value in the log (the log was cut and
        written again) is rewound to the log's start and rebuilt from there.
        """
        if self.size and (self.size > segments[-1].next_offset or not self._still_valid(segments)):
            self._rewind(segments)
        if self.size >= end:
            return
        if segments[0].base_offset > self.size:
            raise NotFromZero(
                f"the Merkle index holds {self.size} entries and the log starts at offset "
                f"{segments[0].base_offset}: the entries between were trimmed before they were "
                "indexed, so no tree from offset 0 can be built here"
            )
        os.ftruncate(self._leaves_fd, self.size * _HASH)
        pending: list[bytes] = []  # leaves hashed, not yet written (a chunk at a time)
        for segment in segments:
            if segment.next_offset <= self.size + len(pending) or segment.base_offset >= end:
                continue
            for leaves, first in block_leaves(segment, self.size + len(pending)):
                if first >= end:
                    break
                pending.extend(leaves[max(0, self.size + len(pending) - first) :])
                if len(pending) >= CHUNK:
                    self._take(pending)
                    pending = []
        self._take(pending)
        self.chain = chain_value_at(segments, self.size)
        self._save()

    def _take(self, leaves: list[bytes]) -> None:
        """Append leaves to the file, and the chunk roots that become complete."""
        os.lseek(self._leaves_fd, self.size * _HASH, os.SEEK_SET)
        write_all(self._leaves_fd, b"".join(leaves))
        self.size += len(leaves)
        while len(self._chunks) < self.size // CHUNK:
            start = len(self._chunks) * CHUNK
            self._chunks.append(self._hash_leaves(start, start + CHUNK))

    def _still_valid(self, segments: Sequence[Segment]) -> bool:
        if self.size < segments[0].base_offset:
            return True  # its end was trimmed: nothing of the log to compare with
        try:
            return chain_value_at(segments, self.size) == self.chain
        except DigestError:
            return False

    # ---------------------------------------------------------------- hashing

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Leaf hashes `start`..`end - 1`."""
        data = os.pread(self._leaves_fd, (end - start) * _HASH, start * _HASH)
        return [data[i : i + _HASH] for i in range(0, len(data), _HASH)]

    def _hash_leaves(self, start: int, end: int) -> bytes:
        level = self.leaves(start, end)
        return _fold(level)

    def subtree(self, start: int, end: int) -> bytes:
        """MTH of the leaves `start`..`end - 1` (RFC 9162 2.1.1)."""
        n = end - start
        if n == 1:
            return self.leaves(start, end)[0]
        if n == CHUNK and start % CHUNK == 0 and start // CHUNK < len(self._chunks):
            return self._chunks[start // CHUNK]
        found = self._memo.get((start, end))
        if found is None:
            if n <= CHUNK:
                found = self._hash_leaves(start, end)
            else:
                k = _split(n)
                found = node_hash(self.subtree(start, start + k), self.subtree(start + k, end))
            self._memo[(start, end)] = found
        return found

    def root(self, size: int) -> bytes:
        """The root of the tree of the first `size` leaves (size >= 1, indexed)."""
        self._require(size)
        return self.subtree(0, size)

    def inclusion(self, index: int, size: int, entry: bytes | None) -> InclusionProof:
        """Inclusion proof of leaf `index` in the tree of `size` leaves.

        `entry` is None for an entry trimmed from the log: the proof carries its leaf hash.
        """
        self._require(size)
        if not 0 <= index < size:
            raise MerkleError(f"offset {index} is not in the tree of {size} entries")
        leaf = self.leaves(index, index + 1)[0]
        if entry is not None and leaf_hash(entry) != leaf:
            raise MerkleError(
                f"entry {index} is not what was indexed: the log changed after it was indexed; "
                "run `mlog log verify`"
            )
        return InclusionProof(
            index=index,
            tree_size=size,
            entry=entry,
            leaf=leaf,
            path=tuple(self._path(index, 0, size)),
            root=self.root(size),
        )

    def consistency(self, first: int, second: int) -> ConsistencyProof:
        """Consistency proof between the trees of `first` and `second` leaves."""
        self._require(second)
        if not 0 < first <= second:
            raise MerkleError(f"no consistency proof from {first} to {second} entries")
        return ConsistencyProof(
            first_size=first,
            second_size=second,
            first_root=self.root(first),
            second_root=self.root(second),
            path=tuple(self._subproof(first, 0, second, True)),
        )

    def _require(self, size: int) -> None:
        if not 1 <= size <= self.size:
            raise MerkleError(f"the index holds {self.size} entries, not {size}")

    def _path(self, m: int, start: int, end: int) -> Iterator[bytes]:
        """RFC 9162 PATH(m, D[start:end]), m relative to `start`."""
        n = end - start
        if n == 1:
            return
        k = _split(n)
        if m < k:
            yield from self._path(m, start, start + k)
            yield self.subtree(start + k, end)
        else:
            yield from self._path(m - k, start + k, end)
            yield self.subtree(start, start + k)

    def _subproof(self, m: int, start: int, end: int, complete: bool) -> Iterator[bytes]:
        """RFC 9162 SUBPROOF(m, D[start:end], b)."""
        n = end - start
        if m == n:
            if not complete:
                yield self.subtree(start, end)
            return
        k = _split(n)
        if m <= k:
            yield from self._subproof(m, start, start + k, complete)
            yield self.subtree(start + k, end)
        else:
            yield from self._subproof(m - k, start + k, end, False)
            yield self.subtree(start, start + k)


class Frontier:
    """The roots of the right-edge perfect subtrees of a tree grown leaf by leaf (RFC 9162).

    For `size` leaves they are the roots of the subtrees its binary decomposition names, left
    to right (at most 64 hashes): enough to compute the root, and, with the later leaves, the
    root of every larger tree, without the earlier leaves.
    """

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0 or len(hashes) != size.bit_count() or any(len(h) != _HASH for h in hashes):
            raise MerkleError(
                f"a frontier of {size} leaves holds {size.bit_count()} hashes of 32 bytes, "
                f"not {len(hashes)}"
            )
        self.size = size
        self.hashes = list(hashes)

    def add(self, leaf: bytes) -> None:
        """Grow the tree by the leaf whose hash is `leaf`."""
        value, size = leaf, self.size
        while size & 1:
            value = node_hash(self.hashes.pop(), value)
            size >>= 1
        self.hashes.append(value)
        self.size += 1

    def root(self) -> bytes:
        """The root of the tree of `size` leaves (size >= 1)."""
        if not self.hashes:
            raise MerkleError("an empty tree has no root")
        value = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            value = node_hash(left, value)
        return value

    def nodes(self) -> Iterator[tuple[int, int]]:
        """The (start, end) leaf ranges of the subtrees whose roots `hashes` holds."""
        return _perfect_ranges(self.size)


def _perfect_ranges(size: int) -> Iterator[tuple[int, int]]:
    """The (start, end) ranges of the perfect subtrees `size` leaves decompose into."""
    start = 0
    for bit in range(size.bit_length() - 1, -1, -1):
        if size >> bit & 1:
            yield start, start + (1 << bit)
            start += 1 << bit


def recompute_root(
    segments: Sequence[Segment], end_offset: int, *, start: Frontier | None = None
) -> bytes:
    """The Merkle root over entries 0..`end_offset - 1`, hashed from the blocks as they are.

    Reads every entry from `start.size` (0 without a `start`) up to `end_offset`; the stored
    index is not used, so an edited index does not hide an edited block.
    """
    frontier = Frontier() if start is None else Frontier(start.size, start.hashes)
    if end_offset <= frontier.size:
        raise MerkleError(f"no entry between offsets {frontier.size} and {end_offset - 1}")
    if not segments or segments[0].base_offset > frontier.size:
        first = segments[0].base_offset if segments else 0
        raise MerkleError(
            f"the log starts at offset {first}: the entries before it were trimmed, so the "
            f"Merkle root from offset {frontier.size} cannot be hashed from the log"
        )
    for segment in segments:
        if segment.next_offset <= frontier.size:
            continue
        schema = segment.header.schema_json
        for block, first in segment.blocks_with_offsets(frontier.size):
            for i, entry in enumerate(entry_bytes(schema, block.count, block.body)):
                if first + i >= frontier.size:
                    frontier.add(leaf_hash(entry))
                if frontier.size == end_offset:
                    return frontier.root()
    raise MerkleError(
        f"the log ends at offset {segments[-1].next_offset - 1}, before offset {end_offset - 1}"
    )


def _fold(level: list[bytes]) -> bytes:
    """MTH of a list of leaf hashes."""
    n = len(level)
    if n == 1:
        return level[0]
    if n & (n - 1) == 0:  # a perfect tree (a chunk): pair up level by level
        sha256 = hashlib.sha256
        while len(level) > 1:
            level = [
                sha256(b"\x01" + left + right).digest()
                for left, right in zip(level[::2], level[1::2], strict=True)
            ]
        return level[0]
    k = _split(n)
    return node_hash(_fold(level[:k]), _fold(level[k:]))


def _entry_at(segments: Sequence[Segment], offset: int) -> bytes | None:
    """The entry's bytes; None below the log's start (trimmed: only its leaf is indexed)."""
    if segments and 0 <= offset < segments[0].base_offset:
        return None
    segment = next((s for s in reversed(segments) if s.base_offset <= offset), None)
    if segment is None or offset >= segment.next_offset:
        raise MerkleError(f"offset {offset} is not in the log")
    block, first = next(segment.blocks_with_offsets(offset))
    return entry_bytes(segment.header.schema_json, offset - first + 1, block.body)[-1]


def root_at(directory: Path, segments: Sequence[Segment], end_offset: int) -> bytes:
    """The Merkle root over entries 0..`end_offset - 1` (the index extended as needed)."""
    with MerkleIndex(directory) as index:
        index.extend(segments, end_offset)
        return index.root(end_offset)


def root_across_start(directory: Path, segments: Sequence[Segment], end_offset: int) -> bytes:
    """The Merkle root over entries 0..`end_offset - 1` of a log trimmed to start after 0.

    The leaves below the start are the index's (all that is left of those entries); from the
    start on the entries are hashed as they are on disk, as `recompute_root` does, so an
    edited index does not hide an edited block.
    """
    start = segments[0].base_offset
    with MerkleIndex(directory) as index:
        index.extend(segments, start)
        frontier = Frontier(start, [index.subtree(a, b) for a, b in _perfect_ranges(start)])
    if end_offset == start:
        return frontier.root()
    return recompute_root(segments, end_offset, start=frontier)


def prove_inclusion(
    directory: Path, segments: Sequence[Segment], offset: int, tree_size: int
) -> InclusionProof:
    """Inclusion proof of entry `offset` in the tree of the first `tree_size` entries."""
    entry = _entry_at(segments, offset)
    with MerkleIndex(directory) as index:
        index.extend(segments, tree_size)
        return index.inclusion(offset, tree_size, entry)


def prove_consistency(
    directory: Path, segments: Sequence[Segment], first_size: int, second_size: int
) -> ConsistencyProof:
    """Consistency proof from the tree of `first_size` entries to that of `second_size`."""
    with MerkleIndex(directory) as index:
        index.extend(segments, second_size)
        return index.consistency(first_size, second_size)


def index_through(directory: Path, segments: Sequence[Segment], end: int) -> bool:
    """Extend the index durably to at least `end` (a block end); whether it now covers it.

    What a trim does before it removes the segments below `end`, and what a serving node does
    off its write path to keep the index current. False when the log starts after the index's
    end (entries trimmed or never here before they were indexed, as after a snapshot install):
    there is no tree from offset 0 to keep, so a trim loses nothing more. Raises
    IndexHeldBack when the index cannot be extended (an I/O error, a damaged block or chain
    file): a trim must then wait, or the leaves of the entries it removes would be lost.
    """
    try:
        with MerkleIndex(directory) as index:
            index.extend(segments, end)
            return True
    except NotFromZero:
        return False
    except (OSError, DigestError, ValueError, EOFError, StopIteration) as exc:
        raise IndexHeldBack(
            f"the Merkle index in {directory / MERKLE_DIR} could not be extended to offset "
            f"{end - 1}: {exc}"
        ) from exc
