"""A quorum member's controller listener: required, mTLS, and who its controllers are.

`check_controller_listener` (what `mlog serve` runs before it opens anything) and
`controller_principals` (`controller.principals`, else this node's own certificate's
principal) of `api.server.config` and `api.server.listeners`.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from api.cli.main import main
from api.security.properties import load_properties
from api.server.config import ServerConfigError, check_controller_listener, server_config
from api.server.listeners import controller_principals
from tests.support.controller_certs import CONTROLLER_PRINCIPAL, make_controller_pki
from tests.support.paths import DATA

KAFKA_39 = DATA / "kafka-3.9-server.properties"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A quorum member with a client listener and an mTLS CONTROLLER listener."""
    pki = make_controller_pki(tmp_path_factory.mktemp("pki"))
    return {
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "controller.listener.names": "CONTROLLER",
        **pki.server_keys(),
    }


def _refusal(values: dict[str, str]) -> str:
    with pytest.raises(ServerConfigError) as caught:
        check_controller_listener(server_config(values))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_mtls_controller_listener_is_taken_and_its_certificate_names_the_controllers(
    keys: dict[str, str],
) -> None:
    config = server_config(keys)
    check_controller_listener(config)
    assert config.controller_listener_names == ("CONTROLLER",)
    assert controller_principals(config) == {CONTROLLER_PRINCIPAL}
    named = server_config({**keys, "controller.principals": "User:c1; User:c2"})
    assert controller_principals(named) == {"User:c1", "User:c2"}
    assert not [n for n in config.notes if "controller.listener.names" in n]


def test_a_quorum_member_without_controller_listener_names_is_refused(
    keys: dict[str, str],
) -> None:
    values = {k: v for k, v in keys.items() if k != "controller.listener.names"}
    assert "needs controller.listener.names" in _refusal(values)
    dynamic = {k: v for k, v in values.items() if k != "controller.quorum.voters"}
    dynamic["controller.quorum.bootstrap.servers"] = "127.0.0.1:9093"
    assert "needs controller.listener.names" in _refusal(dynamic)
    # A single server needs none.
    single = {k: v for k, v in values.items() if k != "controller.quorum.voters"}
    check_controller_listener(server_config(single))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}, "mTLS"),
        ({"listener.name.controller.ssl.client.auth": "requested"}, "client.auth=required"),
        ({"listener.name.controller.ssl.client.auth": "none"}, "does not authenticate"),
        ({"controller.listener.names": "OTHER"}, "not in listeners"),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "cannot log in with SASL",
        ),
    ],
)
def test_a_controller_listener_that_does_not_authenticate_its_peers_is_refused(
    keys: dict[str, str], change: dict[str, str], expected: str
) -> None:
    assert expected in _refusal({**keys, **change})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("User:ANONYMOUS", "never a controller"),
        ("User:c1;User:ANONYMOUS", "never a controller"),
        ("controller", "is not a principal"),
        (" ; ", "is empty"),
    ],
)
def test_controller_principals_is_checked(keys: dict[str, str], value: str, expected: str) -> None:
    with pytest.raises(ServerConfigError, match=expected):
        server_config({**keys, "controller.principals": value})


def test_mlog_serve_with_kafkas_plaintext_controller_listener_stops_in_one_line(
    tmp_path: Path,
) -> None:
    config = tmp_path / "server.properties"
    values = load_properties(KAFKA_39)
    values["log.dirs"] = str(tmp_path / "data")
    config.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["serve", "--config", str(config)])
    lines = err.getvalue().strip().splitlines()
    assert code != 0
    assert len(lines) == 1 and "controller listener CONTROLLER (PLAINTEXT)" in lines[0]
    assert "ssl.client.auth=required" in lines[0]
