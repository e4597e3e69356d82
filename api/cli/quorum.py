"""`mlog quorum format|add-controller|remove-controller|describe`: a controller quorum's voters.

A dynamic quorum (KIP-853: `controller.quorum.bootstrap.servers`) is formatted with
`--standalone`, `--initial-controllers` or `--no-initial-controllers` (in the manner of
`kafka-storage format`) and changed online with `add-controller` / `remove-controller`
(AddRaftVoter / RemoveRaftVoter at the leader); docs/replication.md, "Changing the voters".
The rest of this docstring is about a static quorum (`controller.quorum.voters`).

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
from api.cli.created_paths import removed_on_failure
from api.cli.output import emit, print_table
from metadata_log.private_files import make_dirs
from records.fields import INT32_MAX

if TYPE_CHECKING:
    from api.raft.core.config import VoterAddress
    from api.raft.core.voters import VoterSet
    from api.server.config import ServerConfig
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
    """Write a voter's first quorum-state (epoch 0) in an empty data directory.

    A format that fails leaves no data directory it made (`removed_on_failure`).
    """
    from api.cli.serve import file_values
    from api.server.config import server_config

    config = server_config(file_values(args))
    with removed_on_failure(_config_data_dir(args, settings, config).data_dir):
        return _format(args, settings, out)


def _format(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from api.cli.serve import cluster_identity, file_values
    from api.raft.core import QuorumState
    from api.raft.quorum_state_file import read_quorum_state, write_quorum_state
    from api.server.config import server_config

    values = file_values(args)
    config = server_config(values)
    mode = _format_mode(args)
    if config.dynamic_quorum is not None:
        return _format_dynamic(args, settings, out, config=config, mode=mode, values=values)
    if config.quorum is None:
        raise CliError(
            "no controller.quorum.voters nor controller.quorum.bootstrap.servers in the "
            "config: give --config FILE (or --override controller.quorum.voters=1@host:port,"
            "...) and node.id"
        )
    if mode is not None:
        raise CliError(
            f"--{mode} is for a dynamic quorum (controller.quorum.bootstrap.servers); this "
            "config fixes the voters with controller.quorum.voters: drop the flag, or replace "
            "controller.quorum.voters by controller.quorum.bootstrap.servers"
        )
    quorum = config.quorum
    settings = _config_data_dir(args, settings, config)
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
    from api.cli.serve import directory_id
    from records.uuids import Uuid

    # As Kafka's format: a directory id now, the upgrade to kraft.version 1 puts it in the log.
    directory_id(directory, create=str(Uuid.random()))
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


def _format_mode(args: argparse.Namespace) -> str | None:
    """Which of --standalone, --initial-controllers, --no-initial-controllers was given."""
    given = [
        name
        for name, value in (
            ("standalone", args.standalone),
            ("initial-controllers", args.initial_controllers is not None),
            ("no-initial-controllers", args.no_initial_controllers),
        )
        if value
    ]
    if len(given) > 1:
        raise CliError(
            f"--{given[0]} and --{given[1]} exclude each other: give one of --standalone, "
            "--initial-controllers or --no-initial-controllers"
        )
    return given[0] if given else None


def _config_data_dir(
    args: argparse.Namespace, settings: Settings, config: ServerConfig
) -> Settings:
    """The settings with the config's data directory unless --data-dir or MLOG_DATA_DIR says."""
    import dataclasses
    import os

    if (
        config.data_dir is not None
        and args.data_dir is None
        and not os.environ.get("MLOG_DATA_DIR")
    ):
        return dataclasses.replace(settings, data_dir=config.data_dir)
    return settings


