"""The controller quorum's KRaft APIs on Kafka's wire, sans-IO.

`messages` holds the quorum's messages (the values the consensus core steps and hands out),
`bounds` the ranges their numbers must be in; both import nothing of `api`, so the core loads
no codec. `wire` maps them onto Kafka's frames both ways, `entries` frames the log entries a
Fetch carries, `errors` maps the error codes. `api.raft` (the quorum) and `api.client` (the
admin's DescribeQuorum and voter changes) both speak through them.
"""
