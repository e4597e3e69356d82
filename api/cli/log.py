"""`mlog log ...`: inspect and maintain the log itself."""

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
    count_arg,
    offset_arg,
)
from api.cli.interrupts import typed_lines
from api.cli.log_verify import add_verify_verb, parsed_digest
from api.cli.output import format_time, print_table
from api.cli.targets import open_history, open_target
from api.progress import Progress
from api.targets import QUORUM_STATE, open_reader
from api.write_interrupts import writes_finish
from metadata_log.digest import DigestError, LogDigest
from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
from metadata_log.errors import LogCorruptionError
from metadata_log.log import MetadataLog
from metadata_log.reader import LogReader
from metadata_log.repair import truncate_after
from metadata_log.replica_log import ReplicaLog
from records.errors import RecordError
from records.json_form import record_from_json, record_to_json
from replay.append import append_replayed_batches
from replay.timetravel.security import redacted, shown_json

if TYPE_CHECKING:
    from api.service.settings import Settings
    from records.entry import LogEntry
    from records.model import Record


def entry_to_json(entry: LogEntry, *, secrets: bool = True) -> dict[str, Any]:
    """The JSON form of a log entry (one line of `mlog log dump --output json`).

    Without `secrets`, credentials are `redacted`: still records `log append` takes back.
    """
    return {
        "offset": entry.offset,
        "epoch": entry.epoch,
        "timestamp": entry.timestamp,
        "principal": entry.principal,
        "record": record_to_json(entry.record if secrets else redacted(entry.record)),
    }


