"""Mutation testing: small changes to a module (mutants) run against the tests that exercise it.

Usage: python tests/mutate.py [--min-score PCT] [--report DIR] [--list] [--again] [--jobs N]
                              [--since COMMIT] [MODULE ...]

MODULE is a source file of `TARGETS` (default: all of them, one after another). For each:

1. the module's tests run once under coverage, each test in its own context: which tests run
   which line, and how long each takes (they must all pass);
2. each mutant is one AST change (operators below) compiled in place of the module: its
   tests are the ones that run the mutated line, fastest first, stopping at the first failure
   (`pytest -x`), with a per-test timeout (pytest-timeout) and a hard one per mutant, so a
   mutant that loops forever counts as caught, quickly;
3. a mutant is caught (killed, or timed out) if a test fails, survives if they all pass, and
   is uncovered if no test runs its line (counted as surviving).

Each mutant runs in a forked child of a process that has imported the third-party libraries
but none of the project, so the child imports the project afresh with the mutant in place of
the module; the file on disk is never changed. The report (`--report`, default
`.mutation/`) has one JSON file per module with every survivor; while a module runs, each
mutant's verdict is appended to `<module>.progress.jsonl` beside it, so a run cut short (a
killed session, a machine restart) resumes where it stopped while the module, its tests and
the runner are unchanged. Exit 1 if a module scores
below `--min-score` (default 90). `--since COMMIT` makes only the mutants of lines added or
changed since COMMIT (`git diff`): a cheap re-score of a module's new code, reported as such.

Operators: comparison flips (`==`/`!=`, `in`/`not in`, `is`/`is not`, `<` -> `>=`, ...),
boundaries (`<` <-> `<=`, `>` <-> `>=`), boolean negation (`and` <-> `or`, `not x` -> `x`, an
`if`/`while` condition negated), arithmetic (`+` <-> `-`, ...), constants (an int n -> n + 1,
`True` <-> `False`), return values (`return x` -> `return None`) and statement deletion (a
call, assignment, `raise`, `continue` or `break` -> `pass`). Strings (messages, docstrings),
`assert`s (type narrowing) and class decorators (`@dataclass` options) are left alone, and so
is a line marked `# pragma: no mutate`.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_REPLAY_TESTS = (
    "tests/test_replay_rules.py",
    "tests/test_replay.py",
    "tests/test_log_replay_checks.py",
    "tests/test_replay_security.py",
)
_RECORDS_TESTS = (
    "tests/test_records.py",
    "tests/test_codec_edges.py",
    "tests/test_json_form_edges.py",
    "tests/test_records_support.py",
    "tests/test_records_format.py",
    "tests/test_fast_decode_programs.py",
    "tests/test_fast_decode.py",
    "tests/test_schema_evolution.py",
)
_LOG_TESTS = (
    "tests/test_container.py",
    "tests/test_log.py",
    "tests/test_integrity.py",
    "tests/test_repair.py",
    "tests/test_cli_integrity.py",
    "tests/test_log_settings.py",
    "tests/test_log_spans.py",
    "tests/test_log_index.py",
    "tests/test_log_checkpoint.py",
    "tests/test_container_bounds.py",
    "tests/test_log_extent.py",
    "tests/test_log_verify.py",
    "tests/test_log_tail.py",
    "tests/test_log_schema_check.py",
    "tests/test_log_reads.py",
    "tests/test_log_open.py",
    "tests/test_log_segment.py",
    "tests/test_log_replica.py",
    "tests/test_log_quorum_units.py",
    "tests/test_log_trim.py",
    "tests/test_log_trim_units.py",
    "tests/test_log_start_snapshot.py",
    "tests/test_schema_evolution.py",  # an active segment of an older entry schema on open
)
_CONTROLLER_TESTS = (
    "tests/test_controller.py",
    "tests/test_controller_names.py",
    "tests/test_controller_limits.py",
    "tests/test_controller_errors.py",
    "tests/test_config_values.py",
    "tests/test_controller_topics.py",
    "tests/test_controller_states.py",
    "tests/test_config_ranges.py",
    "tests/test_controller_configs.py",
    "tests/test_controller_brokers.py",
    "tests/test_controller_elections.py",
    "tests/test_config_defs.py",
    "tests/test_namespaces.py",
    "tests/test_partition_reduction.py",
    "tests/test_validation.py",
    "tests/test_placement.py",
)
_SQL_TESTS = (
    "tests/test_snapshot_store_edges.py",
    "tests/test_snapshot_store.py",
    "tests/test_snapshot_security.py",
    "tests/test_migrations.py",
    "tests/test_snapshot_damage.py",
)
"""The snapshot store's tests. Left out (a surviving mutant runs every test of its line): the
crash test (real processes), time travel in a trimmed log and the clients' writes through the
service, which run no line of replay/sql that these do not (measured with coverage)."""
_SQL_CONTENT_TESTS = _SQL_TESTS[:3]
"""Rows to image and back: the damage tests (SQLite pages, a dropped PostgreSQL table) and the
migrations run no line of content.py, security_rows.py or ids.py that these do not."""
_AUDIT_TESTS = (
    "tests/test_audit_columns.py",
    "tests/test_audit_session.py",
    "tests/test_audit.py",
    "tests/test_leader_change_record.py",
)
_AUDIT_FAST_TESTS = ("tests/test_audit_columns.py", "tests/test_audit_source.py")
"""In-process audit tests (pyarrow, no JVM): the only ones that see a mutant of the code Spark's
Python workers run (the data source's reader and the columns), which they import from disk."""
_AUDIT_SPARK_TESTS = ("tests/test_audit_units.py", "tests/test_audit.py")
"""The driver-side audit code: its checks in-process first, then one local session per mutant
child (test_audit_session.py's JVM runs are child processes, which import from disk too)."""
_SECURITY_TESTS = (
    "tests/test_authorizer.py",
    "tests/test_acls_api.py",
    "tests/test_authorization.py",
    "tests/test_scram.py",
    "tests/test_replay_security.py",
)
_RAFT_TESTS = (
    "tests/test_raft_core.py",
    "tests/test_raft_core_units.py",
    "tests/test_raft_handlers_units.py",
    "tests/test_raft_log_view.py",
    "tests/test_raft_rules.py",
    "tests/test_raft_quorum_state.py",
    "tests/test_raft_figure_eight.py",
    "tests/test_raft_simulation.py",
    "tests/test_raft_snapshot_fetch.py",
    "tests/test_raft_snapshot_fetch_units.py",
    "tests/test_raft_log_view_start.py",
    "tests/test_raft_wiped_voter_epoch.py",
)
SIM_SEEDS = "250"
"""The seeds of `tests/test_raft_simulation.py` under mutation (`MLOG_SIM_SEEDS`; CI runs 2,000):
a surviving mutant runs every seed test of its line, ~10 s for 2,000. What the seeds catch the
first 250 mostly catch too; where they do not, a unit test is the better fix than more seeds."""
SWEEPS = (
    "tests/test_integrity.py::test_every_bit_of_the_newest_segments_blocks_and_sync_marker",
    "tests/test_integrity.py::test_every_bit_of_the_newest_segments_header_is_caught_by_its_crc",
    "tests/test_integrity.py::test_schema_text_flips_decode_in_bounded_memory_in_a_capped_child",
    "tests/test_integrity.py::test_a_sample_of_an_older_segments_bits",
    "tests/test_log.py::test_every_record_reads_back_equal_to_what_was_appended",
)
"""Tests left out of the mutant runs of every module but `SWEEP_TARGETS`: seconds each (three
quarters of the log tests' time), and a survivor runs every test of its line. What they sweep
(every bit of a segment) other tests check at chosen points; leaving them out can only count a
mutant as surviving."""

SWEEP_TARGETS = frozenset(
    {"metadata_log/tail.py", "metadata_log/verify.py", "metadata_log/schema_check.py"}
)
"""Modules whose verdicts the sweeps judge through the log: their mutants run them (first runs
without them, and before test_log_tail.py, test_log_verify.py and test_log_schema_check.py
judged the same verdicts directly: tail.py 15.8%, verify.py 73.6%, schema_check.py 55.5%)."""

TARGETS: dict[str, tuple[str, ...]] = {
    # replay/
    "replay/delta.py": (*_REPLAY_TESTS, "tests/test_namespaces.py", "tests/test_client_writes.py"),
    "replay/rules.py": _REPLAY_TESTS,
    "replay/errors.py": (*_REPLAY_TESTS, "tests/test_timetravel_trimmed.py"),
    "replay/image.py": (
        *_REPLAY_TESTS,
        "tests/test_namespaces.py",
        "tests/test_timetravel.py",
        "tests/test_client_writes.py",
        "tests/test_client_writes_image.py",
    ),
    "replay/loader.py": (
        *_REPLAY_TESTS,
        "tests/test_timetravel.py",
        "tests/test_timetravel_trimmed.py",
    ),
    "replay/append.py": ("tests/test_log_replay_checks.py", "tests/test_cli.py"),
    # Time travel, diff and history: in-process, through `mlog` and through the private APIs.
    "replay/timetravel.py": (
        "tests/test_timetravel_units.py",
        "tests/test_timetravel.py",
        "tests/test_snapshot_store.py",
        "tests/test_log_trim.py",
        "tests/test_timetravel_trimmed.py",
        "tests/test_timetravel_security.py",
        "tests/test_cli_ranges.py",
        "tests/test_cli_refusals.py",
        "tests/test_cli_snapshots.py",
        "tests/test_remote.py",
    ),
    "replay/changes.py": (
        "tests/test_timetravel_units.py",
        "tests/test_timetravel.py",
        "tests/test_timetravel_security.py",
    ),
    "replay/timetravel_security.py": (
        "tests/test_timetravel_security.py",
        "tests/test_timetravel.py",
        "tests/test_replay_security.py",
    ),
    # replay/sql/: the snapshot store, on SQLite and PostgreSQL (the fast SQLite cases run
    # first: a mutant stops at its first failing test).
    **{f"replay/sql/{name}.py": _SQL_TESTS for name in ("models", "revision", "schema", "store")},
    **{
        f"replay/sql/{name}.py": _SQL_CONTENT_TESTS
        for name in ("content", "errors", "ids", "security_rows")
    },
    # replay/audit/: the reader and the columns run in Spark's Python workers, which import
    # them from disk, never the mutant: only in-process tests judge them. The driver-side
    # modules start one local session per mutant child (the JVM: seconds to tens of seconds).
    "replay/audit/columns.py": _AUDIT_FAST_TESTS,
    "replay/audit/source.py": ("tests/test_audit_source.py",),
    "replay/audit/state.py": _AUDIT_SPARK_TESTS,
    "replay/audit/access.py": _AUDIT_SPARK_TESTS,
    "replay/audit/queries.py": (*_AUDIT_SPARK_TESTS, "tests/test_leader_change_record.py"),
    "replay/audit/session.py": ("tests/test_audit_session.py", "tests/test_audit.py"),
    "replay/audit/errors.py": _AUDIT_TESTS,
    # The FetchSnapshot form: its wire test, and the catch-up of a real follower through it.
    "replay/snapshot_bytes.py": (
        "tests/test_snapshot_bytes.py",
        "tests/test_raft_wire.py",
        "tests/test_quorum_snapshot_catch_up.py",
    ),
    # records/
    **{
        f"records/{name}.py": _RECORDS_TESTS
        for name in (
            "codec",
            "schemas",
            "json_form",
            "uuids",
            "avro_array",
            "fast_decode",
            "upcasting",
            "interning",
            "varint",
            "slots",
            "entry",
            "model",
            "errors",
        )
    },
    # `column_plan` is the audit's columnar decoder: its tests are the audit columns' (pyarrow).
    "records/fast_decode.py": (*_RECORDS_TESTS, "tests/test_audit_columns.py"),
    # metadata_log/
    **{
        f"metadata_log/{name}.py": _LOG_TESTS
        for name in (
            "container",
            "segment",
            "log",
            "replica",
            "extent",
            "index",
            "spans",
            "verify",
            "repair",
            "checkpoint",
            "schema_check",
            "epoch",
            "lock",
            "config",
            "errors",
        )
    },
    # Torn-tail classification is what the bit sweeps and the crash tests (real processes
    # killed mid-write) check: tail.py keeps them (SWEEP_TARGETS), at seconds a mutant.
    "metadata_log/tail.py": (*_LOG_TESTS, "tests/test_crash.py"),
    # metadata_log/raft/: the sans-IO core, fed by hand and by the simulation's seeds.
    **{
        f"metadata_log/raft/{name}.py": _RAFT_TESTS
        for name in (
            "core",
            "handlers",
            "replication",
            "election",
            "quorum_state",
            "config",
            "ready",
            "roles",
        )
    },
    "metadata_log/raft/messages.py": (*_RAFT_TESTS, "tests/test_raft_wire.py"),
    "metadata_log/raft/snapshot_fetch.py": (*_RAFT_TESTS, "tests/test_raft_wire.py"),
    # The start snapshot a log trimmed below its first entry keeps (`trim_before`).
    "metadata_log/start_snapshot.py": (
        "tests/test_start_snapshot_file.py",
        "tests/test_log_start_snapshot.py",
        "tests/test_log_trim.py",
        "tests/test_log_replica.py",
    ),
    "metadata_log/raft/log_view.py": (*_RAFT_TESTS, "tests/test_log_replica.py"),
    # api/controller/
    "api/controller/placement.py": ("tests/test_placement.py",),
    **{
        f"api/controller/{name}.py": _CONTROLLER_TESTS
        for name in (
            "topics",
            "brokers",
            "configs",
            "config_values",
            "config_defs",
            "elections",
            "namespaces",
            "partition_reduction",
            "names",
            "states",
            "limits",
            "errors",
        )
    },
    # The security side of the controller: ACLs, their index, the authorizer, credentials (no
    # test of _CONTROLLER_TESTS imports them); and the controller's front (commands,
    # Controller) that every write goes through.
    **{
        f"api/controller/{name}.py": _SECURITY_TESTS
        for name in ("acl_index", "acls", "authorizer", "credentials")
    },
    "api/controller/commands.py": (*_SECURITY_TESTS, *_CONTROLLER_TESTS),
    "api/controller/controller.py": (
        *_SECURITY_TESTS,
        *_CONTROLLER_TESTS,
        "tests/test_controller_front.py",
    ),
}
"""Each module under mutation and the tests that exercise it (kept tight: they run per mutant)."""

# ---------------------------------------------------------------------- mutants


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutant:
    """One AST change: where, what, and the code of the module with it."""

    index: int
    line: int
    last_line: int
    """The lines whose tests run the mutant: those of the changed code (an `if`'s condition)."""
    module_level: bool
    """Outside every function: run at import, so every test may depend on it."""
    operator: str
    description: str
    source_line: str


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the Expr nodes that are docstrings (module, class, function)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first))
        # Attribute docstrings: a string statement after an assignment.
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for statement in body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    found.add(id(statement))
    return found


_COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Lt: (ast.LtE, ast.GtE),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_OP_TEXT = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%",
    ast.BitOr: "|", ast.BitAnd: "&", ast.LShift: "<<", ast.RShift: ">>",
    ast.And: "and", ast.Or: "or",
}  # fmt: skip

Change = Callable[[ast.AST], None]
"""Applies one mutation to the node it was found at (in a fresh copy of the tree)."""


def _changes(node: ast.AST, docstrings: set[int]) -> Iterator[tuple[str, str, Change]]:
    """(operator, description, change) for every mutation of `node` itself."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for swap in _COMPARE_SWAPS.get(type(op), ()):
                kind = "boundary" if {type(op), swap} in _BOUNDARIES else "comparison"

                def change(n: ast.AST, i: int = i, swap: type[ast.cmpop] = swap) -> None:
                    assert isinstance(n, ast.Compare)
                    n.ops[i] = swap()

                yield kind, f"{_OP_TEXT[type(op)]} -> {_OP_TEXT[swap]}", change
    elif isinstance(node, ast.BoolOp):
        swap_op: type[ast.boolop] = ast.Or if isinstance(node.op, ast.And) else ast.And

        def change_bool(n: ast.AST, swap_op: type[ast.boolop] = swap_op) -> None:
            assert isinstance(n, ast.BoolOp)
            n.op = swap_op()

        yield "boolean", f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[swap_op]}", change_bool
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):

        def drop_not(n: ast.AST) -> None:
            assert isinstance(n, ast.UnaryOp)
            # `not x` -> `True if x else False`, i.e. bool(x)
            _become(
                n, ast.IfExp, test=n.operand, body=ast.Constant(True), orelse=ast.Constant(False)
            )

        yield "boolean", "not x -> x", drop_not
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINOP_SWAPS:
        arith = _BINOP_SWAPS[type(node.op)]

        def change_arith(n: ast.AST, arith: type[ast.operator] = arith) -> None:
            assert isinstance(n, ast.BinOp | ast.AugAssign)
            n.op = arith()

        yield "arithmetic", f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[arith]}", change_arith
    elif isinstance(node, ast.Constant) and not isinstance(node.value, str | bytes):
        value = node.value
        if isinstance(value, bool):

            def flip(n: ast.AST) -> None:
                assert isinstance(n, ast.Constant)
                n.value = not n.value

            yield "constant", f"{value} -> {not value}", flip
        elif isinstance(value, int):

            def bump(n: ast.AST) -> None:
                assert isinstance(n, ast.Constant) and isinstance(n.value, int)
                n.value = n.value + 1

            yield "constant", f"{value} -> {value + 1}", bump
    if isinstance(node, ast.If | ast.While | ast.IfExp):

        def negate(n: ast.AST) -> None:
            assert isinstance(n, ast.If | ast.While | ast.IfExp)
            n.test = ast.UnaryOp(op=ast.Not(), operand=n.test)

        yield "boolean", "condition negated", negate
    returned = node.value if isinstance(node, ast.Return) else None
    if returned is not None and not (isinstance(returned, ast.Constant) and returned.value is None):

        def return_none(n: ast.AST) -> None:
            assert isinstance(n, ast.Return)
            n.value = ast.Constant(value=None)

        yield "return", "return x -> return None", return_none
    deletable = ast.Assign | ast.AugAssign | ast.Raise | ast.Continue | ast.Break | ast.Delete
    call = isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)
    if (call and id(node) not in docstrings) or isinstance(node, deletable):
        yield "statement", f"{type(node).__name__.lower()} deleted", _to_pass


_BOUNDARIES = [{ast.Lt, ast.LtE}, {ast.Gt, ast.GtE}]


def _become(node: ast.AST, cls: type[ast.AST], **fields: object) -> None:
    """Turn `node` into a `cls` node in place: its place in the tree (and location) stays."""
    for name in list(node._fields):
        if hasattr(node, name):
            delattr(node, name)
    node.__class__ = cls
    for name, value in fields.items():
        setattr(node, name, value)


def _to_pass(node: ast.AST) -> None:
    """Turn a statement into `pass`."""
    _become(node, ast.Pass)


def _skipped_subtrees(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: asserts, annotations, `TYPE_CHECKING` blocks, __slots__."""
    skip: set[int] = set()

    def all_ids(node: ast.AST) -> None:
        skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            all_ids(node)
        elif isinstance(node, ast.AnnAssign):
            all_ids(node.annotation)
        elif isinstance(node, ast.ClassDef):
            # `@dataclass(frozen=True, slots=True, kw_only=True)`: conventions mypy and review
            # hold, not behaviour a test can tell apart.
            for decorator in node.decorator_list:
                all_ids(decorator)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                if arg.annotation is not None:
                    all_ids(arg.annotation)
            if node.returns is not None:
                all_ids(node.returns)
        elif (
            (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
            or isinstance(node, ast.ImportFrom | ast.Import)
            or (
                isinstance(node, ast.Assign)
                and any(
                    isinstance(t, ast.Name) and t.id in ("__slots__", "__all__")
                    for t in node.targets
                )
            )
        ):
            all_ids(node)
    skip.update(_type_aliases(tree, skip))
    return skip


def _type_aliases(tree: ast.AST, annotations: set[int]) -> set[int]:
    """ids of module-level type aliases (`X = Callable[...]`, `Y = A | B`) that only annotate.

    With `from __future__ import annotations` an annotation is never evaluated, so deleting an
    alias that no code reads at run time changes nothing: it is an annotation, left alone.
    """
    read = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in annotations
    }
    found: set[int] = set()
    for node in getattr(tree, "body", []):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id not in read
            and _is_type_expression(node.value)
        ):
            found.update(id(n) for n in ast.walk(node))
    return found


