"""`mlog quorum describe --bootstrap-server` against a single server: a one-voter quorum."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from api.cli.main import main
from tests.support.server_thread import running_server


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(args, out=out)
    return code, out.getvalue(), err.getvalue()


def test_describe_answers_the_single_server_as_its_only_voter(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", node_id=4) as server:
        bootstrap = ["--bootstrap-server", server.address]
        code, out, err = _run(["--output", "json", "quorum", "describe", *bootstrap])
        assert code == 0, err
        answer = json.loads(out)
        end = server.service.log.end_offset
        assert (answer["leader_id"], answer["high_watermark"]) == (4, end)
        assert answer["leader_epoch"] == server.service.log.epoch
        assert [v["replica_id"] for v in answer["voters"]] == [4]
        assert answer["voters"][0]["log_end_offset"] == end
        assert answer["observers"] == []
        code, table, err = _run(["quorum", "describe", *bootstrap])  # the human table
        assert code == 0 and table and not err, err