def cmd_log_dump(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print entries, one line each, like Kafka's dump-log tool with its metadata decoder.

    Reads the data directory, or the server's log through FetchLog with --bootstrap-server;
    `--follow` keeps printing new entries until interrupted. A damaged log fails with one
    line, unless `--up-to-damage`: then the entries before the damage are printed, a warning
    line names it, and the exit code is 1. Credentials show mechanism and iterations only; their
    salts and keys only with `--show-secrets`, on the data directory (a server never sends them).
    """
    if getattr(args, "show_secrets", False) and settings.bootstrap_server is not None:
        raise CliError(
            "--show-secrets reads the data directory; a server never sends salts or keys"
        )
    if getattr(args, "up_to_damage", False):
        return _dump_up_to_damage(args, settings, out)
    # `--follow` ends only by Ctrl-C: exit 130 as every command (`main`), what it printed intact.
    with open_target(settings, args, check_pending=False) as target:
        entries = target.entries(gt=args.gt, lte=args.lte, limit=args.limit, follow=args.follow)
        for entry in entries:
            _print_entry(entry, settings, out, secrets=getattr(args, "show_secrets", False))
            if args.follow:
                out.flush()  # a follower's reader sees each entry as it comes
    return EXIT_OK


def _print_entry(entry: LogEntry, settings: Settings, out: TextIO, *, secrets: bool) -> None:
    if settings.output == "json":
        line = json.dumps(entry_to_json(entry, secrets=secrets), separators=(",", ":"))
        out.write(line + "\n")
    else:
        # People see no salt or key: "(hidden)" even with --show-secrets.
        payload = json.dumps(_shown(entry.record), separators=(",", ":"))
        out.write(
            f"offset: {entry.offset} epoch: {entry.epoch} "
            f"timestamp: {format_time(entry.timestamp)} "
            f"principal: {entry.principal or '-'} payload: {payload}\n"
        )


def _shown(record: Record) -> Any:
    """A record as a table row shows it: internal bookkeeping compactly.

    A ClientWriteRecord (the server's note of an answered write, for retries) carries the
    answer's bytes: a row shows their size, not the base64 of them (`--output json` keeps
    them, for copies).
    """
    from records.model import ClientWriteRecord

    if isinstance(record, ClientWriteRecord):
        return {
            "type": "CLIENT_WRITE_RECORD",
            "internal": "the answer to a client's write, kept for its retries",
            "data": {
                "client_id": str(record.client_id),
                "sequence": record.sequence,
                "principal": record.principal,
                "api_key": record.api_key,
                "response": f"<{len(record.response)} bytes>",
            },
        }
    return shown_json(record)


def _dump_up_to_damage(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """`log dump --up-to-damage`: the entries before the first damage, then a warning line."""
    if args.follow:
        raise CliError("--up-to-damage reads what is there; it cannot be used with --follow")
    with open_history(settings, args) as history:
        log = LogReader.open_up_to_damage(history.directory(), config=settings.log)
        damage: LogCorruptionError | None = log.damage
        try:
            for entry in log.read(gt=args.gt, lte=args.lte, limit=args.limit):
                _print_entry(entry, settings, out, secrets=getattr(args, "show_secrets", False))
        except LogCorruptionError as exc:
            damage = exc
        finally:
            log.close()
    if damage is None:
        return EXIT_OK
    out.flush()
    print(f"mlog: warning: stopped before the damage: {damage}", file=sys.stderr)
    return EXIT_DAMAGED


def cmd_log_digest(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print the hash chain's digest token at an offset (default: the log's last offset)."""
    from metadata_log.merkle import MerkleError, root_at

    if settings.bootstrap_server:
        return _remote_digest(args, settings, out)
    with open_history(settings, args) as history, history.reader() as log:
        try:
            digest = log.digest(args.at_offset)
        except DigestError as exc:
            raise CliError(str(exc)) from None
        try:
            root: bytes | None = root_at(log.directory, log.storage.segments, digest.end_offset)
        except MerkleError as exc:
            # A log that starts after a snapshot it installed, or one trimmed before its
            # entries were indexed: the chain still gives a digest (v1), without a root.
            sys.stderr.write(f"note: a v1 digest (hash chain only, no Merkle root): {exc}\n")
            root = None
    digest = LogDigest(offset=digest.offset, chain=digest.chain, root=root)
    if settings.output == "json":
        out.write(json.dumps(digest.to_json()) + "\n")
    else:
        out.write(digest.token() + "\n")
    return EXIT_OK


def cmd_log_truncate(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Cut the log after an offset, moving what is removed to <log dir>/quarantine/.

    The explicit repair of a damaged log: never run by anything else. Refuses a healthy log
    unless --force, an offset inside a block, and anything that would keep damaged data.
    """
    if not settings.log_dir.is_dir():
        raise CliError(f"there is no log at {settings.log_dir}; check --data-dir")
    with writes_finish():  # a Ctrl-C waits for the cut; once made, the command says it
        report = truncate_after(
            settings.log_dir, args.after_offset, force=args.force, reason=args.reason or ""
        )
        moved = list(report.moved)
        state = settings.data_dir / QUORUM_STATE
        if state.exists():
            # A quorum node that lost entries may have lost committed ones: with its vote kept
            # it could help elect a leader without them. Without its quorum-state it catches
            # up as an observer before it votes again (KIP-642's lesson; docs/replication.md).
            kept = report.quarantine / QUORUM_STATE
            state.replace(kept)
            moved.append(
                f"{QUORUM_STATE} (this quorum node catches up from the leader before it votes)"
            )
    if settings.output == "json":
        out.write(
            json.dumps(
                {
                    "after_offset": report.after_offset,
                    "quarantine": str(report.quarantine),
                    "moved": moved,
                    "problems": list(report.problems),
                }
            )
            + "\n"
        )
    else:
        out.write(f"the log now ends at offset {report.after_offset}\n")
        for line in moved:
            out.write(f"moved to quarantine: {line}\n")
        out.write(f"what was removed, and why, is kept in {report.quarantine}\n")
        out.write("snapshots taken after that offset no longer match the log and are not used\n")
    return EXIT_OK


def cmd_log_trim(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Remove the whole segments below the newest snapshot: the log's start moves forward.

    The log is this product's history (time travel, audit), so nothing is ever trimmed
    unless an operator asks. Only segments whose entries all lie below the newest snapshot
    that belongs to this log and passes its checksum go; the segment holding that
    snapshot's offset stays, so the snapshot is still checked against the log. Takes the
    writer lock: the node is stopped. With `--archive-url`, no segment the archive does not
    hold goes: the trim stops at the archive's end, and says so.
    """
    from api.cli.targets import archive_of
    from api.service.snapshots import existing_store
    from replay.timetravel import snapshot_matches_log

    if not settings.log_dir.is_dir():
        raise CliError(f"there is no log at {settings.log_dir}; check --data-dir")
    archive = archive_of(settings, args)
    archived: tuple[int, int] | None = None
    if archive is not None:
        from metadata_log.archive import read_manifest

        run = read_manifest(archive.location).run
        archived = (run[0].base_offset, run[-1].next_offset) if run else (0, 0)
    store = existing_store(settings)
    if store is None:
        raise CliError(
            "there is no snapshot to trim before: take one first (`mlog snapshot create`, or "
            "let the server's policy take it)"
        )
    quorum = (settings.data_dir / QUORUM_STATE).exists() or (
        settings.log_dir / EPOCH_CHECKPOINT_NAME
    ).exists()
    # A quorum node's snapshots are of committed state only (its policy snapshots committed
    # images; `mlog snapshot create` refuses its directory), so the trim stays below the
    # committed offset; a follower below the new start catches up by FetchSnapshot.
    opener = ReplicaLog.open if quorum else MetadataLog.open
    try:
        with opener(settings.log_dir, config=settings.log) as log:
            snapshot = None
            for info in store.snapshots(gt=log.log_start_offset - 1, desc=True):
                if snapshot_matches_log(log, info) and store.verify(info.id).ok:
                    snapshot = info
                    break
            if snapshot is None:
                raise CliError(
                    "no snapshot of this log at or after its start passes its checks; take one "
                    "(`mlog snapshot create`) and check it (`mlog snapshot verify`)"
                )
            before = log.log_start_offset
            cut = snapshot.offset
            if archived is not None:
                # Every removed entry must be in the archive's run: from the log start on.
                held = archived[1] if archived[0] <= before else before
                cut = min(cut, held)
            with writes_finish():  # a Ctrl-C waits for the trim; once made, the command says it
                removed = [] if args.dry_run else log.trim_before(cut)
            if args.dry_run:
                removed = [s for s in log.segments()[:-1] if s.next_offset <= cut]
            start = removed[-1].next_offset if removed else before
    finally:
        store.close()
    if archived is not None and cut < snapshot.offset:
        print(
            f"mlog: note: the trim stops at offset {cut}, where the archive's history ends "
            f"(below snapshot {snapshot.id} at offset {snapshot.offset}): segments it does not "
            "hold stay; `mlog archive upload` uploads them",
            file=sys.stderr,
        )
    freed = sum(s.size_bytes for s in removed)
    if settings.output == "json":
        out.write(
            json.dumps(
                {
                    "snapshot_id": snapshot.id,
                    "snapshot_offset": snapshot.offset,
                    "log_start_offset": start,
                    "removed": [s.path.name for s in removed],
                    "bytes": freed,
                    "dry_run": bool(args.dry_run),
                    # With an archive: where its history ends, and whether the trim stopped there.
                    **(
                        {}
                        if archived is None
                        else {"archive_end": archived[1], "capped": cut < snapshot.offset}
                    ),
                }
            )
            + "\n"
        )
        return EXIT_OK
    verb = "would remove" if args.dry_run else "removed"
    if not removed:
        out.write(
            f"nothing to trim: every segment holds entries at or after offset {snapshot.offset} "
            f"(snapshot {snapshot.id}), or is the newest; the log starts at offset {before}\n"
        )
        return EXIT_OK
    out.write(
        f"{verb} {len(removed)} segment(s), offsets {before}..{start - 1} ({freed} bytes), "
        f"below snapshot {snapshot.id} at offset {snapshot.offset}\n"
    )
    kept = "in the archive" if archived is not None else "only in the snapshots"
    out.write(
        f"the log {'would start' if args.dry_run else 'now starts'} at offset {start}; the state "
        f"before it is kept {kept}\n"
    )
    return EXIT_OK


def cmd_log_segments(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List the segments with their offset ranges, sizes and newest timestamps."""
    with open_reader(settings) as log:
        infos = log.segments()
    if settings.output == "json":
        items = [
            {
                "segment": i.path.name,
                "base_offset": i.base_offset,
                "next_offset": i.next_offset,
                "size_bytes": i.size_bytes,
                "max_timestamp": i.max_timestamp,
            }
            for i in infos
        ]
        out.write(json.dumps(items) + "\n")
    else:
        rows = [
            (
                i.path.name,
                i.base_offset,
                i.next_offset - 1 if i.next_offset > i.base_offset else "-",
                i.size_bytes,
                format_time(i.max_timestamp) if i.max_timestamp >= 0 else "-",
            )
            for i in infos
        ]
        print_table(rows, ("segment", "first", "last", "bytes", "newest"), out)
    return EXIT_OK


def _read_batches(
    stream: TextIO, source: str, principal: str | None
) -> list[tuple[list[Record], str | None]]:
    """Records from JSON lines, grouped in runs of the same principal.

    A line of `mlog log dump --output json` keeps its entry's principal, unless `principal`
    (--principal) is given, which then applies to every record.
    """
    batches: list[tuple[list[Record], str | None]] = []
    try:
        lines = typed_lines(stream) if stream.isatty() else list(stream)
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{source} is not UTF-8 text (byte {exc.start}); give the JSON lines "
            "`mlog log dump --output json` prints"
        ) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{source} line {number} is not JSON: {exc.msg}") from None
        who = principal
        if isinstance(obj, dict) and "record" in obj:  # a line of `mlog log dump --output json`
            stored = obj.get("principal")
            if principal is None and stored is not None:
                if not isinstance(stored, str):
                    raise CliError(f"{source} line {number}: the principal must be a string")
                who = stored
            obj = obj["record"]
        try:
            record = record_from_json(obj)
        except RecordError as exc:
            raise CliError(f"{source} line {number}: {exc}") from None
        if batches and batches[-1][1] == who:
            batches[-1][0].append(record)
        else:
            batches.append(([record], who))
    if not batches:
        raise CliError(f"{source} holds no records; give one JSON record per line")
    return batches


def cmd_log_append(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Append JSON records (one per line) as one atomic block, if it replays: a repair tool.

    Lines printed by `mlog log dump --output json` keep their principal, so a dump piped into
    `log append` copies who asked for each change.
    """
    if args.file == "-":
        batches = _read_batches(sys.stdin, "standard input", args.principal)
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                batches = _read_batches(f, args.file, args.principal)
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
    progress = Progress("replaying the log")
    try:
        with MetadataLog.open(settings.log_dir, config=settings.log) as log:
            # Only a block that replays onto the log's image is appended (else nothing is).
            first, last = append_replayed_batches(
                log, batches, progress=progress.advance, while_appending=writes_finish
            )
    finally:
        progress.finish()
    if settings.output == "json":
        out.write(json.dumps({"first_offset": first, "last_offset": last}) + "\n")
    else:
        out.write(f"appended {last - first + 1} records at offsets {first}..{last}\n")
    return EXIT_OK


def _remote_digest(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """A node's digest through DescribeLogDigest (a v1 token: the chain value, no root)."""
    from api.cli.targets import client_security
    from api.targets import RemoteTarget

    offset = -1 if args.at_offset is None else args.at_offset
    target = RemoteTarget(settings.bootstrap_server or "", security=client_security(args))
    try:
        answer = target.wait(lambda: target.client.log_digest(offset))
    finally:
        target.close()
    if answer.offset < 0:
        raise CliError("the node has committed nothing yet, or its log keeps no hash chain")
    if settings.output == "json":
        out.write(
            json.dumps(
                {
                    "token": answer.token,
                    "offset": answer.offset,
                    "chain": answer.chain.hex(),
                    "committed_offset": answer.committed_offset,
                }
            )
            + "\n"
        )
    else:
        out.write(answer.token + "\n")
    return EXIT_OK


def cmd_log_prove(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Print a Merkle inclusion proof (--offset) or consistency proof (--from-digest), as JSON.

    The digest(s) must be v2 tokens (with a Merkle root) of this log: the proof is checked
    against the root the token holds before it is printed.
    """
    from metadata_log.merkle import prove_consistency, prove_inclusion

    digest = parsed_digest(args.digest)
    older = parsed_digest(args.from_digest)
    if digest is None:
        raise CliError("give --digest TOKEN: the v2 digest the proof is checked against")
    if (args.offset is None) == (older is None):
        raise CliError(
            "give --offset N (an inclusion proof) or --from-digest TOKEN (a consistency proof)"
        )
    for token in (digest, older):
        if token is not None and token.root is None:
            raise CliError(
                f"{token.token()} has no Merkle root (a v1 token): take a v2 digest with "
                "`mlog log digest`"
            )
    proof: Any
    with open_history(settings, args) as history, history.reader() as log:
        try:
            segments = log.storage.segments
            if older is None:
                proof = prove_inclusion(log.directory, segments, args.offset, digest.end_offset)
                roots = [(digest, proof.root)]
            else:
                proof = prove_consistency(
                    log.directory, segments, older.end_offset, digest.end_offset
                )
                roots = [(older, proof.first_root), (digest, proof.second_root)]
        except DigestError as exc:
            raise CliError(str(exc)) from None
    for token, root in roots:
        if token.root != root:
            raise CliError(
                f"the log's Merkle root over entries 0..{token.offset} is not the one in "
                f"{token.token()}: the log is not the one the digest was taken from (run "
                "`mlog log verify --digest` on it)"
            )
    out.write(json.dumps(proof.to_json(), indent=None if settings.output == "json" else 2) + "\n")
    return EXIT_OK


def add_verbs(log: argparse.ArgumentParser) -> None:
    """The verbs of `mlog log` and their flags, on the noun's parser."""
    add_archive_options(log, reads=False)
    verbs = log.add_subparsers(dest="verb", metavar="VERB", required=True)

    dump = verbs.add_parser("dump", help="print entries, one line each")
    add_global_options(dump)
    dump.add_argument("--gt", type=offset_arg, help="only entries with offset > N")
    dump.add_argument("--lte", type=offset_arg, help="only entries with offset <= N")
    dump.add_argument("--limit", type=count_arg, help="at most N entries")
    dump.add_argument(
        "--follow",
        action="store_true",
        help="then wait for new entries and print each as it is committed (Ctrl-C stops)",
    )
    dump.add_argument(
        "--up-to-damage",
        action="store_true",
        help="on a damaged log, print the entries before the damage, then a warning (exit 1)",
    )
    dump.add_argument(
        "--show-secrets",
        action="store_true",
        help="with --output json, keep credentials' salts and keys (a byte-exact copy of the "
        "log for `log append`); data directory only",
    )
    # The only `log` command that also runs through a server (FetchLog): the others read or
    # write the log's files.
    add_archive_options(dump)
    dump.set_defaults(handler=cmd_log_dump, remote=True)

    add_verify_verb(verbs)

    digest = verbs.add_parser(
        "digest",
        help="print the hash chain's digest token, for an auditor to keep outside the system",
    )
    add_global_options(digest)
    digest.add_argument(
        "--at-offset",
        type=offset_arg,
        metavar="N",
        help="the digest after offset N, the last offset of a block (default: the log's last; "
        "with --bootstrap-server: the node's committed offset)",
    )
    # Also through a server (DescribeLogDigest): compare nodes by asking each for one offset.
    add_archive_options(digest)
    digest.set_defaults(handler=cmd_log_digest, remote=True)

    prove = verbs.add_parser(
        "prove",
        help="print a Merkle proof: an entry is in the log as of a digest, or two digests agree",
    )
    add_global_options(prove)
    prove.add_argument("--digest", required=True, metavar="TOKEN", help="the (newer) v2 digest")
    prove.add_argument("--offset", type=offset_arg, metavar="N", help="inclusion proof of entry N")
    prove.add_argument(
        "--from-digest",
        metavar="TOKEN",
        help="consistency proof from this older v2 digest to --digest",
    )
    add_archive_options(prove)
    prove.set_defaults(handler=cmd_log_prove)

    truncate = verbs.add_parser(
        "truncate",
        help="repair: cut the log after an offset, keeping what is removed in log/quarantine/",
    )
    add_global_options(truncate)
    truncate.add_argument(
        "--after-offset",
        type=offset_arg,
        required=True,
        metavar="N",
        help="the last offset to keep (-1: none); must end a block (`log verify` says which)",
    )
    truncate.add_argument(
        "--force", action="store_true", help="cut even a healthy log (drops acknowledged entries)"
    )
    truncate.add_argument("--reason", help="why, for the note kept with the removed data")
    truncate.set_defaults(handler=cmd_log_truncate)

    trim = verbs.add_parser(
        "trim",
        help="remove the segments below the newest snapshot (the log's start moves forward)",
    )
    add_global_options(trim)
    trim.add_argument(
        "--before-snapshot",
        action="store_true",
        required=True,
        help="trim below the newest snapshot that belongs to this log and passes its checksum",
    )
    trim.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    add_archive_options(trim)
    trim.set_defaults(handler=cmd_log_trim)

    segments = verbs.add_parser("segments", help="list the segments")
    add_global_options(segments)
    segments.set_defaults(handler=cmd_log_segments)

    append = verbs.add_parser(
        "append",
        help="append JSON records (one per line, as `log dump --output json` prints) atomically",
    )
    add_global_options(append)
    append.add_argument("--file", default="-", help="file of JSON lines (default: stdin)")
    append.add_argument(
        "--principal",
        help="who is appending (stored with each entry; by default a dumped line's principal)",
    )
    append.set_defaults(handler=cmd_log_append)

    from api.cli.log_export import add_export_verbs

    add_export_verbs(verbs)
