"""The domain rules: commands in, `ControllerResult(records, response)` out; nothing changes here.

One module per concern: `topics`, `brokers`, `configs`, `namespaces`, `partition_reduction`,
`elections` (leaders and reassignments), with `placement` (Kafka's replica assignment), `names`,
`states`, `config_defs` (the known keys) and `config_values` (what a value is), and the
`commands` and `errors` they speak in. `controller.Controller` is the one entry point.
"""
