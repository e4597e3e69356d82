"""`mlog quorum format|describe`: set up a controller quorum's voters, and look at it.

`format` writes a voter's first `quorum-state` (epoch 0, no vote), as `kafka-storage format`
does: only a formatted voter may vote. A voter whose state was lost (a wiped disk) must NOT be
formatted again: started without it, it catches up as an observer first and only then votes
(KIP-642's lesson; docs/replication.md). So `format` refuses a directory that already has a
`quorum-state` or a log.

`format --rejoin` is for a voter whose data directory was lost: it writes the cluster's id
only, so the node starts without a `quorum-state`, catches up and then votes.

An observer (a `node.id` outside `controller.quorum.voters`) is formatted with its cluster's
id only, as Kafka formats every node: it holds no vote, so it gets no `quorum-state`.

`describe` asks a node for DescribeQuorum (answered by the leader): leader, epoch, high
watermark and each voter's and observer's end offset and lag; then every node's hash chain
digest at one common offset (`quorum_digests`), naming a node whose digest differs (exit 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.output import emit, print_table
from metadata_log.private_files import make_dirs

if TYPE_CHECKING:
    from api.raft.core.config import VoterAddress
    from api.service.settings import Settings


def quorum_cluster_id(addresses: Mapping[int, VoterAddress]) -> str:
    """The cluster id every voter of one `controller.quorum.voters` derives alike.

    Formatting each voter with the same voters then needs no id passed around (Kafka's
    `kafka-storage format -t` takes one; `--cluster-id` does too).
    """
    import hashlib

    from records.uuids import Uuid

    text = ",".join(f"{i}@{a.host}:{a.port}" for i, a in sorted(addresses.items()))
    digest = hashlib.sha256(f"metadata-log quorum {text}".encode()).digest()
    raw = bytearray(digest[:16])
    raw[0] &= 0x7F  # never a text starting with '-', as Kafka's ids
    return str(Uuid(bytes(raw)))


def cmd_quorum_format(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Write a voter's first quorum-state (epoch 0) in an empty data directory."""
    import dataclasses
    import os

    from api.cli.serve import cluster_identity, file_values
    from api.raft.core.quorum_state import QuorumState, read_quorum_state, write_quorum_state
    from api.server.config import server_config

    config = server_config(file_values(args))
    if config.quorum is None:
        raise CliError(
            "no controller.quorum.voters in the config: give --config FILE (or --override "
            "controller.quorum.voters=1@host:port,...) and node.id"
        )
    quorum = config.quorum
    if (
        config.data_dir is not None
        and args.data_dir is None
        and not os.environ.get("MLOG_DATA_DIR")
    ):
        settings = dataclasses.replace(settings, data_dir=config.data_dir)
    directory = settings.data_dir
    existing = read_quorum_state(directory, voters=quorum.voters)
    if existing is not None:
        raise CliError(
            f"{directory} is formatted already (quorum-state at epoch {existing.leader_epoch}); "
            "formatting again would forget the node's vote. Start it as it is"
        )
    log_dir = settings.log_dir
    if args.rejoin and quorum.voters == {quorum.node_id}:
        from api.cli.serve import SOLE_VOTER_WITHOUT_STATE

        raise CliError(SOLE_VOTER_WITHOUT_STATE.format(node=quorum.node_id))
    if not args.rejoin and log_dir.exists() and any(log_dir.glob("*.avro")):
        raise CliError(
            f"{log_dir} holds a log; a voter with a log but no quorum-state lost its state: "
            "start it without formatting, it catches up before it votes"
        )
    cluster_id = args.cluster_id or quorum_cluster_id(quorum.addresses)
    make_dirs(directory)
    stored, _ = cluster_identity(directory, quorum.node_id, cluster_id=cluster_id)
    if stored != cluster_id:
        raise CliError(
            f"{directory} belongs to cluster {stored}, not {cluster_id}; give --cluster-id "
            f"{stored} or use an empty data directory"
        )
    voters = ",".join(str(v) for v in sorted(quorum.voters))
    if not quorum.is_voter:
        emit(
            settings,
            out,
            {"node_id": quorum.node_id, "cluster_id": cluster_id, "observer": True},
            f"formatted observer node {quorum.node_id} of cluster {cluster_id} in {directory}: "
            f"not among the voters {voters}, it fetches the committed log and never votes",
        )
        return EXIT_OK
    if args.rejoin:
        emit(
            settings,
            out,
            {"node_id": quorum.node_id, "cluster_id": cluster_id, "rejoin": True},
            f"node {quorum.node_id} rejoins cluster {cluster_id} without a quorum-state: it "
            "catches up from the leader before it votes",
        )
        return EXIT_OK
    write_quorum_state(directory, QuorumState(leader_epoch=0, voters=quorum.voters))
    emit(
        settings,
        out,
        {
            "node_id": quorum.node_id,
            "voters": sorted(quorum.voters),
            "cluster_id": cluster_id,
            "data_dir": str(directory),
        },
        f"formatted node {quorum.node_id} of cluster {cluster_id} (voters {voters}) in "
        f"{directory}: quorum-state at epoch 0",
    )
    return EXIT_OK


