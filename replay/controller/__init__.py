"""The domain rules: commands in, `ControllerResult(records, response)` out; nothing changes here.

One module per concern: `topics`, `brokers`, `configs`, `namespaces`, `partition_reduction`,
`elections` (leaders and reassignments), with `placement` (Kafka's replica assignment), `names`,
`states`, `config_defs` (the known keys) and `config_values` (what a value is), the ACLs and the
authorizer, and the `commands` and `errors` they speak in. `controller.Controller` is the one
entry point.

Below the service, beside the image and the deltas it reads and replays (as Kafka keeps the
controller, the image and the authorizer in its `metadata` module): replay and the controller
share one declaration of each limit and name rule (`replay.rules`, `replay.security`), and the
wire codec carries `commands` and `errors` without importing the rest of replay.
"""
