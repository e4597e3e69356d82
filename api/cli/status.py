"""`mlog status --metrics-server HOST:PORT ...`: whether running servers are ready, in a table.

Each server's metrics listener (`metrics.listen`) is asked for `/readyz`: the table shows what
the probe answers (ready or not and why, the role, the leader it knows, the epoch, the
committed and applied offsets, whether it takes writes), one row per server, so a quorum's
nodes are seen side by side. Exit 0 when every server is ready, 1 otherwise (a server that
does not answer is not ready).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_DAMAGED, EXIT_OK, add_global_options
from api.cli.output import print_table

if TYPE_CHECKING:
    from api.service.settings import Settings

TIMEOUT_S = 5.0
"""How long one server may take to answer its probe."""

COLUMNS = ("Server", "Ready", "Role", "Leader", "Epoch", "Committed", "Applied", "Writes")


def readiness(address: str, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """`/readyz` of the metrics listener at `address` as a dict (an unreachable one: why)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=timeout) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:  # 503: answered, not ready
        body = exc.read()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"server": address, "ready": False, "reason": f"unreachable: {reason}"}
    try:
        state = json.loads(body)
    except ValueError:
        return {"server": address, "ready": False, "reason": "answered something not JSON"}
    if not isinstance(state, dict):
        return {"server": address, "ready": False, "reason": "answered something not JSON"}
    return {"server": address, **state}


def cmd_status(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Ask each server for `/readyz` and print one row each; exit 1 unless all are ready."""
    states = [readiness(address) for address in args.metrics_server]
    if settings.output == "json":
        out.write(json.dumps(states, separators=(",", ":")) + "\n")
    else:
        rows = [
            [
                s["server"],
                "yes" if s.get("ready") else "no",
                s.get("role", "-"),
                s.get("leader_id", "-"),
                s.get("epoch", "-"),
                s.get("committed_offset", "-"),
                s.get("applied_offset", "-"),
                "yes" if s.get("writes") else "no",
            ]
            for s in states
        ]
        print_table(rows, COLUMNS, out)
        for s in states:
            if s.get("reason"):
                out.write(f"{s['server']}: {s['reason']}\n")
    return EXIT_OK if all(s.get("ready") for s in states) else EXIT_DAMAGED


def _address(text: str) -> str:
    from api.cli.serve import host_port

    host, port = host_port(text)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def add_verbs(status: argparse.ArgumentParser) -> None:
    """The flags of `mlog status`, on its parser."""
    add_global_options(status)
    status.add_argument(
        "--metrics-server",
        type=_address,
        action="append",
        required=True,
        metavar="HOST:PORT",
        help="a server's metrics listener (its metrics.listen); repeat for each node",
    )
    status.set_defaults(handler=cmd_status)