def _format_dynamic(
    args: argparse.Namespace,
    settings: Settings,
    out: TextIO,
    *,
    config: ServerConfig,
    mode: str | None,
    values: Mapping[str, str],
) -> int:
    """Format a node of a dynamic quorum (KIP-853), as `kafka-storage format` does.

    --standalone and --initial-controllers write the bootstrap voter set as the log's first
    block (a KRaftVersionRecord at kraft.version 1 and the VotersRecord) and, on a voter
    among them, its first quorum-state; --no-initial-controllers writes neither: the node
    fetches the log from the quorum as an observer until `mlog quorum add-controller`. Every
    node gets a directory id in meta.properties.
    """
    from api.cli.serve import cluster_identity, directory_id
    from api.raft.core import QuorumState
    from api.raft.quorum_state_file import write_quorum_state
    from records.uuids import Uuid

    dynamic = config.dynamic_quorum
    assert dynamic is not None  # the caller's branch
    if mode is None:
        raise CliError(
            "controller.quorum.bootstrap.servers is set: give --standalone (a new quorum of "
            "this node alone), --initial-controllers ID@HOST:PORT:DIRECTORY_ID,... (a new "
            "quorum of those) or --no-initial-controllers (a node that joins a running quorum)"
        )
    if args.rejoin:
        raise CliError(
            "--rejoin is for a static quorum; a dynamic quorum's node that lost its data "
            "directory is formatted with --no-initial-controllers, removed "
            "(mlog quorum remove-controller) and added again (mlog quorum add-controller)"
        )
    node_id = dynamic.node_id
    settings = _config_data_dir(args, settings, config)
    directory = settings.data_dir
    log_dir = settings.log_dir
    from api.raft.quorum_state_file import QUORUM_STATE_NAME

    if (directory / QUORUM_STATE_NAME).exists() or (
        log_dir.exists() and any(log_dir.glob("*.avro"))
    ):
        raise CliError(
            f"{directory} is formatted already (it holds a quorum-state or a log); formatting "
            "again would forget the node's vote and log. Start it as it is"
        )
    if mode == "standalone":
        voters = _standalone_voters(config, values, node_id)
    elif mode == "initial-controllers":
        voters = parse_initial_controllers(args.initial_controllers)
    else:
        voters = None
    if voters is None and args.cluster_id is None:
        raise CliError(
            "--no-initial-controllers joins a running quorum: give its --cluster-id (cluster.id "
            "in meta.properties of any of its nodes)"
        )
    own = voters.get(node_id) if voters is not None else None
    directory_uuid = (own.directory_id if own is not None else "") or str(Uuid.random())
    cluster_id = args.cluster_id or _voters_cluster_id(voters)
    make_dirs(directory)
    stored, _ = cluster_identity(directory, node_id, cluster_id=cluster_id)
    if stored != cluster_id:
        raise CliError(
            f"{directory} belongs to cluster {stored}, not {cluster_id}; give --cluster-id "
            f"{stored} or use an empty data directory"
        )
    stored_directory = directory_id(directory, create=directory_uuid)
    if own is not None and stored_directory != own.directory_id:
        raise CliError(
            f"{directory} has directory.id {stored_directory}, --initial-controllers names "
            f"{own.directory_id} for node {node_id}; use an empty data directory"
        )
    if voters is not None:
        _write_bootstrap_block(settings, voters)
    if own is not None and voters is not None:
        write_quorum_state(directory, QuorumState(leader_epoch=0, voters=voters.ids))
    names = ",".join(str(v) for v in sorted(voters.ids)) if voters is not None else ""
    emit(
        settings,
        out,
        {
            "node_id": node_id,
            "cluster_id": cluster_id,
            "directory_id": stored_directory,
            "voters": None if voters is None else voters.to_json(),
            "kraft_version": 1,
            "data_dir": str(directory),
        },
        f"formatted node {node_id} (directory {stored_directory}) of cluster {cluster_id} in "
        f"{directory}: "
        + (
            f"bootstrap voters {names} at kraft.version 1"
            + ("" if own is not None else "; this node joins as an observer")
            if voters is not None
            else "no voters: it joins the running quorum as an observer; add it with "
            "`mlog quorum add-controller --config FILE --bootstrap-server HOST:PORT`"
        ),
    )
    return EXIT_OK


def parse_initial_controllers(text: str) -> VoterSet:
    """`--initial-controllers 1@host:port:DIRID,...` as a voter set; `CliError` otherwise."""
    import re

    from api.raft.core.errors import RaftError
    from api.raft.core.voters import Voter, VoterSet
    from records.uuids import Uuid

    pattern = re.compile(
        r"(\d{1,10})@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5}):([A-Za-z0-9_-]{22})"
    )
    voters: list[Voter] = []
    for raw in text.split(","):
        item = raw.strip()
        match = pattern.fullmatch(item)
        if match is None:
            raise CliError(
                f"--initial-controllers: {item[:80]!r} is not ID@HOST:PORT:DIRECTORY_ID; write "
                "it like 1@c1:9093:pqQ6lNYVQbOcf5VZWv4_Pw,2@c2:9093:... (a directory id is a "
                "Kafka Uuid: `mlog quorum format` prints each node's, or make them with "
                "`mlog quorum random-uuid`)"
            )
        node_id, host, port, directory = (
            int(match[1]),
            match[2].strip("[]"),
            int(match[3]),
            match[4],
        )
        if node_id > INT32_MAX or not 1 <= port <= 65535:
            raise CliError(f"--initial-controllers: {item!r} has a node id or port out of range")
        try:
            directory = str(Uuid.parse(directory))
        except ValueError:
            raise CliError(
                f"--initial-controllers: {directory!r} of node {node_id} is not a Kafka Uuid"
            ) from None
        if any(v.id == node_id for v in voters):
            raise CliError(f"--initial-controllers names node {node_id} twice; name it once")
        voters.append(Voter(id=node_id, directory_id=directory, host=host, port=port))
    try:
        return VoterSet.of(voters)
    except RaftError as exc:
        raise CliError(f"--initial-controllers: {exc}") from None


