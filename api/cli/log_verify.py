"""`mlog log verify [--digest TOKEN]`: every block, link and checkpoint of the log checked.

`verify_history` prints the checks of api/history_checks.py over a history directory (the
data directory's log, or its view over an archive: api/history_dir.py); `mlog archive verify`
prints them over a view of the archive alone (`write_outcome`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_OK,
    CliError,
    add_archive_options,
    add_global_options,
)
from api.cli.output import print_table
from api.cli.targets import open_history
from api.history_checks import VerifyOutcome, check_history, repair_hint
from metadata_log.digest import DigestError, LogDigest, parse_digest
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


def write_outcome(outcome: VerifyOutcome, out: TextIO) -> None:
    """`log verify`'s table and lines, as a person reads them."""
    report = outcome.report
    rows = [
        (
            s.info.path.name,
            s.entries,
            s.info.size_bytes,
            "ok" if s.error is None else f"DAMAGED at byte {s.error.position}: {s.error.reason}",
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
    if outcome.digest_text is not None:
        out.write(outcome.digest_text + "\n")
    verdict = "clean" if report.ok else "DAMAGED"
    out.write(f"{verdict}: {report.entries} entries in {len(report.segments)} segments\n")
    if not report.ok:
        out.write(f"repair: {repair_hint(report)}\n")


def verify_history(
    history: HistoryDir, settings: Settings, digest: LogDigest | None, out: TextIO
) -> int:
    """`log verify [--digest]` over `history`'s directory, printed; the exit code."""
    outcome = check_history(history, digest)
    if settings.output == "json":
        out.write(json.dumps(outcome.to_json()) + "\n")
    else:
        write_outcome(outcome, out)
    return EXIT_OK if outcome.ok else EXIT_DAMAGED


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
