"""Request decoding through kio's native reader and through the generated readers, in one run.

Usage: python bench/decode_bench.py [--number N] [--repeat K]

Frames: the server benchmark's three requests (bench/server_bench.py): CreateTopics v7 of one
topic, Metadata v12 of one topic by name, DeleteTopics v6 of one topic by id.

Rows (per frame; microseconds per call, the median of K repetitions of N calls, each timing
paired with its baseline right before it):
  decode_request   `codec.decode_request` with kio's readers alone (the baseline: what it
                   was) vs as the server runs it (a header without tags and the body read by
                   the compiled reader, `api.protocol.native_reader`; where it gives up, the
                   generated readers, which refuse impossible array counts; anything else
                   through `generated_reader.read_request`, kio as the fallback)
  readers          the two entity readers alone, header then body: kio's vs the generated ones
  compiled body    the body alone: the generated reader (the baseline) vs the compiled one

And the answer a quorum's follower reads most, a FetchResponse v17 of seven batches of 200
bytes: `generated_reader.read_response` (the generated readers, the baseline) vs
`codec.decode_response` as the links run it (the compiled reader where it reads the frame).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kio.serial import entity_reader
from server_bench import create_topic_v7, delete_topic_v6, metadata_v12

from api.protocol import codec, generated_reader, generated_reader_codegen, native_reader
from api.protocol.quorum import apis, responses
from api.protocol.quorum.messages import Entry, ErrorCode, FetchResponse, LeaderIdAndEpoch

FRAMES = {
    "CreateTopics v7": create_topic_v7(7, "topic-1"),
    "Metadata v12": metadata_v12(7, "topic-1"),
    "DeleteTopics v6": delete_topic_v6(7, bytes(range(16))),
}


Read = Callable[[bytes | memoryview, Any, Any], tuple[Any, Any]]
"""What `codec._read` is: a frame's header and body entities."""


class Case:
    """A call to time, with the frame reader `codec.decode_request` uses while it runs."""

    def __init__(self, call: Callable[[], Any], read: Read | None) -> None:
        self.call, self.read = call, read
        """The reader to put in `codec._read` while timing (None: the server's, as it is)."""

    def run(self) -> Any:
        """One call."""
        return self.timed(1)[0]

    def timed(self, number: int) -> tuple[Any, float]:
        """The last call's result and the microseconds per call over `number` calls."""
        saved = codec._read
        codec._read = self.read or saved  # type: ignore[assignment]  # the reader under test
        try:
            seconds = timeit.timeit(self.call, number=number)
            return self.call(), seconds / number * 1e6
        finally:
            codec._read = saved


def _kio_read(frame: bytes | memoryview, header_class: Any, body_class: Any) -> tuple[Any, Any]:
    """`codec._read` as it was: kio's own readers only (the baseline)."""
    header, used = entity_reader(header_class)(frame, 0)
    body, _ = entity_reader(body_class)(frame, used)
    return header, body


def _readers(header: Any, body: Any, frame: bytes) -> Callable[[], Any]:
    def read() -> Any:
        _, used = header(frame, 0)
        return body(frame, used)

    return read


def _body(
    read: Callable[[bytes, int], tuple[Any, int]], frame: bytes, at: int
) -> Callable[[], Any]:
    def body() -> Any:
        return read(frame, at)[0]

    return body


def fetch_answer() -> tuple[int, int, bytes]:
    """(key, version, frame without its size) of a leader's fetch answer of seven batches."""
    version = apis.send_version(apis.FETCH_KEY)
    answer = FetchResponse(
        correlation_id=7,
        error_code=ErrorCode.NONE,
        high_watermark=41,
        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=5),
        records=tuple(Entry(offset=40 + i, epoch=5, payload=bytes(200)) for i in range(7)),
    )
    return apis.FETCH_KEY, version, responses.encode_response(answer, version=version)[4:]


def _timed_pair(baseline: Case, ours: Case, number: int, repeat: int) -> tuple[float, ...]:
    """Median µs of each and the median ratio, each timing right after its baseline's."""
    base_times, our_times, ratios = [], [], []
    for _ in range(repeat):
        _, base = baseline.timed(number)
        _, mine = ours.timed(number)
        base_times.append(base)
        our_times.append(mine)
        ratios.append(mine / base)
    return statistics.median(base_times), statistics.median(our_times), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    rows = []
    for name, frame in FRAMES.items():
        key, version, _ = codec.peek_header(frame)
        body_class = codec.request_class(key, version)
        header_class = body_class.__header_schema__
        kio_read = _kio_read
        decode = lambda frame=frame: codec.decode_request(frame)  # noqa: E731
        kio_readers = _readers(entity_reader(header_class), entity_reader(body_class), frame)
        generated = _readers(
            generated_reader_codegen.compiled_reader(header_class),
            generated_reader_codegen.compiled_reader(body_class),  # type: ignore[arg-type]  # classes are hashable
            frame,
        )
        pairs = {
            "decode_request": (Case(decode, kio_read), Case(decode, None)),
            "readers": (Case(kio_readers, kio_read), Case(generated, kio_read)),
        }
        native = native_reader.native_reader(body_class)  # type: ignore[arg-type]  # classes are hashable
        if native is not None:
            used = generated_reader_codegen.compiled_reader(header_class)(frame, 0)[1]
            body = generated_reader_codegen.compiled_reader(body_class)  # type: ignore[arg-type]  # classes are hashable
            pairs["compiled body"] = (
                Case(_body(body, frame, used), None),
                Case(_body(native, frame, used), None),
            )
        for what, (baseline, ours) in pairs.items():
            if ours.run() != baseline.run():
                raise SystemExit(f"{name} {what}: the two readers disagree")
            rows.append((f"{name}: {what}", *_timed_pair(baseline, ours, args.number, args.repeat)))
    key, version, frame = fetch_answer()
    answer_class = codec.response_class(key, version)
    generated_answer = Case(lambda: generated_reader.read_response(frame, answer_class)[1], None)
    links_answer = Case(lambda: codec.decode_response(key, version, frame)[1], None)
    if generated_answer.run() != links_answer.run():
        raise SystemExit("FetchResponse: the two readers disagree")
    rows.append(
        (
            f"FetchResponse v{version}: answer",
            *_timed_pair(generated_answer, links_answer, args.number, args.repeat),
        )
    )

    print(f"{args.number:,} calls x {args.repeat} paired runs; python {platform.python_version()}")
    header = f"{'':<34}{'baseline us':>12}{'ours us':>10}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    for label, base, mine, ratio in rows:
        print(f"{label:<34}{base:>12.2f}{mine:>10.2f}{ratio:>8.2f}")
    print(
        "baseline: kio's readers (compiled body, answer: the generated readers); "
        "ours: the server's and the links'"
    )
    print("ratio: median over repetitions of (ours / the baseline run right before it)")


if __name__ == "__main__":
    main()
