"""`AdminClient`: every API `mlog serve` answers, as methods over one `ClientConnection`.

Kafka APIs are built and read with the protocol core's kio codec. The methods the CLI uses
return the same result dataclasses the embedded controller returns (`replay.controller.commands`),
so a command prints the same thing whichever it runs against; the others return kio's response
entity. Our own APIs (`api.protocol.private`) return their Avro-bound dataclasses; a refused
request raises `RemoteError` with the code and the text the embedded CLI would print.

    async with await AdminClient.connect("127.0.0.1:9092") as client:
        (result,) = await client.create_topics([CreatableTopic(name="orders")])

Over TLS and with a SASL login, as a client config file says (`--command-config`):

    security = load_client_security("client.properties")
    async with await AdminClient.connect("broker:9094", security=security) as client:
        ...

The methods are grouped by area, one module each, composed here: `topics` (topics,
partitions, namespaces), `configs`, `security_apis` (ACLs, SCRAM credentials), `brokers`,
`features`, `log_apis` (the log and time travel), `quorum_apis` (the leader, DescribeQuorum,
voter changes) and `writes` (write ids and retries, in front of them all).
"""

from __future__ import annotations

from api.client.brokers import BrokerApis
from api.client.configs import ConfigApis
from api.client.features import FeatureApis, FeatureLevels
from api.client.log_apis import LogApis
from api.client.security_apis import SecurityApis
from api.client.topics import TopicApis
from api.client.writes import IdempotentWrites

__all__ = ["AdminClient", "FeatureLevels"]


class AdminClient(
    IdempotentWrites, TopicApis, ConfigApis, SecurityApis, BrokerApis, FeatureApis, LogApis
):
    """An asyncio admin client over one connection (see the module docstring).

    The areas are mixins of one concern each over `apis.ClientApis`, rather than objects the
    client holds: the public surface stays flat (`client.create_topics(...)`, as the CLI,
    `api.python_api` and the tests call it) without a forwarding twin of every signature.
    `IdempotentWrites` comes first so every area's `self.write` is the retried one.
    """
