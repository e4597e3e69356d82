"""`mlog log verify --digest` for a v2 token whose entries were all trimmed from the log.

The hash chain cannot be recomputed without the entries, but the `merkle/` index keeps the
leaf hashes of trimmed entries (every trim extends it first, metadata_log.merkle): the token's
Merkle root, recomputed from them, says whether they are the entries the digest was taken over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.cli.common import CliError
from metadata_log.digest import LogDigest
from metadata_log.errors import LogError

if TYPE_CHECKING:
    from api.history_dir import HistoryDir


def check_trimmed_digest(
    history: HistoryDir, digest: LogDigest, chain_text: str
) -> tuple[bool, str]:
    """(matches, one line) for a v2 `digest` below the log's start.

    `chain_text` says why its chain part cannot be checked: kept when the index cannot
    answer either.
    """
    from metadata_log.merkle import root_at

    assert digest.root is not None
    token = digest.token()
    try:
        with history.reader() as log:
            segments = log.storage.segments
            start = segments[0].base_offset
            root = root_at(log.directory, segments, digest.end_offset)
    except (LogError, CliError) as exc:
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