def _is_type_expression(node: ast.expr, *, top: bool = True) -> bool:
    """`Name[...]`, `a.B[...]`, or a `|` of types with one such: a type's shape, not a value's."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = (node.left, node.right)
        return all(_is_type_expression(n, top=False) for n in sides) and (
            not top or any(isinstance(n, ast.Subscript) for n in sides)
        )
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name | ast.Attribute)
    return not top and (
        isinstance(node, ast.Name | ast.Attribute)
        or (isinstance(node, ast.Constant) and node.value is None)
    )


def enumerate_mutants(source: str) -> list[tuple[Mutant, Change, int]]:
    """Every mutant of `source`: (mutant, change, position of its node in `ast.walk`)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    docstrings = _docstring_nodes(tree)
    skip = _skipped_subtrees(tree)
    in_functions = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for inner in ast.walk(node)
        if inner is not node
    }
    out: list[tuple[Mutant, Change, int]] = []
    for position, node in enumerate(ast.walk(tree)):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        line = node.lineno
        text = lines[line - 1]
        if "pragma: no mutate" in text:
            continue
        for operator, description, change in _changes(node, docstrings):
            span: ast.AST = node
            if isinstance(node, ast.If | ast.While | ast.IfExp) and description == (
                "condition negated"
            ):
                span = node.test
            mutant = Mutant(
                index=len(out),
                line=line,
                last_line=max(line, getattr(span, "end_lineno", None) or line),
                module_level=id(node) not in in_functions,
                operator=operator,
                description=description,
                source_line=text.strip(),
            )
            out.append((mutant, change, position))
    return out


