"""`mlog history` with nothing to show tells a name never seen from one untouched in range."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import mlog, ok
from tests.support.server_thread import running_server


@pytest.fixture(params=["data-dir", "server"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Broker 1 at offset 1, topic orders at 2..4, namespace org at 5, topic gone deleted."""
    data = tmp_path / "data"
    ok(data, "brokers", "register", "--id", "1")
    ok(data, "topics", "create", "--topic", "orders", "--partitions", "2")
    ok(data, "namespaces", "create", "--namespace", "org")
    ok(data, "topics", "create", "--topic", "gone")
    ok(data, "topics", "delete", "--topic", "gone")
    if request.param == "data-dir":
        yield []
        return
    with running_server(data / "log", brokers=1) as server:
        yield ["--bootstrap-server", server.address]


@pytest.mark.parametrize(
    ("entity", "said"),
    [
        (["--topic", "nosuch"], "no topic had that name (nosuch)"),
        (["--topic-id", "AAAAAAAAAAAAAAAAAAAAAQ"], "no topic had that id (AAAAAAAAAAAAAAAAAAAAAQ)"),
        (["--namespace", "nowhere"], "no namespace had that name (nowhere)"),
        (["--broker", "7"], "no broker had that id (7)"),
    ],
)
def test_a_name_never_in_the_log_is_called_unknown(
    tmp_path: Path, where: list[str], entity: list[str], said: str
) -> None:
    for ranged in ([], ["--gt", "1"]):
        code, text = mlog(tmp_path / "data", "history", *entity, *ranged, *where)
        assert code == 0
        assert text.startswith(said), text


@pytest.mark.parametrize("entity", [["--topic", "orders"], ["--broker", "1"], ["--topic", "gone"]])
def test_a_known_name_untouched_in_the_range_says_so(
    tmp_path: Path, where: list[str], entity: list[str]
) -> None:
    code, text = mlog(tmp_path / "data", "history", *entity, "--gt", "100", *where)
    assert (code, text) == (0, "no entry touched it in that range\n")
    code, text = mlog(tmp_path / "data", "history", *entity, *where)
    assert code == 0 and "User:" in text and "no entry" not in text
