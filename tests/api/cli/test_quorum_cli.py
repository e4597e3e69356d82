"""`mlog quorum format|describe` and the quorum's keys of `mlog serve`: refusals in one line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from api.cli.main import main
from api.server.config import ServerConfigError, server_config
from tests.support.controller_certs import make_controller_pki

VOTERS = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"


def run(args: list[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        code = main(args, out=out)
    return code, out.getvalue(), err.getvalue()


def config(path: Path, node_id: int = 1, voters: str = VOTERS) -> Path:
    """A voter's server.properties: a client listener and an mTLS CONTROLLER listener."""
    pki = make_controller_pki(path.parent / "pki")
    lines = [
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "controller.listener.names=CONTROLLER",
        *(f"{key}={value}" for key, value in pki.server_keys().items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_format_writes_the_state_once_and_every_voter_gets_the_same_cluster_id(
    tmp_path: Path,
) -> None:
    ids = []
    for node_id in (1, 2, 3):
        props = config(tmp_path / f"n{node_id}.properties", node_id)
        data = tmp_path / f"d{node_id}"
        code, out, _ = run(
            [
                "--output",
                "json",
                "quorum",
                "format",
                "--config",
                str(props),
                "--data-dir",
                str(data),
            ]
        )
        assert code == 0
        answer = json.loads(out)
        assert answer["voters"] == [1, 2, 3] and answer["node_id"] == node_id
        ids.append(answer["cluster_id"])
        state = json.loads((data / "quorum-state").read_text())
        assert state["leaderEpoch"] == 0 and state["votedId"] == -1
    assert len(set(ids)) == 1
    code, _, err = run(
        [
            "quorum",
            "format",
            "--config",
            str(tmp_path / "n1.properties"),
            "--data-dir",
            str(tmp_path / "d1"),
        ]
    )
    assert code == 2 and "formatted already" in err and "forget the node's vote" in err


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("node.id=1\n", "no controller.quorum.voters"),
        ("controller.quorum.voters=" + VOTERS, "needs node.id"),
        ("node.id=1\ncontroller.quorum.voters=1@h:99999", "port 99999"),
        ("node.id=1\ncontroller.quorum.voters=1@h:1,1@h:2", "names node 1 twice"),
        ("node.id=1\ncontroller.quorum.voters=x", "is not id@host:port"),
        (
            "node.id=1\ncontroller.quorum.voters="
            + VOTERS
            + "\ncontroller.quorum.election.timeout.ms=-5",
            "election.timeout.ms",
        ),
    ],
)
def test_format_refuses_a_bad_config_in_one_line(tmp_path: Path, lines: str, message: str) -> None:
    props = tmp_path / "bad.properties"
    props.write_text(lines + "\n")
    code, _, err = run(
        ["quorum", "format", "--config", str(props), "--data-dir", str(tmp_path / "d")]
    )
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "d" / "quorum-state").exists()


def test_an_observer_is_formatted_with_the_voters_cluster_id_and_no_vote(tmp_path: Path) -> None:
    voter = config(tmp_path / "n1.properties", 1)
    code, out, _ = run(
        [
            "--output",
            "json",
            "quorum",
            "format",
            "--config",
            str(voter),
            "--data-dir",
            str(tmp_path / "d1"),
        ]
    )
    assert code == 0
    cluster_id = json.loads(out)["cluster_id"]
    observer = config(tmp_path / "n4.properties", 4)
    data = tmp_path / "d4"
    code, out, _ = run(["quorum", "format", "--config", str(observer), "--data-dir", str(data)])
    assert code == 0 and "observer node 4" in out and "never votes" in out
    assert f"cluster.id={cluster_id}" in (data / "meta.properties").read_text()
    assert not (data / "quorum-state").exists()  # no vote to keep


