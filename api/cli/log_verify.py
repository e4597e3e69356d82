"""`mlog log verify [--digest TOKEN]`: every block, link and checkpoint of the log checked.

`verify_history` is the check and its report over a history directory (the data directory's
log, or its view over an archive: api/history_dir.py); `mlog archive verify` runs it over a
view of the archive alone. A v2 digest's Merkle root is checked too, from the entries or, for
trimmed ones, from the `merkle/` index (`check_trimmed_digest`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
)
from api.cli.merkle_checks import check_trimmed_digest
from api.cli.output import print_table
from api.cli.targets import open_history
from api.progress import Progress
from metadata_log.digest import DigestError, LogDigest, parse_digest
from metadata_log.verify import VerifyReport, verify_log
from records.errors import MetadataLogError

if TYPE_CHECKING:
    from api.history_dir import HistoryDir
    from api.service.settings import Settings


def cmd_log_verify(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Check every header, block and link of the log, and its checkpoints; exit 1 if damaged.

    Works on the files directly (no open, no lock), so it reports what an open refuses: every
    damaged segment, header damage included, and missing segments. Memory stays within a
    small multiple of the largest block. With `--archive-url` the archive's segments below
    the local log are checked too (a changed or missing archived object: exit 1).
    """
    if not settings.log_dir.is_dir():
        raise CliError(
            f"there is no log at {settings.log_dir}; check --data-dir (the log lives in "
            "<data-dir>/log)"
        )
    digest = parsed_digest(args.digest)
    with open_history(settings, args) as history:
        try:
            return verify_history(history, settings, digest, out)
        except MetadataLogError as exc:
            from metadata_log.archive import ArchiveDamage

            if not isinstance(exc, ArchiveDamage):
                raise
            # An archived object changed or missing is damage, as a damaged segment is.
            print(f"mlog: error: {exc}", file=sys.stderr)
            return EXIT_DAMAGED


def parsed_digest(token: str | None) -> LogDigest | None:
    """`--digest TOKEN`, parsed (a malformed token: one line, exit 2), or None."""
    if token is None:
        return None
    try:
        return parse_digest(token)
    except DigestError as exc:
        raise CliError(str(exc)) from None


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

    def write_text(self, out: TextIO) -> None:
        """The table and lines a person reads."""
        report = self.report
        rows = [
            (
                s.info.path.name,
                s.entries,
                s.info.size_bytes,
                "ok"
                if s.error is None
                else f"DAMAGED at byte {s.error.position}: {s.error.reason}",
            )
            for s in report.segments
        ]
        print_table(rows, ("segment", "entries", "bytes", "status"), out)
        for problem in report.problems:
            out.write(f"DAMAGED: {problem}\n")
        if report.torn_tail:
            out.write(f"torn tail (the next writer open truncates it): {report.torn_tail}\n")
        if report.chain is not None:
            out.write(report.chain.describe() + "\n")
        if self.digest_text is not None:
            out.write(self.digest_text + "\n")
        verdict = "clean" if report.ok else "DAMAGED"
        out.write(f"{verdict}: {report.entries} entries in {len(report.segments)} segments\n")
        if not report.ok:
            out.write(f"repair: {_repair_hint(report)}\n")


def verify_history(
    history: HistoryDir, settings: Settings, digest: LogDigest | None, out: TextIO
) -> int:
    """`log verify [--digest]` over `history`'s directory, printed; the exit code."""
    outcome = check_history(history, digest)
    if settings.output == "json":
        out.write(json.dumps(outcome.to_json()) + "\n")
    else:
        outcome.write_text(out)
    return EXIT_OK if outcome.ok else EXIT_DAMAGED


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
    from metadata_log.errors import LogError
    from metadata_log.merkle import recompute_root, root_across_start

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
    except (LogError, CliError) as exc:
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


def _repair_hint(report: VerifyReport) -> str:
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


def add_verify_verb(verbs: Any) -> None:
    """`mlog log verify` and its flags, among the verbs of `mlog log`."""
    verify = verbs.add_parser(
        "verify", help="check every header, block and segment (exit 0 clean, 1 damaged)"
    )
    add_global_options(verify)
    verify.add_argument(
        "--digest",
        metavar="TOKEN",
        help="also prove the log up to the digest's offset is the one `log digest` printed it "
        "for (exit 1 if not)",
    )
    add_archive_options(verify)
    verify.set_defaults(handler=cmd_log_verify)
