"""`mlog quorum format --standalone | --initial-controllers | --no-initial-controllers`, the
membership verbs' refusals, and `controller.quorum.bootstrap.servers` (KIP-853)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from api.cli.main import main
from api.server.config import ServerConfigError, server_config
from metadata_log.reader import LogReader
from records.model import FeatureLevelRecord, KRaftVersionRecord, VotersRecord

DIRS = ("AAAAAAAAQACAAAAAAAAAAQ", "AAAAAAAAQACAAAAAAAAAAg", "AAAAAAAAQACAAAAAAAAAAw")
INITIAL = ",".join(f"{i}@127.0.0.1:1909{i}:{DIRS[i - 1]}" for i in (1, 2, 3))
BOOTSTRAP = "127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093"


def run(args: list[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(args, out=out)
        except SystemExit as exc:  # argparse's refusals
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def dynamic_config(path: Path, node_id: int, port: int | None = None) -> Path:
    port = port or 19090 + node_id
    path.write_text(
        f"node.id={node_id}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
        f"controller.quorum.bootstrap.servers={BOOTSTRAP}\n"
    )
    return path


def fmt(props: Path, data: Path, *flags: str) -> tuple[int, str, str]:
    return run(
        [
            "--output",
            "json",
            "quorum",
            "format",
            "--config",
            str(props),
            "--data-dir",
            str(data),
            *flags,
        ]
    )


def meta(data: Path) -> dict[str, str]:
    lines = (data / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_initial_controllers_write_the_same_bootstrap_block_on_every_voter(
    tmp_path: Path,
) -> None:
    logs = []
    for node_id in (1, 2, 3):
        data = tmp_path / f"d{node_id}"
        props = dynamic_config(tmp_path / f"n{node_id}.properties", node_id)
        code, out, err = fmt(props, data, "--initial-controllers", INITIAL)
        assert code == 0, err
        answer = json.loads(out)
        assert answer["directory_id"] == DIRS[node_id - 1] == meta(data)["directory.id"]
        assert answer["kraft_version"] == 1
        assert [v["voterId"] for v in answer["voters"]] == [1, 2, 3]
        assert json.loads((data / "quorum-state").read_text())["leaderEpoch"] == 0
        with LogReader.open(data / "log") as log:
            logs.append([(e.offset, e.epoch, e.timestamp, e.record) for e in log.read()])
    assert logs[0] == logs[1] == logs[2]
    (kraft, feature, voters) = [entry[3] for entry in logs[0]]
    assert kraft == KRaftVersionRecord(kraft_version=1)
    assert feature == FeatureLevelRecord(name="kraft.version", feature_level=1)
    assert isinstance(voters, VotersRecord)
    assert [(v.voter_id, v.voter_directory_id, v.port) for v in voters.voters] == [
        (1, DIRS[0], 19091),
        (2, DIRS[1], 19092),
        (3, DIRS[2], 19093),
    ]
    # Formatting again would forget the vote and the log.
    code, _, err = fmt(
        tmp_path / "n1.properties", tmp_path / "d1", "--initial-controllers", INITIAL
    )
    assert code != 0 and "formatted already" in err and len(err.strip().splitlines()) == 1


def test_standalone_is_a_quorum_of_this_node_at_its_listener(tmp_path: Path) -> None:
    props = dynamic_config(tmp_path / "n.properties", 5, port=19555)
    code, out, err = fmt(props, tmp_path / "d", "--standalone")
    assert code == 0, err
    (voter,) = json.loads(out)["voters"]
    assert (voter["voterId"], voter["host"], voter["port"]) == (5, "127.0.0.1", 19555)
    assert voter["voterDirectoryId"] == meta(tmp_path / "d")["directory.id"]


def test_no_initial_controllers_joins_with_the_cluster_id_and_no_log(tmp_path: Path) -> None:
    props = dynamic_config(tmp_path / "n.properties", 4)
    code, _, err = fmt(props, tmp_path / "d", "--no-initial-controllers")
    assert code != 0 and "--cluster-id" in err
    code, out, err = fmt(
        props, tmp_path / "d", "--no-initial-controllers", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"
    )
    assert code == 0, err
    assert json.loads(out)["voters"] is None
    assert not (tmp_path / "d" / "quorum-state").exists()
    assert len(meta(tmp_path / "d")["directory.id"]) == 22


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ((), "give --standalone"),
        (("--initial-controllers", "1@h:9093"), "is not ID@HOST:PORT:DIRECTORY_ID"),
        (("--initial-controllers", f"1@h:9093:{DIRS[0]},1@h:9094:{DIRS[1]}"), "twice"),
        (("--initial-controllers", f"1@h:99999:{DIRS[0]}"), "out of range"),
        (("--rejoin", "--standalone"), "--rejoin is for a static quorum"),
    ],
)
def test_dynamic_format_refusals_are_one_line(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    code, _, err = fmt(dynamic_config(tmp_path / "n.properties", 1), tmp_path / "d", *flags)
    assert code != 0
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_modes_exclude_each_other_and_a_static_quorum_takes_none(tmp_path: Path) -> None:
    props = dynamic_config(tmp_path / "n.properties", 1)
    code, _, err = fmt(props, tmp_path / "d", "--standalone", "--no-initial-controllers")
    assert code == 2 and "not allowed with" in err
    static = tmp_path / "s.properties"
    static.write_text("node.id=1\ncontroller.quorum.voters=1@127.0.0.1:19091\n")
    code, _, err = fmt(static, tmp_path / "d2", "--standalone")
    assert code != 0 and "controller.quorum.voters" in err
    assert len(err.strip().splitlines()) == 1


def test_bootstrap_servers_are_validated_and_exclude_the_static_voters() -> None:
    config = server_config(
        {"node.id": "4", "controller.quorum.bootstrap.servers": "127.0.0.1:9093,[::1]:9094"}
    )
    assert config.dynamic_quorum is not None and config.quorum is None
    assert config.dynamic_quorum.bootstrap_servers == (("127.0.0.1", 9093), ("::1", 9094))
    with pytest.raises(ServerConfigError, match="both set"):
        server_config(
            {
                "node.id": "1",
                "controller.quorum.voters": "1@127.0.0.1:9093",
                "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
            }
        )
    with pytest.raises(ServerConfigError, match="is not host:port"):
        server_config({"node.id": "1", "controller.quorum.bootstrap.servers": "nope"})
    with pytest.raises(ServerConfigError, match=r"needs node\.id"):
        server_config({"controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    with pytest.raises(ServerConfigError, match="whole number"):
        server_config(
            {
                "node.id": "1",
                "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                "controller.quorum.fetch.timeout.ms": "soon",
            }
        )


def test_membership_verbs_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    code, _, err = run(
        ["quorum", "remove-controller", "--controller-id", "1", "--controller-directory-id", "x"]
    )
    assert code == 2 and "is not a directory id" in err
    code, _, err = run(["quorum", "remove-controller", "--controller-id", "-1"])
    assert code == 2 and "not a node id" in err
    code, _, err = run(["quorum", "remove-controller", "--controller-id", "1"])
    assert code != 0 and "--bootstrap-server" in err
    static = tmp_path / "s.properties"
    static.write_text("node.id=1\ncontroller.quorum.voters=1@127.0.0.1:19091\n")
    code, _, err = run(["quorum", "add-controller", "--config", str(static)])
    assert code != 0 and "dynamic quorum" in err and len(err.strip().splitlines()) == 1
    props = dynamic_config(tmp_path / "n.properties", 4)
    code, _, err = run(
        ["quorum", "add-controller", "--config", str(props), "--data-dir", str(tmp_path / "e")]
    )
    assert code != 0 and "directory.id" in err


def test_random_uuids_are_directory_ids_initial_controllers_take(tmp_path: Path) -> None:
    """`mlog quorum random-uuid` (Kafka's `kafka-storage random-uuid`) prints ids that
    `--initial-controllers` takes as directory ids: the way to make them before formatting."""
    ids = []
    for _ in range(3):
        code, out, err = run(["quorum", "random-uuid"])
        assert code == 0, err
        ids.append(out.strip())
    assert len(set(ids)) == 3
    code, out, _ = run(["--output", "json", "quorum", "random-uuid"])
    assert code == 0 and len(json.loads(out)["uuid"]) == 22
    initial = ",".join(f"{i}@127.0.0.1:1909{i}:{ids[i - 1]}" for i in (1, 2, 3))
    props = dynamic_config(tmp_path / "n2.properties", 2)
    code, out, err = fmt(props, tmp_path / "d2", "--initial-controllers", initial)
    assert code == 0, err
    assert meta(tmp_path / "d2")["directory.id"] == ids[1]


def test_a_bad_initial_controller_names_the_command_that_makes_ids(tmp_path: Path) -> None:
    props = dynamic_config(tmp_path / "n1.properties", 1)
    code, _, err = fmt(props, tmp_path / "d1", "--initial-controllers", "1@h:9093:short")
    assert code != 0
    assert "mlog quorum random-uuid" in err and err.count("\n") == 1, err
