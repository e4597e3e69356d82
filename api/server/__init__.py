"""The asyncio server: a thin shell over `api.protocol`, and the handlers that answer each API.

`server` is the shell (its listeners, one task per connection, shutdown) and `channel` one
connection (back-pressure, limits, its TLS handshake); `sasl` is a connection's login, sans-IO;
`config` reads the server's Kafka keys and `listeners` makes its listeners (TLS contexts,
principal rules) from them; `kafka/` answers the Kafka admin APIs, one module per concern;
`private_apis` answers our own; `forwarding` sends the writes a quorum node does not lead
to the leader in an Envelope and opens the Envelopes it gets as the leader; `server_log` writes
the server's log lines.
"""
