"""The Kafka wire protocol, sans-IO: bytes in, requests out; responses in, bytes out.

`codec` turns frames into requests and answers into frames (through `kio`'s schemas, read and
written by code generated per class: `generated_reader` / `generated_writer`); `connection`
splits a byte stream into frames and decodes them; `private` and `avro_bind` are our own APIs'
Avro bodies. No module here opens a socket: `api.server` and `api.client` are the asyncio
shells around them.
"""