def mutated_code(source: str, filename: str, change: Change, position: int) -> CodeType:
    """The module's code with one change applied to the node at `position` of `ast.walk`."""
    tree = ast.parse(source)
    for i, node in enumerate(ast.walk(tree)):
        if i == position:
            change(node)
            break
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


# ---------------------------------------------------------------------- the child side


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads one module from a given code object instead of its file."""

    def __init__(self, name: str, path: str, code: CodeType) -> None:
        self.name = name
        self.path = path
        self.code = code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)  # the point: the mutant's code, not the file's


def _module_name(relative: str) -> str:
    return relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


class _Collector:
    """pytest plugin of the coverage run: a coverage context and a duration per test."""

    def __init__(self, cov: Any) -> None:
        self.cov = cov
        self.durations: dict[str, float] = {}
        self.failed: list[str] = []

    def pytest_collectstart(self, collector: Any) -> None:
        # A test module's import runs code too (fixtures built at import): its own context.
        if type(collector).__name__ == "Module":
            self.cov.switch_context(f"import:{collector.nodeid}")

    def pytest_runtest_setup(self, item: Any) -> None:
        self.cov.switch_context(item.nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            self.failed.append(report.nodeid)


def _pytest_args(extra: Sequence[str]) -> list[str]:
    return [
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "--rootdir",
        str(ROOT),
        "-W",
        "ignore",
        *extra,
    ]


def _coverage_child(target: str, tests: Sequence[str], out: Path) -> None:
    import coverage
    import pytest

    path = str(ROOT / target)
    cov = coverage.Coverage(include=[path], data_file=None, branch=False)
    collector = _Collector(cov)
    cov.start()
    sweeps = () if target in SWEEP_TARGETS else SWEEPS
    deselect = [arg for nodeid in sweeps for arg in ("--deselect", nodeid)]
    code = pytest.main(_pytest_args([*deselect, *tests]), plugins=[collector])
    cov.stop()
    data = cov.get_data()
    contexts = data.contexts_by_lineno(path)
    out.write_text(
        json.dumps(
            {
                "exit": int(code),
                "failed": collector.failed,
                "durations": collector.durations,
                "lines": {str(k): sorted(v) for k, v in contexts.items()},
            }
        )
    )


def _mutant_child(target: str, code: CodeType, nodeids: Sequence[str], timeout: float) -> int:
    import pytest

    sys.meta_path.insert(0, _MutantFinder(_module_name(target), str(ROOT / target), code))
    return int(pytest.main(_pytest_args(["-x", f"--timeout={timeout:.0f}", *nodeids])))


def _fork(work: Callable[[], int | None], log: Path) -> int:
    """Start `work` in a forked child in its own process group, its output to `log`; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.setpgrp()  # its own group: a timeout kills what it started too
            result = work()
            code = 0 if result is None else result
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _reap(pid: int, deadline: float) -> str | None:
    """A child's end ("exit N" | "timeout", killing it and its group), or None while it runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        return f"exit {os.waitstatus_to_exitcode(status)}"
    if time.monotonic() > deadline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout"
    return None


def _in_child(work: Callable[[], int | None], *, limit: float, log: Path) -> tuple[str, float]:
    """Run `work` in a forked child; ("exit N" | "timeout", seconds)."""
    start = time.monotonic()
    pid = _fork(work, log)
    while (outcome := _reap(pid, start + limit)) is None:
        select.select([], [], [], 0.05)
    return outcome, time.monotonic() - start


# ---------------------------------------------------------------------- the campaign


@dataclass(slots=True)
class Score:
    """What became of one module's mutants."""

    target: str
    killed: int = 0
    timed_out: int = 0
    timeouts: list[dict[str, Any]] = field(default_factory=list)  # this run's, to check
    survived: list[dict[str, Any]] = field(default_factory=list)
    uncovered: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.killed + self.timed_out + len(self.survived) + len(self.uncovered)

    @property
    def caught(self) -> int:
        return self.killed + self.timed_out

    @property
    def percent(self) -> float:
        return 100.0 * self.caught / self.total if self.total else 100.0


