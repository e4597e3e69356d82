"""An auditor's own Merkle proof verifier, written from docs/verifiable-history.md.

It imports nothing of the project: only hashlib, as an auditor's program would. It follows
the document's "Checking an inclusion proof" and "Checking a consistency proof" steps (RFC
9162 sections 2.1.3.2 and 2.1.4.2).
"""

from __future__ import annotations

import hashlib


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def token_size_and_root(token: str) -> tuple[int, bytes]:
    """(tree size, Merkle root) of a v2 digest token."""
    _, version, offset, _chain, root = token.split(":")
    assert version == "v2"
    return int(offset) + 1, bytes.fromhex(root)


def verify_inclusion(proof: dict, token: str) -> bool:  # type: ignore[type-arg]
    """Whether an inclusion proof holds against the token's tree size and root."""
    size, root = token_size_and_root(token)
    index, n = proof["leaf_index"], proof["tree_size"]
    if n != size or not 0 <= index < n:
        return False
    fn, sn = index, n - 1
    if proof["entry"] is None:  # trimmed from the log: the index's leaf hash stands for it
        r = bytes.fromhex(proof["leaf_hash"])
    else:
        r = _h(b"\x00" + bytes.fromhex(proof["entry"]))
    for p in (bytes.fromhex(x) for x in proof["path"]):
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _h(b"\x01" + p + r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _h(b"\x01" + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(proof: dict, old: str, new: str) -> bool:  # type: ignore[type-arg]
    """Whether a consistency proof holds from the older token's tree to the newer's."""
    m, first = token_size_and_root(old)
    n, second = token_size_and_root(new)
    path = [bytes.fromhex(x) for x in proof["path"]]
    if proof["first_size"] != m or proof["second_size"] != n or not 0 < m <= n:
        return False
    if m == n:
        return not path and first == second
    if m & (m - 1) == 0:  # a power of two: the old root is the first node
        path = [first, *path]
    if not path:
        return False
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _h(b"\x01" + c + fr)
            sr = _h(b"\x01" + c + sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _h(b"\x01" + sr + c)
        fn >>= 1
        sn >>= 1
    return fr == first and sr == second and sn == 0
