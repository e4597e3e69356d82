"""The asyncio server: a thin shell over `api.protocol`, and the handlers that answer each API.

`server` is the shell (listener, one task per connection, shutdown); `kafka/` answers the Kafka
admin APIs, one module per concern; `private_apis` answers our own; `server_log` writes the
server's log lines.
"""
