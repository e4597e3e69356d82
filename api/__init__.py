"""Who may ask, and how: rooms that import only downward.

- `api.cli`: the `mlog` command, one module per noun.
- `api.client` / `api.server`: the asyncio client and server shells; `api.protocol` is the
  sans-IO wire core both of them use.
- `api.service`: the log, the image and the controller together (group commit, snapshots,
  settings).

Below them all, `replay.controller` holds the domain rules (commands in, records and answers
out) and `replay.security` the pure security rules, so replay uses the same limits.

docs/architecture.md maps what lives where.
"""
