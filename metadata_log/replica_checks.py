"""What a replica checks of blocks before writing them: their place, epochs, times and bodies.

Shared by the file log (`ReplicaLog`) and the in-memory one (`MemoryReplicaLog`), so that both
refuse the same blocks with the same messages (their conformance suite compares them).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from metadata_log.container import MAX_BLOCK_BODY
from metadata_log.errors import LogError, ReplicaBlockError
from metadata_log.replica import ReplicaBlock
from metadata_log.segment import decoder_failure
from metadata_log.writer import check_batch
from records.codec import RecordBlock, RecordCodec
from records.fields import INT32_MAX
from records.model import Record


def check_blocks(
    blocks: Sequence[ReplicaBlock],
    *,
    end_offset: int,
    last_epoch: int,
    last_timestamp: int,
    codec: RecordCodec | None,
) -> None:
    """Raise ReplicaBlockError unless `blocks` fit, in order, at the end of a log.

    The log ends before `end_offset`, with entries of `last_epoch` stamped `last_timestamp`.
    With a `codec`, each body is also decoded and checked against its block's header.
    """
    expected = end_offset
    for block in blocks:
        if not isinstance(block, ReplicaBlock):
            raise ReplicaBlockError(f"{type(block).__name__} is not a ReplicaBlock")
        where = _where(block)
        _check_size(block, where)
        if block.first_offset != expected:
            kind = "leaves a gap after" if block.first_offset > expected else "overlaps"
            raise ReplicaBlockError(
                f"{where} {kind} the log, which ends before offset {expected}; fetch from "
                f"offset {expected}"
            )
        if not last_epoch <= block.epoch <= INT32_MAX:
            raise ReplicaBlockError(
                f"{where} has epoch {block.epoch} after the log's epoch {last_epoch}: epochs "
                "never go down (and fit an int32); truncate the divergent tail first"
            )
        if block.timestamp < last_timestamp:
            raise ReplicaBlockError(
                f"{where} has timestamp {block.timestamp}, before the log's last entry "
                f"({last_timestamp}): timestamps never go down along the log"
            )
        if codec is not None:
            check_body(block, where, codec)
        expected = block.end_offset
        last_epoch = block.epoch
        last_timestamp = block.timestamp


def checked_records(block: ReplicaBlock, codec: RecordCodec) -> RecordBlock:
    """The records of another node's block, once its body is checked (`check_body`).

    Its size is checked first (as `check_blocks` does), then its body. What a follower
    replays once the block is committed: the block's bytes as written, so its records need
    not be read back and decoded again. Raises ReplicaBlockError; its place in a log is
    `check_blocks`'s.
    """
    where = _where(block)
    _check_size(block, where)
    return check_body(block, where, codec)


def _where(block: ReplicaBlock) -> str:
    return f"replica block of offsets {block.first_offset}..{block.last_offset}"


def _check_size(block: ReplicaBlock, where: str) -> None:
    if block.count < 1 or not block.body or len(block.body) > MAX_BLOCK_BODY:
        raise ReplicaBlockError(f"{where} claims {block.count} entries in {len(block.body)} bytes")


def check_body(block: ReplicaBlock, where: str, codec: RecordCodec) -> RecordBlock:
    """Raise ReplicaBlockError unless the body is the CRC-valid encoding of valid entries.

    The decoder checks what the encoder would: every value in its Avro type's range, enum
    values and union branches that exist, UTF-8 text, and entries filling the body exactly.
    Returns the decoded records.
    """
    if not block.crc_ok():
        raise ReplicaBlockError(
            f"{where}: CRC32 of the body does not match ({zlib.crc32(block.body):08x}, the "
            f"block says {block.crc32:08x}); fetch it again"
        )
    try:
        decoded = codec.decode_block(
            block.count, block.body, codec.reader_array_schema(codec.entry_schema_json)
        )
    except MemoryError:
        raise
    except Exception as exc:
        raise ReplicaBlockError(
            f"{where}: its body does not decode as {block.count} entries ({decoder_failure(exc)})"
        ) from None
    offsets = decoded.offsets
    if len(offsets) != block.count or offsets != list(range(block.first_offset, block.end_offset)):
        raise ReplicaBlockError(
            f"{where}: its {len(offsets)} entries hold offsets {offsets[0]}..{offsets[-1]}"
        )
    stamps = zip(decoded.epochs, decoded.timestamps, strict=True)
    for i, (epoch, timestamp) in enumerate(stamps):
        if epoch != block.epoch or timestamp != block.timestamp:
            raise ReplicaBlockError(
                f"{where}: entry {offsets[i]} has epoch {epoch} and timestamp {timestamp}, "
                f"the block says {block.epoch} and {block.timestamp}"
            )
    return decoded


def new_block(
    codec: RecordCodec,
    batches: Sequence[tuple[Sequence[Record], str | None]],
    *,
    first_offset: int,
    epoch: int,
    timestamp: int,
) -> ReplicaBlock:
    """`batches` encoded as one block of entries `first_offset..` of `epoch`, for either log.

    Raises `RecordError` if a record does not encode and `LogError` for an empty batch or an
    offset, epoch or timestamp out of range.
    """
    checked = [(check_batch(records), principal) for records, principal in batches]
    if not checked:
        raise LogError("a block needs at least one batch")
    if first_offset < 0 or not 0 <= epoch <= INT32_MAX or timestamp < 0:
        raise LogError(
            f"a block needs an offset >= 0, an int32 epoch >= 0 and a timestamp >= 0, got "
            f"offset {first_offset}, epoch {epoch}, timestamp {timestamp}"
        )
    count, body = codec.encode_batches(
        checked, first_offset=first_offset, epoch=epoch, timestamp=timestamp
    )
    return ReplicaBlock(
        first_offset=first_offset,
        count=count,
        epoch=epoch,
        timestamp=timestamp,
        body=body,
        crc32=zlib.crc32(body),
    )