def _standalone_voters(config: ServerConfig, values: Mapping[str, str], node_id: int) -> VoterSet:
    """--standalone: this node alone, at its controller listener's address."""
    from api.raft.core.voters import Voter, VoterSet
    from records.uuids import Uuid

    listener = config.listeners[0] if config.listeners else None
    names = [n.strip().upper() for n in values.get("controller.listener.names", "").split(",") if n]
    for candidate in reversed(config.listeners):
        if names and candidate.name == names[0]:
            listener = candidate
    if listener is None:
        raise CliError("--standalone needs the node's listeners= (where the voter listens)")
    host = listener.advertised_host or listener.host
    port = listener.advertised_port or listener.port
    if not host or not port:
        raise CliError(
            f"--standalone: listener {listener.name} binds {host or '*'}:{port}; give it a "
            "host and port the other controllers can reach (or advertised.listeners)"
        )
    return VoterSet.of([Voter(id=node_id, directory_id=str(Uuid.random()), host=host, port=port)])


def _voters_cluster_id(voters: VoterSet | None) -> str:
    """A cluster id every initial controller derives alike from the voters it is given."""
    from api.raft.core.config import VoterAddress

    assert voters is not None  # --no-initial-controllers requires --cluster-id
    return quorum_cluster_id({v.id: VoterAddress(host=v.host, port=v.port) for v in voters.voters})


def _write_bootstrap_block(settings: Settings, voters: VoterSet) -> None:
    """The log's first block: kraft.version 1 and the bootstrap voter set."""
    from api.raft.voter_blocks import write_bootstrap_block
    from metadata_log.replica_log import ReplicaLog

    log = ReplicaLog.open(settings.log_dir, config=settings.log)
    try:
        write_bootstrap_block(log, voters)
    finally:
        log.close()


