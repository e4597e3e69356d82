"""`mlog log verify [--digest]`'s checks over a history directory, as data.

Every block, link and checkpoint of the log (metadata_log.verify), and a digest token checked
against the hash chain recomputed from the entries, its Merkle root too for a v2 token; a token
whose entries were all trimmed is checked against the leaf hashes the `merkle/` index keeps of
them. The CLI prints the outcome (api/cli/log_verify.py), `mlog archive verify` runs the same
checks over a view of the archive alone, and `Metadata.verify` returns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from api.progress import Progress
from metadata_log.digest import LogDigest
from metadata_log.merkle import recompute_root, root_across_start, root_at
from metadata_log.verify import VerifyReport, verify_log
from records.errors import MetadataLogError

if TYPE_CHECKING:
    from api.history_dir import HistoryDir


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOutcome:
    """What `log verify [--digest]` found over one history directory, and how it is printed."""

    report: VerifyReport
    digest: LogDigest | None
    digest_ok: bool
    digest_text: str | None

    @property
    def ok(self) -> bool:
        """Clean, and the digest (if given) matches."""
        return self.report.ok and self.digest_ok

    def to_json(self) -> dict[str, Any]:
        """The `--output json` form."""
        report, chain = self.report, self.report.chain
        return {
            "ok": report.ok,
            "entries": report.entries,
            "torn_tail": report.torn_tail,
            "segments": [
                {
                    "segment": s.info.path.name,
                    "base_offset": s.info.base_offset,
                    "entries_checked": s.entries,
                    "size_bytes": s.info.size_bytes,
                    "error": None if s.error is None else str(s.error),
                }
                for s in report.segments
            ],
            "problems": [str(p) for p in report.problems],
            "chain": None
            if chain is None
            else {
                "ok": chain.ok,
                "origin": chain.origin,
                "stored_from": chain.stored_from,
                "breaks": [str(b) for b in chain.breaks],
                "first_break_offset": chain.breaks[0].first_offset if chain.breaks else None,
                "unrecorded_blocks": chain.unrecorded_blocks,
                "missing": [p.name for p in chain.missing],
                "description": chain.describe(),
            },
            "digest": None
            if self.digest is None
            else {
                "token": self.digest.token(),
                "matches": self.digest_ok,
                "detail": self.digest_text,
            },
        }


def check_history(history: HistoryDir, digest: LogDigest | None) -> VerifyOutcome:
    """`log verify [--digest]`'s checks over `history`'s directory.

    `mlog archive verify` runs them over a view of the archive alone.
    """
    progress = Progress("verifying")
    report = verify_log(
        history.directory(),
        progress=progress.advance,
        chain_values_at=() if digest is None else (digest.end_offset,),
    )
    progress.finish()
    digest_ok, digest_text = (True, None) if digest is None else _check_digest(report, digest)
    if digest is not None and digest.root is not None and digest_text is not None:
        if report.chain is not None and digest.end_offset < report.chain.log_start:
            digest_ok, digest_text = check_trimmed_digest(history, digest, digest_text)
        else:
            digest_ok, digest_text = _with_root(history, digest, digest_ok, digest_text)
    return VerifyOutcome(report=report, digest=digest, digest_ok=digest_ok, digest_text=digest_text)


def _check_digest(report: VerifyReport, digest: LogDigest) -> tuple[bool, str]:
    """(matches, one line) for a digest checked against the chain `verify` recomputed."""
    token = digest.token()
    chain = report.chain
    value = None if chain is None else chain.value_at(digest.end_offset)
    if value == digest.chain:
        return True, (
            f"digest {token}: MATCHES: the log up to offset {digest.offset} is the one the "
            "digest was taken from"
        )
    if chain is not None and value is None and digest.end_offset < chain.log_start:
        return False, (
            f"digest {token}: CANNOT BE CHECKED: the log starts at offset {chain.log_start}, "
            f"after the digest's offset {digest.offset} (those entries were trimmed); check a "
            f"digest taken at offset {chain.log_start - 1} or later"
        )
    if value is None and chain is not None and chain.lost_at is not None:
        why = (
            f"damage at offset {chain.lost_at} (listed above) keeps the chain from being "
            "recomputed up to the digest's offset"
        )
    elif value is None:
        why = (
            f"offset {digest.offset} is not the last offset of a block of this log (the log "
            "was cut and written again, or the digest is from another log)"
        )
    else:
        breaks = (
            [] if chain is None else [b for b in chain.breaks if b.first_offset <= digest.offset]
        )
        why = "the entries up to it hash to another value" + (
            f"; the first block that does not follow: {breaks[0]}" if breaks else ""
        )
    return False, f"digest {token}: DOES NOT MATCH: {why}"


def _check_root(history: HistoryDir, digest: LogDigest, expected: bytes) -> tuple[bool | None, str]:
    """(whether the log's Merkle root is `expected`, the v2 token's; None: not checkable; why)."""
    try:
        with history.reader() as log:
            segments = log.storage.segments
            start = segments[0].base_offset if segments else 0
            if start == 0:
                root = recompute_root(segments, digest.end_offset)
                where = "hashed from the entries"
            else:
                root = root_across_start(log.directory, segments, digest.end_offset)
                where = (
                    f"the entries before offset {start} were trimmed: their leaf hashes from "
                    "the merkle/ index, the entries from there on hashed as they are"
                )
    except MetadataLogError as exc:
        return None, f"the Merkle root was not checked: {exc}"
    if root == expected:
        return True, f"the Merkle root over entries 0..{digest.offset} matches ({where})"
    return False, (
        f"the Merkle root over entries 0..{digest.offset} is {root.hex()[:16]}..., not the "
        f"token's {expected.hex()[:16]}... ({where})"
    )


def _with_root(
    history: HistoryDir, digest: LogDigest, chain_ok: bool, chain_text: str
) -> tuple[bool, str]:
    """The digest's line with a v2 token's Merkle root checked too: which part failed."""
    if digest.root is None:
        return chain_ok, chain_text
    root_ok, root_text = _check_root(history, digest, digest.root)
    token = digest.token()
    if chain_ok and root_ok is False:
        return False, (
            f"digest {token}: DOES NOT MATCH: the hash chain matches, but {root_text}: the "
            "token's root is not this log's (it was altered, or is from another digest)"
        )
    if chain_ok:
        return True, f"{chain_text}; hash chain and {root_text}" if root_ok else (
            f"{chain_text} (hash chain); {root_text}"
        )
    if root_ok:
        return False, f"{chain_text}; {root_text}, so the hash chain part of the token differs"
    return False, f"{chain_text}; {root_text}"


def repair_hint(report: VerifyReport) -> str:
    """What to do about the damage `report` found."""
    errors = report.errors
    if not errors and report.chain is not None and report.chain.missing:
        return (
            "restore the missing chain files from a replica or backup; or, once `mlog log "
            "verify --digest TOKEN` with a digest kept outside MATCHES, copy the log with "
            "`mlog log export --with-secrets | mlog log import --data-dir NEW` (the copy is "
            "chained afresh)"
        )
    offsets = [e.first_offset for e in errors if e.first_offset is not None]
    if any(not e.repairable for e in errors) or not offsets:
        return "restore the damaged or missing files from a replica or backup"
    return (
        "restore the damaged or missing files from a replica or backup, or cut the log before "
        f"the damage with `mlog log truncate --after-offset {min(offsets) - 1}`"
    )


def check_trimmed_digest(
    history: HistoryDir, digest: LogDigest, chain_text: str
) -> tuple[bool, str]:
    """(matches, one line) for a v2 `digest` below the log's start.

    `chain_text` says why its chain part cannot be checked: kept when the index cannot
    answer either.
    """
    assert digest.root is not None
    token = digest.token()
    try:
        with history.reader() as log:
            segments = log.storage.segments
            start = segments[0].base_offset
            root = root_at(log.directory, segments, digest.end_offset)
    except MetadataLogError as exc:
        return False, f"{chain_text}; the Merkle root was not checked either: {exc}"
    if root != digest.root:
        return False, (
            f"digest {token}: DOES NOT MATCH: the Merkle root over entries 0..{digest.offset}, "
            f"from the leaf hashes the merkle/ index keeps of them (trimmed: the log starts at "
            f"offset {start}), is {root.hex()[:16]}..., not the token's {digest.root.hex()[:16]}..."
        )
    return True, (
        f"digest {token}: MATCHES: entries 0..{digest.offset} were trimmed (the log starts at "
        f"offset {start}); the merkle/ index keeps their leaf hashes and the Merkle root over "
        "them is the token's, so they are the entries the digest was taken over (the hash "
        "chain part cannot be recomputed without the entries)"
    )
