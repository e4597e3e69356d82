"""Security primitives: SASL mechanisms, TLS contexts, principals and security configs.

A leaf of `api` (the standard library, `records` and the pure rules of `replay.security`), so
the server, the client and the command line can all use it without breaking the layers'
import order.
"""
