"""`mlog kafka-metadata-quorum`: kafka-metadata-quorum.sh's verbs, flags and output.

`describe --status` prints Kafka's `ClusterId:` ... `CurrentObservers:` block and `describe
--replication [--human-readable]` its table (NodeId, DirectoryId, LogEndOffset, Lag,
LastFetchTimestamp, LastCaughtUpTimestamp, Status), both from DescribeQuorum (and
DescribeCluster for the cluster id) through the client `mlog quorum` uses. `add-controller`
takes the new controller's config as `--command-config`, as Kafka's does, and runs `mlog
quorum add-controller --config` with it; `remove-controller` is `mlog quorum
remove-controller`'s RemoveRaftVoter.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError
from api.cli.kafka_tools.flags import add_connection_options, print_kafka_table, require_server
from api.cli.targets import client_security

if TYPE_CHECKING:
    from api.service.settings import Settings

TOOL = "kafka-metadata-quorum"
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's `Uuid.ZERO_UUID` as text: the directory id of a replica that has none."""


def _ask(settings: Settings, args: argparse.Namespace, *, cluster: bool) -> tuple[Any, str]:
    """DescribeQuorum's answer, and the cluster id (DescribeCluster) when `cluster`."""
    from api.targets import RemoteTarget

    require_server(settings, TOOL)
    assert settings.bootstrap_server is not None  # required just above
    target = RemoteTarget(settings.bootstrap_server, security=client_security(args))
    try:
        answer = target.wait(target.client.describe_quorum)
        cluster_id = ""
        if cluster:
            described = target.wait(target.client.describe_cluster)
            cluster_id = str(described.cluster_id)
    finally:
        target.close()
    return answer, cluster_id


def _leader(answer: Any) -> Any:
    for voter in answer.current_voters:
        if voter.replica_id == answer.leader_id:
            return voter
    raise CliError(
        f"the quorum has no leader among its voters now (leader id {answer.leader_id}); "
        "retry once one is elected"
    )


def _replicas_text(answer: Any, replicas: Any) -> str:
    """Kafka's `[{"id": 1, "directoryId": "...", "endpoints": ["NAME://host:port"]}, ...]`."""
    endpoints: dict[int, list[str]] = {}
    for node in getattr(answer, "nodes", ()):
        endpoints.setdefault(node.node_id, []).append(f"{node.name}://{node.host}:{node.port}")
    items = []
    for replica in replicas:
        directory = f'"{replica.directory_id}"' if replica.directory_id else "null"
        text = f'{{"id": {replica.replica_id}, "directoryId": {directory}'
        if endpoints.get(replica.replica_id):
            text += (
                ', "endpoints": ['
                + ", ".join(f'"{e}"' for e in endpoints[replica.replica_id])
                + "]"
            )
        items.append(text + "}")
    return "[" + ", ".join(items) + "]"


def _status(answer: Any, cluster_id: str, out: TextIO) -> None:
    leader = _leader(answer)
    lagging = min(answer.current_voters, key=lambda v: v.log_end_offset)  # the first lowest
    if lagging is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and lagging.last_caught_up_timestamp >= 0:
        lag_ms = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_ms = -1
    out.write(
        f"ClusterId:              {cluster_id}\n"
        f"LeaderId:               {answer.leader_id}\n"
        f"LeaderEpoch:            {answer.leader_epoch}\n"
        f"HighWatermark:          {answer.high_watermark}\n"
        f"MaxFollowerLag:         {leader.log_end_offset - lagging.log_end_offset}\n"
        f"MaxFollowerLagTimeMs:   {lag_ms}\n"
        f"CurrentVoters:          {_replicas_text(answer, answer.current_voters)}\n"
        f"CurrentObservers:       {_replicas_text(answer, answer.observers)}\n"
    )


def _when(timestamp: int, human: bool, now: int) -> str:
    if timestamp < 0:
        return "-1"
    return f"{max(0, now - timestamp)} ms ago" if human else str(timestamp)


def _replication(answer: Any, human: bool, out: TextIO) -> None:
    leader = _leader(answer)
    now = int(time.time() * 1000)
    groups = (
        ("Leader", [leader]),
        ("Follower", [v for v in answer.current_voters if v.replica_id != leader.replica_id]),
        ("Observer", list(answer.observers)),
    )
    rows = [
        [
            r.replica_id,
            r.directory_id or ZERO_UUID,
            r.log_end_offset,
            leader.log_end_offset - r.log_end_offset,
            _when(r.last_fetch_timestamp, human, now),
            _when(r.last_caught_up_timestamp, human, now),
            status,
        ]
        for status, replicas in groups
        for r in replicas
    ]
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp"]
    print_kafka_table([*headers, "LastCaughtUpTimestamp", "Status"], rows, out)


