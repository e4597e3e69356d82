"""Security primitives: SASL mechanisms, TLS contexts, principals and security configs.

A leaf package (standard library and `records` only), so the controller, the server, the
client and the command line can all use it without breaking the layers' import order.
"""
