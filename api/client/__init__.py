"""The asyncio `AdminClient`: every Kafka admin API we serve and our own, over `api.protocol`.

`connection` is the transport (connect, negotiate versions, pipelined requests, errors);
`admin` composes the API methods, one module per area (`topics`, `configs`, `quorum_apis`,
...). The two names re-exported here cost no more than `connection` alone would: both need
the protocol core.
"""

from api.client.admin import AdminClient
from api.client.connection import RemoteError

__all__ = ["AdminClient", "RemoteError"]
