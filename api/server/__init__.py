"""The asyncio server: a thin shell over `api.protocol`, and the handlers that answer each API."""
