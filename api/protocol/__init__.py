"""The Kafka wire protocol, sans-IO: bytes in, requests out; responses in, bytes out.

`codec` is the only module that imports `kio` (the Kafka message schemas), so the schema
library can be replaced in one place. `connection` splits a byte stream into frames and decodes
them; `kafka_apis` answers the Kafka admin APIs from the service. No module here opens a socket:
`api.server` is the asyncio shell around them.
"""
