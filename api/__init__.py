"""Who may ask, and how: rooms that import only downward.

- `api.cli`: the `mlog` command, one module per noun.
- `api.client` / `api.server`: the asyncio client and server shells; `api.protocol` is the
  sans-IO wire core both of them use.
- `api.service`: the log, the image and the controller together (group commit, snapshots,
  settings).
- `api.controller`: the domain rules: commands in, records and answers out.

docs/architecture.md maps what lives where.
"""
