"""Flip bits of a segment header's schema text under a memory cap; run by test_integrity.

Usage: `python -m tests.support.schema_flip_child <scratch dir> <cap in MiB> <sample>`.

The cap (RLIMIT_AS) is set before the log is built, so any decode that allocates without bound
dies here with a MemoryError (or, for a native allocator, a signal) instead of eating the
machine. The newest segment's header is rewritten as the code before header CRCs wrote it
(no CRC, no chain: its schema is all that stands between a flip and the decoder), and as this
code writes it. For each flip the segment is verified and read; the outcome must be a
`LogCorruptionError`, or every entry decoding exactly as written. `sample` is the number of
bits flipped in each header (0: every bit of the schema text). Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import random
import resource
import sys
from collections import Counter
from pathlib import Path

from metadata_log import LogConfig, LogCorruptionError, MetadataLog, verify_log
from metadata_log.container import MAGIC, decode_header
from metadata_log.reader import LogReader
from records import DEFAULT_CODEC, LogEntry
from records.varint import encode_long
from tests.support.record_gen import LogGenerator


def legacy_header(header_bytes: bytes) -> bytes:
    """The same header as the code before the CRC wrote it: schema, codec, base offset, sync."""
    header = decode_header(header_bytes)
    meta = {k: header.metadata[k] for k in ("avro.schema", "avro.codec", "mlog.base_offset")}
    parts = [MAGIC, encode_long(len(meta))]
    for key, value in meta.items():
        parts += [encode_long(len(key)), key.encode(), encode_long(len(value)), value]
    return b"".join([*parts, encode_long(0), header.sync])


def outcome(directory: Path, expected: list[LogEntry]) -> str:
    """How verify and a read-only read handle the log as it is now."""
    # A decoder per damaged schema would otherwise be kept for the life of the process.
    DEFAULT_CODEC._reader_arrays = {DEFAULT_CODEC.entry_schema_json: DEFAULT_CODEC._writer_array}
    try:
        report = verify_log(directory)
        with LogReader.open(directory) as log:
            got = list(log.read())
    except LogCorruptionError:
        return "LogCorruptionError"
    except MemoryError:
        return "MemoryError"
    except Exception as exc:
        return f"escaped {type(exc).__name__}"
    if got != expected:
        return "read different entries"
    return "identical" if report.ok else "verify reported damage, read identical"


def _peak_rss_kib() -> int:
    """This process's own peak resident size (KiB) since its exec.

    Linux keeps `ru_maxrss` across execve, so it reports the parent's size at the fork (a test
    worker grown past the cap made this child look over it); VmHWM belongs to the new address
    space. `ru_maxrss` where /proc is missing.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    """Build, rewrite, flip, report."""
    scratch, cap_mib, sample = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cap = cap_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    directory = scratch / "log"
    with MetadataLog.open(directory, config=LogConfig()) as log:
        for n, batch in enumerate(LogGenerator(seed=5).batches(40)):
            log.append(batch, principal=None if n % 3 == 0 else f"User:u{n % 4}")
        expected = list(log.read())
        path = log.segments()[-1].path
    original = path.read_bytes()
    header = decode_header(original)
    counts: dict[str, Counter[str]] = {}
    for form in ("legacy", "checksummed"):
        data = original
        if form == "legacy":
            data = legacy_header(original[: header.size]) + original[header.size :]
        start = data.index(header.schema_json.encode())
        bits = range(start * 8, (start + len(header.schema_json)) * 8)
        chosen = list(bits) if sample == 0 else random.Random(form).sample(bits, sample)
        seen: Counter[str] = Counter()
        for bit in chosen:
            damaged = bytearray(data)
            damaged[bit // 8] ^= 1 << (bit % 8)
            path.write_bytes(bytes(damaged))
            seen[outcome(directory, expected)] += 1
        path.write_bytes(data)
        seen["unflipped: " + outcome(directory, expected)] += 1
        counts[form] = seen
    peak = _peak_rss_kib()
    print(json.dumps({"counts": counts, "peak_rss_kib": peak, "cap_mib": cap_mib}))


if __name__ == "__main__":
    main()
