"""api/cancellation.py: a cancelled task stops; no product code swallows a cancellation.

Python 3.11's `asyncio.wait_for` drops the caller's cancellation when the awaited step ends
in the same turn of the loop (a refused connect does, at once): a broker asked to stop
before any controller answered looped on, and `make test` once hung on it. These tests pin
the rule (no `wait_for`, no `suppress(BaseException)` around an await, in the product or
its examples) and the behaviour where it mattered.
"""

from __future__ import annotations

import ast
import asyncio

import pytest

from api.cancellation import cancel_and_wait
from api.client import connection as client_connection
from api.client.connection import ClientConnection
from tests.support.paths import REPO
from tests.support.source_tree import PRODUCT, parsed, python_files


def _swallowing_sites(tree: ast.Module, name: str) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "wait_for"
            and isinstance(node.value, ast.Name)
            and node.value.id == "asyncio"
        ):
            found.append(f"{name}:{node.lineno}: asyncio.wait_for")
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                suppresses_all = (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "suppress"
                    and any(isinstance(a, ast.Name) and a.id == "BaseException" for a in call.args)
                )
                if suppresses_all and any(isinstance(n, ast.Await) for n in ast.walk(node)):
                    found.append(f"{name}:{node.lineno}: suppress(BaseException)")
    return found


def test_no_product_code_swallows_a_cancellation() -> None:
    sites = [
        site
        for path in python_files(*PRODUCT, "examples")
        for site in _swallowing_sites(parsed(path), str(path.relative_to(REPO)))
    ]
    assert not sites, f"use asyncio.timeout / cancel_and_wait (api/cancellation.py): {sites}"


def test_the_rule_finds_both_habits() -> None:
    planted = ast.parse(
        "import asyncio, contextlib\n"
        "async def f(t):\n"
        "    await asyncio.wait_for(t, 1)\n"
        "    with contextlib.suppress(BaseException):\n"
        "        await t\n"
    )
    assert len(_swallowing_sites(planted, "planted.py")) == 2


async def test_the_callers_cancellation_is_raised_and_the_tasks_end_is_not() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise OSError("the task's own error")

    failing = asyncio.ensure_future(fails())
    await asyncio.sleep(0.01)
    await cancel_and_wait(failing)  # its error retrieved, not raised

    stubborn = asyncio.get_running_loop().create_future()

    async def slow_to_end() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await stubborn  # ends only once told

    inner = asyncio.ensure_future(slow_to_end())
    await asyncio.sleep(0)
    closer = asyncio.ensure_future(cancel_and_wait(inner))
    await asyncio.sleep(0)
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    stubborn.set_result(None)
    await asyncio.wait([inner])
    assert inner.cancelled()


async def test_a_connect_refused_as_its_caller_is_cancelled_is_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    refused = asyncio.get_running_loop().create_future()

    async def opening(*_: object) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await refused

    monkeypatch.setattr(client_connection, "_open", opening)
    connecting = asyncio.ensure_future(
        ClientConnection.connect("127.0.0.1:9", setup_timeout_ms=5000)
    )
    await asyncio.sleep(0.01)
    refused.set_exception(ConnectionRefusedError("refused"))
    connecting.cancel()  # the same turn of the loop: 3.11's wait_for returned the refusal
    with pytest.raises(asyncio.CancelledError):
        await connecting
