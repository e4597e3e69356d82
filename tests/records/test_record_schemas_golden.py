"""The Avro schemas derived from the record declarations are the ones the log has always written.

`tests/data/record-schemas.txt` holds, one line each, the schema of every record type and
version (named types defined inline) and the log entry schema every segment header carries,
as captured from the code before the schemas were derived from the dataclasses. A segment
written today must carry the very same bytes, so the comparison is of text, not of parsed JSON.
"""

from __future__ import annotations

import json

from records.codec import DEFAULT_CODEC
from records.schemas import CURRENT_SCHEMAS, inline_named_types
from tests.support.paths import DATA

GOLDEN = DATA / "record-schemas.txt"


def _compact(schema: object) -> str:
    return json.dumps(schema, separators=(",", ":"))


def schema_lines() -> list[str]:
    """`<branch> <schema JSON>` per record type and version, then `mlog.LogEntry <entry JSON>`."""
    lines = [
        f"{s.branch_name} {_compact(inline_named_types(s.to_avro(), set()))}"
        for s in CURRENT_SCHEMAS
    ]
    lines.append(f"mlog.LogEntry {DEFAULT_CODEC.entry_schema_json}")
    return lines


def test_every_record_schema_is_byte_identical_to_the_golden_file() -> None:
    golden = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert schema_lines()[:-1] == golden[:-1]


def test_the_entry_schema_in_segment_headers_is_byte_identical_to_the_golden_file() -> None:
    golden = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert schema_lines()[-1] == golden[-1]
    assert golden[-1].startswith("mlog.LogEntry ")


if __name__ == "__main__":  # regenerate only for a deliberate new record type or version
    GOLDEN.write_text("\n".join(schema_lines()) + "\n", encoding="utf-8")