LAYERS = ("records", "metadata_log", "replay", "api")
"""The project's packages, lowest first: a package imports only those before it."""


def _prepare_parent(targets: Sequence[str]) -> None:
    """Import what no mutant changes once, so each forked child starts warm.

    The third-party libraries, and the project's layers below the lowest target (imports run
    one way, so those never import a target).
    """
    for name in (
        "pytest", "hypothesis", "pytest_asyncio", "pytest_timeout", "fastavro", "cramjam",
        "immutables", "sqlalchemy", "alembic", "kio", "asyncio", "coverage",
    ):  # fmt: skip
        with contextlib.suppress(ImportError):  # optional ones
            importlib.import_module(name)
    lowest = min(LAYERS.index(t.split("/")[0]) for t in targets)
    for layer in LAYERS[:lowest]:
        for path in sorted((ROOT / layer).glob("*.py")):
            importlib.import_module(_module_name(str(path.relative_to(ROOT))))
    for name in list(sys.modules):
        if name.split(".")[0] in LAYERS[lowest:]:
            raise SystemExit(f"the runner imported project module {name} before forking")


def _tests_for(mutant: Mutant, contexts: Sequence[str], tests: Collection[str]) -> set[str]:
    """The tests a mutant can change: those that run its line, and every test where it runs early.

    Module-level code runs once, at the module's import, and every test may use what it made.
    So may a line run while a test module was imported: the first test module that imports the
    project builds its module-level objects (`DEFAULT_CODEC`, its compiled encoders), and every
    later test module shares them.
    """
    if not contexts:
        return set()
    if mutant.module_level or any(c == "" or c.startswith("import:") for c in contexts):
        return set(tests)
    return set(contexts)