def cmd_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """`describe --status` or `describe --replication [--human-readable]`."""
    if args.status and args.replication:
        raise CliError("Only one of --status or --replication should be specified with describe")
    if not args.status and not args.replication:
        raise CliError("One of --status or --replication must be specified with describe")
    if args.status and args.human_readable:
        raise CliError("The option --human-readable is only supported along with --replication")
    answer, cluster_id = _ask(settings, args, cluster=args.status)
    if args.status:
        _status(answer, cluster_id, out)
    else:
        _replication(answer, args.human_readable, out)
    return EXIT_OK


def cmd_add_controller(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """AddRaftVoter for the controller whose config `--command-config` names (Kafka's way)."""
    from api.cli.quorum import cmd_quorum_add_controller
    from api.cli.serve import file_values

    require_server(settings, TOOL)
    if not args.command_config:
        raise CliError(
            "You must supply the configuration file of the controller you are adding when "
            "using add-controller (--command-config FILE)"
        )
    if args.dry_run:
        raise CliError("add-controller --dry-run is not supported: mlog adds the voter or refuses")
    # The file is the new controller's server config, not a client config: its keys are read
    # by `mlog quorum add-controller --config`, the connection uses none of them.
    own = argparse.Namespace(**vars(args))
    own.config, own.override, own.timeout_ms = Path(args.command_config), [], 30_000
    own.command_config = None
    answer = io.StringIO()
    cmd_quorum_add_controller(own, dataclasses.replace(settings, output="json"), answer)
    added = json.loads(answer.getvalue())
    names = file_values(own).get("controller.listener.names", "CONTROLLER")
    host = added["host"]
    shown = f"[{host}]" if ":" in host else host
    out.write(
        f"Added controller {added['added']} with directory id {added['directory_id']} and "
        f"endpoints: {names.split(',')[0].strip()}://{shown}:{added['port']}\n"
    )
    return EXIT_OK


def cmd_remove_controller(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """RemoveRaftVoter for `--controller-id` and `--controller-directory-id`."""
    from api.cli.targets import change_voters
    from records.uuids import Uuid

    require_server(settings, TOOL)
    if args.controller_id < 0:
        raise CliError(f"Invalid negative --controller-id: {args.controller_id}")
    try:
        directory = str(Uuid.parse(args.controller_directory_id))
    except ValueError as exc:
        raise CliError(f"Failed to parse --controller-directory-id: {exc}") from None
    if not args.dry_run:
        change_voters(settings, args, remove=(args.controller_id, directory), timeout_ms=30_000)
    verb = "DRY RUN of removing " if args.dry_run else "Removed "
    out.write(f"{verb} KRaft controller {args.controller_id} with directory id {directory}\n")
    return EXIT_OK


def _controller_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a controller id (an integer)") from None


def add_verbs(parser: argparse.ArgumentParser) -> None:
    """kafka-metadata-quorum.sh's connection flags and verbs, on the noun's parser."""
    add_connection_options(parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    describe = verbs.add_parser("describe", help="Describe the metadata quorum info")
    add_connection_options(describe)
    describe.add_argument(
        "--status", action="store_true", help="A short summary of the quorum status."
    )
    describe.add_argument(
        "--replication", action="store_true", help="Detailed information about replication."
    )
    describe.add_argument("--human-readable", action="store_true", help="Human-readable output")
    describe.set_defaults(handler=cmd_describe)

    adding = verbs.add_parser(
        "add-controller", help="Add the controller of --command-config to the voters"
    )
    add_connection_options(adding)
    adding.add_argument("--dry-run", action="store_true", help="not supported: refused")
    adding.set_defaults(handler=cmd_add_controller)

    removing = verbs.add_parser("remove-controller", help="Remove a controller from the voters")
    add_connection_options(removing)
    removing.add_argument(
        "--controller-id", "-i", type=_controller_id, required=True, help="The controller's id."
    )
    removing.add_argument(
        "--controller-directory-id", "-d", required=True, help="The controller's directory ID."
    )
    removing.add_argument(
        "--dry-run", action="store_true", help="Print what would be done, but not do it."
    )
    removing.set_defaults(handler=cmd_remove_controller)
