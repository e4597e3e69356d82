"""Who may ask, and how: rooms that import only downward.

- `api.cli`: the `mlog` command, one module per noun.
- `api.client` / `api.server`: the asyncio client and server shells; `api.protocol` is the
  sans-IO wire core both of them use.
- `api.service`: the log, the image and the controller together (group commit, snapshots,
  settings).
- `api.python_api`: `Metadata`, the public Python API (`from api import Metadata`): a data
  directory or a server, the CLI's calls as typed methods.

Below them all, `replay.controller` holds the domain rules (commands in, records and answers
out) and `replay.security` the pure security rules, so replay uses the same limits.

docs/architecture.md maps what lives where.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from api.python_api import Metadata as Metadata
    from api.python_api import MetadataApiError as MetadataApiError
    from records.model import ConfigResourceType as ConfigResourceType
    from replay.controller.errors import ApiError as ApiError
    from replay.timetravel import Entity as Entity

# mypy sees the names through the imports above; only the interpreter needs the hook (the
# package stays cheap to import: `api.cli` starts without the service or the client).
if not TYPE_CHECKING:
    from records.exports import lazy_getattr

    __getattr__ = lazy_getattr(__name__, __file__)
