"""`mlog kafka-topics`, `kafka-configs`, `kafka-acls`, `kafka-metadata-quorum`, `kafka-features`.

Kafka's own command-line tools, flag for flag and line for line, so that a runbook's
`kafka-topics.sh --bootstrap-server B --create --topic t` runs as `mlog kafka-topics ...` (the
`.sh` names are accepted too). Each module translates the tool's flags into the calls the
`mlog` nouns already make (`api.cli.targets`, the AdminClient) and prints Kafka's formats;
`vocabulary` holds every tool's flags (for the hints of `mlog <noun>`'s usage errors) and
`flags` what the tools share: refusing an unsupported flag, Kafka's tables, topic patterns.
"""