def cmd_quorum_random_uuid(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """A new random Kafka Uuid, as `kafka-storage random-uuid` prints one."""
    from records.uuids import Uuid

    value = str(Uuid.random())
    emit(settings, out, {"uuid": value}, value)
    return EXIT_OK


def describe_rows(answer: dict[str, Any]) -> list[list[Any]]:
    """`quorum describe`'s table rows: voters then observers, as the leader described them.

    A replica never heard from in this leader's epoch (a voter down since) has no last fetch:
    -1 in the table, as kafka-metadata-quorum prints an absent LastFetchTimestamp (null in
    JSON).
    """
    rows: list[list[Any]] = []
    for kind, replicas in (("voter", answer["voters"]), ("observer", answer["observers"])):
        for replica in replicas:
            ago = replica["last_fetch_ms_ago"]
            rows.append(
                [
                    replica["replica_id"],
                    kind,
                    replica["log_end_offset"],
                    replica["lag"],
                    -1 if ago is None else ago,
                    replica["directory_id"] or "-",
                ]
            )
    return rows


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
    rows = describe_rows(answer)
    digests = gather_digests(answer, settings.bootstrap_server or "", client_security(args))
    if settings.output == "json":
        emit(settings, out, {**answer, "digests": digests.to_json()}, "")
        return digests_verdict(differing_error(digests))
    out.write(
        f"LeaderId: {answer['leader_id']}  LeaderEpoch: {answer['leader_epoch']}  "
        f"HighWatermark: {answer['high_watermark']}\n"
    )
    print_table(
        rows, ["NodeId", "Role", "LogEndOffset", "Lag", "LastFetchMsAgo", "DirectoryId"], out
    )
    return digests_verdict(print_digests(digests, out))


def cmd_quorum_add_controller(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """AddRaftVoter for the node of --config: its id, directory id and controller endpoint."""
    from api.cli.serve import directory_id, file_values
    from api.cli.targets import change_voters
    from api.server.config import server_config

    values = file_values(args)
    config = server_config(values)
    if config.dynamic_quorum is None:
        raise CliError(
            f"{args.config} has no controller.quorum.bootstrap.servers: only a node of a "
            "dynamic quorum is added (format it with --no-initial-controllers)"
        )
    node_id = config.dynamic_quorum.node_id
    own_settings = _config_data_dir(args, settings, config)
    directory = directory_id(own_settings.data_dir)
    if not directory:
        raise CliError(
            f"{own_settings.data_dir} has no directory.id in meta.properties: format the node "
            "first (mlog quorum format --no-initial-controllers --config FILE)"
        )
    voter = _standalone_voters(config, values, node_id)
    endpoint = voter.voters[0]
    change_voters(
        settings,
        args,
        add=(node_id, directory, endpoint.host, endpoint.port),
        timeout_ms=args.timeout_ms,
    )
    emit(
        settings,
        out,
        {"added": node_id, "directory_id": directory, "host": endpoint.host, "port": endpoint.port},
        f"added controller {node_id} (directory {directory}, {endpoint.host}:{endpoint.port}) "
        "to the voters; the change is committed",
    )
    return EXIT_OK


def cmd_quorum_remove_controller(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """RemoveRaftVoter for --controller-id (and --controller-directory-id)."""
    from api.cli.targets import change_voters

    change_voters(
        settings,
        args,
        remove=(args.controller_id, args.controller_directory_id or ""),
        timeout_ms=30_000,
    )
    emit(
        settings,
        out,
        {"removed": args.controller_id, "directory_id": args.controller_directory_id or None},
        f"removed controller {args.controller_id} from the voters; the change is committed",
    )
    return EXIT_OK


def _node_id(text: str) -> int:
    if not text.isdigit() or int(text) > INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is not a node id (0..2147483647)")
    return int(text)


def _timeout_ms(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout in ms (1..2147483647)")
    return int(text)


def _directory_id(text: str) -> str:
    from records.uuids import Uuid

    try:
        return str(Uuid.parse(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a directory id (a Kafka Uuid: 22 characters of URL-safe base64)"
        ) from None


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
        "format",
        help="write a new node's first state (quorum-state; a dynamic quorum's bootstrap "
        "voters), once per node",
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
    modes = formatting.add_mutually_exclusive_group()
    modes.add_argument(
        "--standalone",
        action="store_true",
        help="a dynamic quorum (controller.quorum.bootstrap.servers) of this node alone: "
        "grow it with `mlog quorum add-controller`",
    )
    modes.add_argument(
        "--initial-controllers",
        metavar="ID@HOST:PORT:DIRID,...",
        help="a dynamic quorum of these voters (each node's directory id given; the same "
        "list on every one of them)",
    )
    modes.add_argument(
        "--no-initial-controllers",
        action="store_true",
        help="a node that joins a running dynamic quorum as an observer (give --cluster-id)",
    )
    formatting.set_defaults(handler=cmd_quorum_format)

    adding = verbs.add_parser(
        "add-controller",
        help="make the node of --config a voter (AddRaftVoter; it must have caught up)",
    )
    add_global_options(adding)
    adding.add_argument(
        "--config",
        type=Path,
        required=True,
        metavar="FILE",
        help="the new controller's server config (node.id, listeners, data directory)",
    )
    adding.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a config key"
    )
    adding.add_argument(
        "--timeout-ms",
        type=_timeout_ms,
        default=30_000,
        help="how long to wait for the change to commit (default 30000)",
    )
    adding.set_defaults(handler=cmd_quorum_add_controller)

    removing = verbs.add_parser(
        "remove-controller", help="remove a voter from a dynamic quorum (RemoveRaftVoter)"
    )
    add_global_options(removing)
    removing.add_argument(
        "--controller-id", type=_node_id, required=True, help="the voter's node id"
    )
    removing.add_argument(
        "--controller-directory-id",
        type=_directory_id,
        default=None,
        help="the voter's directory id (`mlog quorum describe`); default: whatever it is",
    )
    removing.set_defaults(handler=cmd_quorum_remove_controller)

    uuid = verbs.add_parser(
        "random-uuid",
        help="print a new Kafka Uuid: a directory id for --initial-controllers, or a cluster id",
    )
    add_global_options(uuid)
    uuid.set_defaults(handler=cmd_quorum_random_uuid)

    describe = verbs.add_parser(
        "describe", help="leader, epoch, high watermark and each voter's lag (DescribeQuorum)"
    )
    add_global_options(describe)
    describe.set_defaults(handler=cmd_quorum_describe)