def cmd_quorum_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """DescribeQuorum through a node: the leader, epoch, high watermark and each replica."""
    from api.cli.quorum_digests import (
        differing_error,
        digests_verdict,
        gather_digests,
        print_digests,
    )
    from api.cli.targets import client_security, describe_quorum

    answer = describe_quorum(settings, args)
    rows: list[list[Any]] = []
    for kind, replicas in (("voter", answer["voters"]), ("observer", answer["observers"])):
        for replica in replicas:
            rows.append(
                [
                    replica["replica_id"],
                    kind,
                    replica["log_end_offset"],
                    replica["lag"],
                    replica["last_fetch_ms_ago"],
                ]
            )
    digests = gather_digests(answer, settings.bootstrap_server or "", client_security(args))
    if settings.output == "json":
        emit(settings, out, {**answer, "digests": digests.to_json()}, "")
        return digests_verdict(differing_error(digests))
    out.write(
        f"LeaderId: {answer['leader_id']}  LeaderEpoch: {answer['leader_epoch']}  "
        f"HighWatermark: {answer['high_watermark']}\n"
    )
    print_table(rows, ["NodeId", "Role", "LogEndOffset", "Lag", "LastFetchMsAgo"], out)
    return digests_verdict(print_digests(digests, out))


def _cluster_id(text: str) -> str:
    from records.uuids import Uuid

    try:
        return str(Uuid.parse(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a cluster id (22 characters of URL-safe base64, as Kafka's)"
        ) from None


def add_verbs(quorum: argparse.ArgumentParser) -> None:
    """The verbs of `mlog quorum` and their flags, on the noun's parser."""
    verbs = quorum.add_subparsers(dest="verb", metavar="VERB", required=True)

    formatting = verbs.add_parser(
        "format", help="write a new voter's first quorum-state (epoch 0), once per voter"
    )
    add_global_options(formatting)
    formatting.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the node's server config (node.id, controller.quorum.voters, data directory)",
    )
    formatting.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key (repeatable), e.g. --override node.id=1",
    )
    formatting.add_argument(
        "--cluster-id",
        type=_cluster_id,
        help="the cluster's id, the same on every voter (default: derived from "
        "controller.quorum.voters, so voters formatted alike agree)",
    )
    formatting.add_argument(
        "--rejoin",
        action="store_true",
        help="a voter that lost its data directory: write the cluster id only (no "
        "quorum-state), so it catches up from the leader before it votes",
    )
    formatting.set_defaults(handler=cmd_quorum_format)

    describe = verbs.add_parser(
        "describe", help="leader, epoch, high watermark and each voter's lag (DescribeQuorum)"
    )
    add_global_options(describe)
    describe.set_defaults(handler=cmd_quorum_describe)
