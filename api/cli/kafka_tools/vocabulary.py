"""Kafka's tools' flags, and what to say when one is given to an `mlog` noun.

`mlog topics --list` is kafka-topics.sh's spelling given to mlog's noun: the usage error
names the flag's owner and both ways to say it (`mlog topics list` or `mlog kafka-topics
--list`) instead of the nearest mlog flag by spelling. Kept apart from the tools' modules so
that `api.cli.main` imports only these names.
"""

from __future__ import annotations

from collections.abc import Sequence

KAFKA_TOOLS = {
    "kafka-topics": "api.cli.kafka_tools.topics",
    "kafka-configs": "api.cli.kafka_tools.configs",
    "kafka-acls": "api.cli.kafka_tools.acls",
    "kafka-metadata-quorum": "api.cli.kafka_tools.quorum",
    "kafka-features": "api.cli.kafka_tools.features",
}
"""Each tool's noun (also accepted with `.sh`) and the module that fills in its parser."""

TOOL_OF_NOUN = {
    "topics": "kafka-topics",
    "configs": "kafka-configs",
    "acls": "kafka-acls",
    "quorum": "kafka-metadata-quorum",
    "features": "kafka-features",
    "users": "kafka-configs",
}
"""The Kafka tool whose flags an operator may type after each `mlog` noun."""

_TOPICS = {
    "--list": "mlog topics list",
    "--create": "mlog topics create",
    "--delete": "mlog topics delete",
    "--describe": "mlog topics describe",
    "--alter": "mlog topics alter",
    **dict.fromkeys(
        (
            "--if-exists",
            "--if-not-exists",
            "--under-replicated-partitions",
            "--unavailable-partitions",
            "--under-min-isr-partitions",
            "--at-min-isr-partitions",
            "--exclude-internal",
            "--topics-with-overrides",
            "--partition-size-limit-per-response",
            "--bootstrap-controller",
        ),
        "",
    ),
}
_CONFIGS = {
    "--alter": "mlog configs alter",
    "--describe": "mlog configs describe",
    "--add-config": "mlog configs alter --set K=V",
    "--delete-config": "mlog configs alter --delete K",
    "--entity-type": "mlog configs describe --topic T (or --broker ID, --cluster)",
    "--entity-name": "mlog configs describe --topic T (or --broker ID)",
    "--entity-default": "mlog configs describe --cluster",
    **dict.fromkeys(
        ("--add-config-file", "--broker-defaults", "--user", "--client", "--force"), ""
    ),
}
_ACLS = {
    "--add": "mlog acls add",
    "--list": "mlog acls list",
    "--remove": "mlog acls remove",
    "--producer": "mlog acls add --operation Write --operation Describe --operation Create",
    "--consumer": "mlog acls add --operation Read --operation Describe (and --group G)",
    **dict.fromkeys(("--idempotent", "--authorizer-properties"), ""),
}
_QUORUM = {
    "--status": "mlog quorum describe",
    "--replication": "mlog quorum describe",
    "--human-readable": "mlog quorum describe",
    "--controller-id": "mlog quorum remove-controller --controller-id ID",
    "--bootstrap-controller": "",
    "--dry-run": "",
}
_FEATURES = {
    "--release-version": "",
    "--bootstrap-controller": "",
}

_USERS = {
    **_CONFIGS,
    "--alter": "mlog users scram-set",
    "--describe": "mlog users list",
    "--add-config": "mlog users scram-set --name U --mechanism M --password-file F",
    "--delete-config": "mlog users delete --name U --mechanism M",
    "--entity-type": "mlog users list",
    "--entity-name": "mlog users list --name U",
}

VOCABULARY: dict[str, dict[str, str]] = {
    "kafka-topics": _TOPICS,
    "kafka-configs": _CONFIGS,
    "kafka-acls": _ACLS,
    "kafka-metadata-quorum": _QUORUM,
    "kafka-features": _FEATURES,
}
"""Per tool, the flags of Kafka's that `mlog <noun>` lacks, and mlog's own way to say each."""


def kafka_flag_hint(prog: str, argv: Sequence[str], known: set[str]) -> str | None:
    """The usage error for a Kafka tool's flag given to `mlog <noun>` (None if there is none).

    `prog` is the erring parser's (`mlog topics`, `mlog topics list`); `known` the flags it
    takes: a flag it takes is not Kafka's mistake, whatever else is wrong.
    """
    words = prog.split()
    if len(words) < 2:  # the top parser's "unrecognized arguments": the noun is in argv
        words += [next((a for a in argv if a in TOOL_OF_NOUN), "")]
    tool = TOOL_OF_NOUN.get(words[1])
    if tool is None:
        return None
    vocabulary = _USERS if words[1] == "users" else VOCABULARY[tool]
    for token in argv:
        if token == "--":
            return None
        flag = token.split("=", 1)[0]
        if flag in known or flag not in vocabulary:
            continue
        way = vocabulary[flag]
        theirs = f"`mlog {tool} {flag}`" if way else f"`mlog {tool} ... {flag}`"
        mlog = f"`{way}`, or " if way else ""
        return (
            f"{flag} is {tool}.sh's flag: use {mlog}{theirs} (`mlog {tool}` takes "
            f"{tool}.sh's flags as they are)"
        )
    return None


def tool_noun(noun: str) -> str:
    """The tool's noun for `kafka-topics.sh` (the `.sh` name); any other noun unchanged."""
    base = noun.removesuffix(".sh")
    return base if base in KAFKA_TOOLS else noun