def _entry(mutant: Mutant) -> dict[str, Any]:
    return {
        "line": mutant.line,
        "operator": mutant.operator,
        "mutation": mutant.description,
        "source": mutant.source_line,
    }


def _survivor_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """A mutant in a report: its line, operator, mutation and source (several may share one)."""
    return (entry["line"], entry["operator"], entry["mutation"], entry["source"])


def _previous_survivors(
    target: str, report: Path, source: str
) -> tuple[Score, Counter[tuple[Any, ...]]]:
    """The last full run's score of `target` with its survivors taken out, and their keys.

    `--again` runs only those survivors (after tests were added); the module must be unchanged
    since, or the mutants would not be the same.
    """
    path = report / (target.replace("/", "__") + ".json")
    if not path.exists():
        raise SystemExit(f"{target}: no earlier report in {report}; run it without --again first")
    earlier = json.loads(path.read_text())
    survivors = (*earlier["survived"], *earlier["uncovered"])
    lines = source.splitlines()
    sha = earlier.get("source_sha256")  # reports before it: the survivors' lines must match
    if (sha is not None and sha != hashlib.sha256(source.encode()).hexdigest()) or any(
        e["line"] > len(lines) or lines[e["line"] - 1].strip() != e["source"] for e in survivors
    ):
        raise SystemExit(f"{target} changed since its last run; run it without --again")
    score = Score(target=target, killed=earlier["killed"], timed_out=earlier["timed_out"])
    return score, Counter(_survivor_key(e) for e in survivors)


