"""The timeline: every change as a row, filtered, a page at a time, read by offset ranges.

A page starts after an offset (`after`, the cursor a deep link carries) and reads entries
forward from there (`Metadata.read(gt=...)`, a data directory's segments or the server's
FetchLog, a page of entries at a time), until it has `limit` matching rows or has looked at
`SCAN_BUDGET` entries (`SEARCH_BUDGET` for a search): a page never loads the whole log,
whatever the filters. Its names and
before-values come from the image at the cursor (`Metadata.image(at_offset=...)`, from the
newest snapshot at or before it).

The client of a row is the client id of an idempotent write: the service writes a
`ClientWriteRecord` in the same atomic batch as the write's records, so the entries appended
together with one (same epoch, time and principal) carry its client id. Those records
themselves are bookkeeping, hidden unless `internal` is asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from api.console.changes import ENTITY_KINDS, INTERNAL_KINDS, Reading, entity_kind, kind_of
from api.console.errors import BadInput
from api.python_api import Metadata
from records.entry import LogEntry
from records.model import ClientWriteRecord
from replay.timetravel import TimeTravelError, parse_time

PAGE_ROWS = 100
"""Rows on a page unless `limit` says otherwise."""

MAX_ROWS = 1000
"""The most rows a page may ask for."""

EXPORT_ROWS = 100_000
"""The most rows one export holds (the next export starts from its `next` cursor)."""

SCAN_BUDGET = 50_000
"""The most entries one page looks at before answering with what it found."""

SEARCH_BUDGET = 25_000
"""The most entries a search page (`q`) looks at: it puts each entry the other filters keep
into words to search them (about 5 us an entry, where a filter alone costs about 1), so a
search page costs about what a filtered one does; the next page goes on from its cursor."""

MAX_FILTER = 200
"""The longest text a filter takes (characters)."""

OFFSET_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    """What the timeline shows: every field is a URL parameter of the same name."""

    after: int = -1
    """Rows with offsets after this one (the page's cursor); -1 from the log's first entry."""
    principal: str = ""
    """Only entries by this principal (exactly, e.g. `User:alice`)."""
    entity: str = ""
    """Only this kind of entity (`ENTITY_KINDS`)."""
    kind: str = ""
    """Only this kind of change: the record type without `Record` (`PartitionChange`)."""
    q: str = ""
    """Only rows whose entity or text holds this (case-insensitive)."""
    since: str = ""
    """Only entries appended at or after this time (ISO-8601 or epoch ms)."""
    until: str = ""
    """Only entries appended at or before this time."""
    internal: bool = False
    """Show the service's bookkeeping records too."""
    limit: int = PAGE_ROWS
    newest: bool = False
    """Go to the newest page: the console answers with the link of its cursor."""

    def query(self, **changed: object) -> dict[str, str]:
        """The URL parameters of these filters (with `changed` ones replaced), defaults left out."""
        values = dataclasses.replace(self, **changed)  # type: ignore[arg-type]  # checked fields
        shown: dict[str, str] = {}
        for field in dataclasses.fields(Filters):
            value = getattr(values, field.name)
            if value == field.default:
                continue
            shown[field.name] = "1" if value is True else str(value)
        return shown


def _int_param(params: Mapping[str, str], name: str, *, low: int, high: int, default: int) -> int:
    value = optional_int_param(params, name, low=low, high=high)
    return default if value is None else value


def optional_int_param(params: Mapping[str, str], name: str, *, low: int, high: int) -> int | None:
    """URL parameter `name` as an integer in `low..high`, None if absent; `BadInput` if not."""
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{name}={text[:40]!r} is not a number: give an integer") from None
    if not low <= value <= high:
        raise BadInput(f"{name}={value} is out of range: give {low}..{high}")
    return value


def _text_param(params: Mapping[str, str], name: str) -> str:
    text = params.get(name, "").strip()
    if len(text) > MAX_FILTER:
        raise BadInput(f"{name} is {len(text)} characters long: at most {MAX_FILTER}")
    return text


def _time_param(params: Mapping[str, str], name: str) -> tuple[str, int | None]:
    text = _text_param(params, name)
    if not text:
        return "", None
    try:
        return text, parse_time(text)
    except TimeTravelError as exc:
        raise BadInput(f"{name}: {exc}") from None
    except (OverflowError, ValueError):
        raise BadInput(f"{name}={text[:40]!r} is not a time this console can read") from None


def _flag(params: Mapping[str, str], name: str) -> bool:
    value = params.get(name, "")
    if value not in ("", "0", "1"):
        raise BadInput(f"{name} takes 1 (yes) or 0 (no)")
    return value == "1"


def parse_filters(params: Mapping[str, str]) -> Filters:
    """The filters of a request's URL; `BadInput` names the parameter that is wrong."""
    entity = _text_param(params, "entity")
    if entity and entity not in ENTITY_KINDS:
        raise BadInput(f"entity={entity[:40]!r} is not a kind of entity: one of {ENTITY_KINDS}")
    kind = _text_param(params, "kind")
    if kind and not kind.isidentifier():
        raise BadInput(f"kind={kind[:40]!r} is not a kind of change (e.g. PartitionChange)")
    since, since_ms = _time_param(params, "since")
    until, until_ms = _time_param(params, "until")
    if since_ms is not None and until_ms is not None and until_ms < since_ms:
        raise BadInput("until is before since: nothing can be in that range")
    return Filters(
        after=_int_param(params, "after", low=-1, high=OFFSET_MAX, default=-1),
        principal=_text_param(params, "principal"),
        entity=entity,
        kind=kind,
        q=_text_param(params, "q"),
        since=since,
        until=until,
        internal=_flag(params, "internal"),
        limit=_int_param(params, "limit", low=1, high=MAX_ROWS, default=PAGE_ROWS),
        newest=_flag(params, "newest"),
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One entry of the timeline."""

    offset: int
    timestamp: int
    principal: str | None
    client: str | None
    entity_kind: str
    entity: str
    kind: str
    text: str

    @property
    def time(self) -> str:
        """The append time, ISO-8601 UTC to the millisecond."""
        return iso_time(self.timestamp)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC to the millisecond (`2026-11-22T08:30:00.000Z`)."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """The rows of one page and where the log and the next page are."""

    rows: list[Row]
    after: int
    """The cursor the page started after."""
    next_after: int | None
    """The cursor of the next page (the last offset looked at); None at the log's end."""
    last_read: int
    """The offset of the last entry read (`after` if none was)."""
    scanned: int
    """Entries looked at."""


def time_ms(text: str) -> int | None:
    """A filter's time (already checked by `parse_filters`) in epoch ms; None if not given."""
    return parse_time(text) if text else None


def kept(
    entry: LogEntry,
    about: tuple[str, str, str],
    filters: Filters,
    since: int | None,
    until: int | None,
) -> bool:
    """Whether an entry passes the filters that need no words (all but `q`)."""
    touched, _, kind = about
    if not filters.internal and touched in INTERNAL_KINDS:
        return False
    if filters.principal and entry.principal != filters.principal:
        return False
    if filters.entity and touched != filters.entity:
        return False
    if filters.kind and kind != filters.kind:
        return False
    if since is not None and entry.timestamp < since:
        return False
    return until is None or entry.timestamp <= until


def batches(entries: Iterator[LogEntry]) -> Iterator[list[LogEntry]]:
    """Entries grouped as appended together: consecutive, same epoch, time and principal."""
    run: list[LogEntry] = []
    for entry in entries:
        if run and (
            entry.epoch != run[0].epoch
            or entry.timestamp != run[0].timestamp
            or entry.principal != run[0].principal
        ):
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


def _rows(
    batch: list[LogEntry],
    reading: Reading,
    filters: Filters,
    since: int | None,
    until: int | None,
) -> list[Row]:
    """The rows of a batch that pass the filters; only theirs are put in words."""
    client = next(
        (str(e.record.client_id) for e in batch if isinstance(e.record, ClientWriteRecord)), None
    )
    needle = filters.q.casefold()
    rows = []
    for entry in batch:
        record = entry.record
        # The filters need the entity's kind, not its name: named only in `read`, once.
        if not kept(entry, (entity_kind(record), "", kind_of(record)), filters, since, until):
            reading.follow(entry)
            continue
        described = reading.read(entry)
        if needle and not (
            needle in described.entity.casefold() or needle in described.text.casefold()
        ):
            continue  # searched for and not found: no row made
        rows.append(
            Row(
                offset=entry.offset,
                timestamp=entry.timestamp,
                principal=entry.principal,
                client=client,
                entity_kind=described.entity_kind,
                entity=described.entity,
                kind=described.kind,
                text=described.text,
            )
        )
    return rows


def read_page(metadata: Metadata, filters: Filters, *, limit: int | None = None) -> Page:
    """The page of `filters` (blocking: the console runs it on a worker thread).

    Reads the image at the cursor (a cursor past the log's end is `BadInput`) and the entries
    after it, never the image at the end of the log: a page costs its cursor's image and
    the entries it reads.
    """
    wanted = filters.limit if limit is None else limit
    since, until = time_ms(filters.since), time_ms(filters.until)
    after = filters.after
    if since is not None and after == -1:
        after = _offset_before(metadata, since)
    try:
        start = metadata.image(at_offset=after)
    except TimeTravelError as exc:
        raise BadInput(f"after={after}: {exc}") from None
    reading = Reading(start)
    rows: list[Row] = []
    scanned = 0
    cursor = after
    budget = SEARCH_BUDGET if filters.q else SCAN_BUDGET
    entries = metadata.read(gt=after if after >= 0 else None, limit=budget)
    done = False
    for batch in batches(iter(entries)):
        if until is not None and batch[0].timestamp > until:
            done = True  # appended after the range: so is everything after it
            break
        rows.extend(_rows(batch, reading, filters, since, until))
        scanned += len(batch)
        cursor = batch[-1].offset
        if len(rows) >= wanted:
            break
    # Fewer rows than asked for and the budget not spent: the log ended.
    at_end = done or (scanned < budget and len(rows) < wanted)
    return Page(
        rows=rows,
        after=after,
        next_after=None if at_end else cursor,
        last_read=cursor,
        scanned=scanned,
    )


def newest_cursor(metadata: Metadata, rows: int) -> int:
    """The cursor of the page of the last `rows` entries (reads the image at the end)."""
    return max(-1, metadata.image().provenance.offset - rows)


def _offset_before(metadata: Metadata, since: int) -> int:
    """The last offset appended before `since` (-1 if none was): where such a page starts."""
    try:
        return metadata.image(at_time=str(since - 1)).provenance.offset
    except TimeTravelError:
        return -1  # `since` is before the first entry: from the start