def test_quorum_keys_without_voters_are_refused() -> None:
    with pytest.raises(ServerConfigError, match=r"without controller\.quorum\.voters"):
        server_config({"node.id": "1", "controller.quorum.fetch.timeout.ms": "100"})
    assert server_config({"node.id": "1"}).quorum is None
    quorum = server_config({"node.id": "2", "controller.quorum.voters": VOTERS}).quorum
    assert quorum is not None and quorum.node_id == 2 and quorum.voters == {1, 2, 3}


def test_format_refuses_a_directory_with_a_log_but_it_may_rejoin(tmp_path: Path) -> None:
    props = config(tmp_path / "n1.properties")
    data = tmp_path / "d"
    assert run(["--data-dir", str(data), "brokers", "register", "--id", "1"])[0] == 0
    code, _, err = run(["quorum", "format", "--config", str(props), "--data-dir", str(data)])
    assert code == 2 and "holds a log" in err
    code, _, err = run(
        ["quorum", "format", "--rejoin", "--config", str(props), "--data-dir", str(data)]
    )
    assert code == 0, err  # its log is the leader's to correct: it catches up, then votes
    assert not (data / "quorum-state").exists()


def test_a_quorum_nodes_directory_refuses_embedded_writes(tmp_path: Path) -> None:
    props = config(tmp_path / "n1.properties")
    data = tmp_path / "d"
    assert run(["quorum", "format", "--config", str(props), "--data-dir", str(data)])[0] == 0
    code, _, err = run(["--data-dir", str(data), "brokers", "register", "--id", "1"])
    assert code == 2 and "controller quorum" in err and "--bootstrap-server" in err


def test_describe_needs_a_server(tmp_path: Path) -> None:
    code, _, err = run(["--data-dir", str(tmp_path), "quorum", "describe"])
    assert code == 2 and "--bootstrap-server" in err


def test_serve_refuses_an_unformatted_quorum_directory(tmp_path: Path) -> None:
    props = config(tmp_path / "n1.properties")
    code, _, err = run(["serve", "--config", str(props), "--data-dir", str(tmp_path / "d")])
    assert code == 2 and "mlog quorum format" in err and "--rejoin" in err


def test_a_sole_voter_without_its_state_is_refused_not_left_waiting(tmp_path: Path) -> None:
    # With no other voter to catch up from, a sole voter without quorum-state could never vote
    # again (tests/api/raft/test_raft_core_timers_and_ready.py: the core's known gap); the CLI
    # says so instead.
    props = config(tmp_path / "n1.properties", 1, voters="1@127.0.0.1:19091")
    data = tmp_path / "d"
    code, _, err = run(
        ["quorum", "format", "--rejoin", "--config", str(props), "--data-dir", str(data)]
    )
    assert code == 2 and "only voter" in err and err.count("\n") == 1, err
    assert not data.exists()
    assert run(["quorum", "format", "--config", str(props), "--data-dir", str(data)])[0] == 0
    (data / "quorum-state").unlink()  # the state lost, the cluster id kept
    code, _, err = run(["serve", "--config", str(props), "--data-dir", str(data)])
    assert code == 2 and "only voter" in err and "Restore quorum-state" in err, err


def test_describe_shows_a_voter_never_heard_from_as_kafka_does() -> None:
    """A voter killed before this leader's epoch has no last fetch: -1 (Kafka's
    LastFetchTimestamp), not `None`."""
    from api.cli.quorum import describe_rows

    def replica(node: int, end: int, ago: int | None) -> dict[str, object]:
        return {
            "replica_id": node,
            "directory_id": None,
            "log_end_offset": end,
            "lag": 0 if end > 0 else 9,
            "last_fetch_timestamp": -1 if ago is None else 1_000 - ago,
            "last_fetch_ms_ago": ago,
        }

    answer = {"voters": [replica(1, 9, 0), replica(2, -1, None)], "observers": []}
    assert describe_rows(answer) == [[1, "voter", 9, 0, 0, "-"], [2, "voter", -1, 9, -1, "-"]]