def changed_lines(target: str, since: str) -> set[int]:
    """The lines of `target` as it is now that were added or changed since commit `since`."""
    diff = subprocess.run(
        ["git", "diff", "--unified=0", "--no-color", "--no-ext-diff", since, "--", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines: set[int] = set()
    for match in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.MULTILINE):
        start, count = int(match[1]), int(match[2] if match[2] is not None else 1)
        lines.update(range(start, start + count))  # a count of 0: lines only removed
    return lines


def _progress(path: Path, digest: str, *, again: bool, since: str | None) -> dict[int, Any]:
    """The verdicts a cut-short run of the same module, tests, runner and mode left, by mutant.

    The file's first line says what it was run on; a file of another run is started afresh.
    A last line cut mid-write (the run killed while appending) is dropped.
    """
    header = {"digest": digest, "again": again, "since": since}
    if path.exists():
        lines = path.read_text().splitlines()
        with contextlib.suppress(ValueError, IndexError):
            if json.loads(lines[0]) == header:
                done: dict[int, Any] = {}
                for line in lines[1:]:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        break
                    done[record["n"]] = record
                print(f"  resuming: {len(done)} mutants judged by an earlier run", flush=True)
                return done
    path.write_text(json.dumps(header) + "\n")
    return {}


def _count(score: Score, verdict: str, entry: dict[str, Any]) -> None:
    if verdict == "killed":
        score.killed += 1
    elif verdict == "timed_out":
        score.timed_out += 1
        score.timeouts.append(entry)
    elif verdict == "survived":
        score.survived.append(entry)
    else:
        score.uncovered.append(entry)


def _plan(
    target: str,
    source: str,
    made: tuple[Mutant, Change, int],
    *,
    by_line: dict[int, list[str]],
    durations: dict[str, float],
) -> tuple[Callable[[], int], float] | None:
    """What a mutant's child runs (its tests against it) and its hard limit; None if uncovered."""
    mutant, change, position = made
    contexts = sorted(
        {c for n in range(mutant.line, mutant.last_line + 1) for c in by_line.get(n, [])}
    )
    nodeids = sorted(_tests_for(mutant, contexts, durations), key=lambda t: durations.get(t, 0.0))
    if not nodeids:
        return None
    code = mutated_code(source, str(ROOT / target), change, position)
    budget = sum(durations.get(t, 1.0) for t in nodeids)
    per_test = max(10.0, 5 * max(durations.get(t, 1.0) for t in nodeids))
    return lambda: _mutant_child(target, code, nodeids, per_test), max(30.0, 3 * budget + 20)


def _verdict(outcome: str, entry: dict[str, Any]) -> str:
    """A child's end as a verdict: "killed", "timed_out" or "survived".

    An unusual end (nothing ran, or the child died of a signal) is noted in `entry`.
    """
    if outcome == "timeout":
        return "timed_out"
    if outcome == "exit 0":
        return "survived"
    if outcome in ("exit 1", "exit 2", "exit 3", "exit 4"):
        # Tests failed, or the mutant broke their collection (an import-time error makes
        # pytest find no test of a node id the unmutated run had: exit 4).
        return "killed"
    entry["outcome"] = outcome
    if outcome == "exit 5":  # nothing ran: the runner's fault, never the mutant's credit
        return "survived"
    return "killed"  # the child crashed (a signal): the mutant broke it, so it is caught


def run_target(
    target: str,
    report: Path,
    *,
    log_dir: Path,
    again: bool = False,
    since: str | None = None,
    jobs: int = 1,
) -> Score:
    """Mutate one module; the score, with every survivor.

    With `again`, only the survivors of the module's last report run; the others keep their
    verdict (the tests only grew since). With `since`, only the mutants of lines changed since
    that commit are made (and the report says so). `jobs` mutants run at once.
    """
    tests = TARGETS[target]
    source = (ROOT / target).read_text()
    score = Score(target=target)
    only: Counter[tuple[Any, ...]] | None = None
    if again:
        score, only = _previous_survivors(target, report, source)
    started = time.monotonic()
    # The coverage run is kept beside the report while the module and its tests are unchanged.
    digest = hashlib.sha256()
    for path in (target, *tests, "tests/mutate.py"):
        digest.update((ROOT / path).read_bytes())
    report.mkdir(parents=True, exist_ok=True)
    coverage_file = report / (target.replace("/", "__") + f".coverage-{digest.hexdigest()[:16]}")
    outcome, seconds = "kept", 0.0
    if not coverage_file.exists():
        outcome, seconds = _in_child(
            lambda: _coverage_child(target, tests, coverage_file),
            limit=3600,
            log=log_dir / "coverage.log",
        )
    measured = json.loads(coverage_file.read_text()) if coverage_file.exists() else None
    if measured is None or measured["exit"] != 0:
        coverage_file.unlink(missing_ok=True)
        # The scratch directory goes with the run: keep the log where the report is.
        kept = report / (target.replace("/", "__") + ".coverage.log")
        shutil.copyfile(log_dir / "coverage.log", kept)
        status = outcome if measured is None else f"pytest exit {measured['exit']}"
        raise SystemExit(f"{target}: its tests do not pass unmutated ({status}); see {kept}")
    progress_file = report / (target.replace("/", "__") + ".progress.jsonl")
    done = _progress(progress_file, digest.hexdigest(), again=again, since=since)
    durations: dict[str, float] = measured["durations"]
    by_line: dict[int, list[str]] = {int(k): v for k, v in measured["lines"].items()}
    mutants = enumerate_mutants(source)
    if since is not None:
        changed = changed_lines(target, since)
        mutants = [
            m for m in mutants if not changed.isdisjoint(range(m[0].line, m[0].last_line + 1))
        ]
    if only is not None:
        # Mutants sharing a survivor's key all run again; those of them the last run caught
        # leave its count (they are counted afresh below).
        sharing = Counter(k for m, _, _ in mutants if (k := _survivor_key(_entry(m))) in only)
        score.killed -= sum(sharing[k] - only[k] for k in sharing)
    print(
        f"{target}: {len(mutants)} mutants, {len(durations)} tests ({seconds:.0f} s unmutated)",
        flush=True,
    )
    judged = 0

    def record(n: int, verdict: str, entry: dict[str, Any]) -> None:
        nonlocal judged
        _count(score, verdict, entry)
        with progress_file.open("a") as out:
            out.write(json.dumps({"n": n, "verdict": verdict, "entry": entry}) + "\n")
        judged += 1
        if judged % 50 == 0:
            print(f"  {judged} judged: {score.percent:.1f}% caught so far", flush=True)

    # Up to `jobs` mutants at once, each in its own child (and log); verdicts as they end.
    running: dict[int, tuple[int, dict[str, Any], float, Path]] = {}
    free_logs = [log_dir / f"mutant-{k}.log" for k in range(jobs)]
    queue = iter(enumerate(mutants, 1))
    exhausted = False
    try:
        while not exhausted or running:
            while not exhausted and len(running) < jobs:
                item = next(queue, None)
                if item is None:
                    exhausted = True
                    break
                n, (mutant, change, position) = item
                entry = _entry(mutant)
                if only is not None and _survivor_key(entry) not in only:
                    continue
                if n in done:  # an earlier, cut-short run judged it
                    _count(score, done[n]["verdict"], done[n]["entry"])
                    continue
                plan = _plan(
                    target, source, (mutant, change, position), by_line=by_line, durations=durations
                )
                if plan is None:
                    record(n, "uncovered", entry)
                    continue
                work, limit = plan
                log = free_logs.pop()
                running[_fork(work, log)] = (n, entry, time.monotonic() + limit, log)
            for pid, (n, entry, deadline, log) in list(running.items()):
                ended = _reap(pid, deadline)
                if ended is not None:
                    del running[pid]
                    free_logs.append(log)
                    record(n, _verdict(ended, entry), entry)
            if running:
                select.select([], [], [], 0.05)
    finally:  # cut short (Ctrl-C, an error): the children in their own groups go too
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    score.survived.sort(key=lambda e: e["line"])
    score.uncovered.sort(key=lambda e: e["line"])
    score.seconds = time.monotonic() - started
    (report / (target.replace("/", "__") + ".json")).write_text(
        json.dumps(
            {
                "target": target,
                "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
                "since": since,
                "tests": list(tests),
                "total": score.total,
                "killed": score.killed,
                "timed_out": score.timed_out,
                "timed_out_mutants": sorted(score.timeouts, key=lambda e: e["line"]),
                "survived": score.survived,
                "uncovered": score.uncovered,
                "percent": round(score.percent, 1),
                "seconds": round(score.seconds),
            },
            indent=1,
        )
    )
    progress_file.unlink(missing_ok=True)
    return score


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="files of TARGETS (default: all)")
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument("--report", type=Path, default=ROOT / ".mutation")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--again",
        action="store_true",
        help="run only the survivors of each module's last report (after adding tests)",
    )
    parser.add_argument(
        "--since",
        metavar="COMMIT",
        help="only the mutants of lines added or changed since COMMIT (git diff)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="mutants run at once, each in its own child (default 1; at most one per core)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= (os.cpu_count() or 1):
        parser.error(f"--jobs must be 1 to {os.cpu_count() or 1} (this machine's cores)")
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"not in TARGETS: {', '.join(unknown)} (known: {', '.join(TARGETS)})")
    modules = args.modules or list(TARGETS)
    if args.list:
        for target in modules:
            changed = changed_lines(target, args.since) if args.since else None
            for mutant, _, _ in enumerate_mutants((ROOT / target).read_text()):
                if changed is not None and changed.isdisjoint(
                    range(mutant.line, mutant.last_line + 1)
                ):
                    continue
                print(f"{target}:{mutant.line}: {mutant.operator}: {mutant.description}")
        return 0
    os.chdir(ROOT)
    # This checkout's project, not the one an editable install (or `python tests/mutate.py`'s
    # sys.path[0], tests/) finds: with a venv shared between git worktrees, the other
    # worktree's modules were imported and coverage saw no line of the target (all uncovered).
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="mutate-hypothesis-")
    os.environ.setdefault("MLOG_SIM_SEEDS", SIM_SEEDS)
    _prepare_parent(modules)
    scores = []
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        for target in modules:
            scores.append(
                run_target(
                    target,
                    args.report,
                    log_dir=Path(scratch),
                    again=args.again,
                    since=args.since,
                    jobs=args.jobs,
                )
            )
    print()
    print(f"{'module':<32}{'mutants':>8}{'caught':>8}{'timeout':>8}{'survived':>9}{'uncov.':>7}"
          f"{'score':>8}")  # fmt: skip
    for s in scores:
        print(
            f"{s.target:<32}{s.total:>8}{s.caught:>8}{s.timed_out:>8}{len(s.survived):>9}"
            f"{len(s.uncovered):>7}{s.percent:>7.1f}%"
        )
    if args.since:
        print(f"only the mutants of lines changed since {args.since}")
    print(f"survivors: {args.report}/<module>.json")
    return 0 if all(s.percent >= args.min_score for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
