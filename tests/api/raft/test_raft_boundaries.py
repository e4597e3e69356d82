"""The Raft package's boundaries: only the core's facade outside it, no private names, no cycles.

Like the network rooms' import test (`test_network_imports.py`), these read the source (AST).
The core (`api/raft/core`) is used from outside only through the names its package exports
(`api.raft.core.__all__`: the `RaftCore` facade and the values that cross it), as etcd's
`RawNode` hides its `raft` struct: the machine behind the facade (machine.py) and the rules
that drive it are reached only by the core's own tests, through one helper
(`tests/support/raft_states.py`'s `machine`). Nobody reads the core's private names; the
server needs no private name of the raft package; the core does no I/O; and the core's
modules import each other one way (the handlers and the snapshot fetch used to import each
other in a circle).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO
from tests.support.source_tree import parsed, source

ROOT = REPO
CORE = ROOT / "api" / "raft" / "core"
RAFT = ROOT / "api" / "raft"
SOURCES = ("api", "metadata_log", "replay", "records", "migrations", "bench", "tools", "tests")
"""Where code that may use the core lives."""
MACHINE_DOOR = ROOT / "tests" / "support" / "raft_states.py"
"""The one module outside the core that reads the facade's `_machine` (for the core's tests)."""


def _tree(path: Path) -> ast.Module:
    return parsed(path)  # one parse per file for every static check of the run


_ATTRIBUTE = re.compile(r"\.[\s\\]*(_\w+)")
"""A private attribute as the source spells it (`x._y`, `x . _y`, `x.\\` newline `_y`)."""


def _may_reach(path: Path, names: set[str]) -> bool:
    """Whether `path`'s text imports from the core or reads one of `names` at all.

    Walking every tree of the repository costs seconds; a file whose text names neither
    cannot hold an import or attribute the walks below look for, so it is not walked.
    """
    text = source(path)
    return "api.raft.core" in text or not names.isdisjoint(_ATTRIBUTE.findall(text))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.Module) -> set[str]:
    """The private names a module defines: its functions and classes, names and fields."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if _private(name)}


def _core_private_names() -> set[str]:
    """Every private name the core defines: module names, class members, `self._x` fields."""
    return {name for path in CORE.glob("*.py") for name in _defined(_tree(path))}


def _outside(package: Path, sources: tuple[str, ...] = SOURCES) -> list[Path]:
    return [
        path
        for source in sources
        for path in sorted((ROOT / source).rglob("*.py"))
        if package not in path.parents and ".venv" not in path.parts
    ]


def test_the_core_defines_private_names_to_guard() -> None:
    names = _core_private_names()
    assert {"_pending", "_hw_change", "_machine"} <= names  # the check below has teeth


def test_no_module_outside_the_core_reads_its_private_names() -> None:
    private = _core_private_names()
    wrong: set[str] = set()
    for path in _outside(CORE):
        if not _may_reach(path, private):
            continue
        where = path.relative_to(ROOT)
        tree = _tree(path)
        # A field of the same name the module keeps itself is its own (`other._pending` of
        # its own class), not the core's.
        guarded = private - _defined(tree) - ({"_machine"} if path == MACHINE_DOOR else set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("api.raft.core"):
                wrong.update(
                    f"{where}:{node.lineno}: imports {a.name}"
                    for a in node.names
                    if _private(a.name)
                )
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in guarded
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                wrong.add(f"{where}:{node.lineno}: reads .{node.attr}")
    assert not wrong, sorted(wrong)


def _surface() -> frozenset[str]:
    """The names the core's package exports (`__all__` of `api/raft/core/__init__.py`)."""
    for node in _tree(CORE / "__init__.py").body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    raise AssertionError("api/raft/core/__init__.py exports no __all__")


def _reaches_inside(tree: ast.Module, surface: frozenset[str]) -> list[str]:
    """How `tree` uses the core beyond its surface: an internal name or module, the machine."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "api.raft.core" or node.module.startswith("api.raft.core."):
                found.extend(
                    f"{node.lineno}: imports {alias.name} from {node.module}"
                    for alias in node.names
                    if alias.name not in surface
                )
        elif isinstance(node, ast.Import):
            found.extend(
                f"{node.lineno}: imports {alias.name}"
                for alias in node.names
                if alias.name.startswith("api.raft.core.")
            )
        elif isinstance(node, ast.Attribute) and node.attr in ("_machine", "RaftMachine"):
            found.append(f"{node.lineno}: reads .{node.attr}")
    return found


def _tests_the_core(path: Path) -> bool:
    """Whether `path` is one of the core's own tests (or their helpers), which may look inside."""
    where = path.relative_to(ROOT)
    return (where.parent == Path("tests/api/raft") and where.name.startswith("test_raft_")) or (
        where.parent == Path("tests/support") and where.name.startswith("raft_")
    )


def test_the_surface_is_the_facade_and_values_never_the_machine() -> None:
    surface = _surface()
    assert {"RaftCore", "Ready", "ReadyDone", "QuorumState", "LogView"} <= surface
    assert "RaftMachine" not in surface
    assert surface.isdisjoint(path.stem for path in CORE.glob("*.py"))  # no internal module


def test_outside_the_core_only_its_surface_is_used() -> None:
    """The shell, the server, the CLI, the tools and the shell's tests use the facade alone."""
    surface = _surface()
    wrong = {
        f"{path.relative_to(ROOT)}:{what}"
        for path in _outside(CORE)
        if not _tests_the_core(path) and _may_reach(path, {"_machine", "RaftMachine"})
        for what in _reaches_inside(_tree(path), surface)
    }
    assert not wrong, sorted(wrong)


def test_a_shell_module_that_reaches_the_machine_is_caught() -> None:
    planted = ast.parse(
        "from api.raft.core.machine import RaftMachine\n"
        "from api.raft.core import handlers\n"
        "from api.raft.core.core import RaftCore\n"
        "import api.raft.core.timers\n"
        "node.core._machine.become_follower(3, 1)\n"
    )
    assert _reaches_inside(planted, _surface()) == [
        "1: imports RaftMachine from api.raft.core.machine",
        "2: imports handlers from api.raft.core",
        "4: imports api.raft.core.timers",
        "5: reads ._machine",
    ]
    assert not _tests_the_core(RAFT / "node.py")
    assert _tests_the_core(ROOT / "tests" / "api" / "raft" / "test_raft_handlers.py")
    assert not _tests_the_core(ROOT / "tests" / "api" / "raft" / "test_quorum_shell.py")


IO_MODULES = frozenset(
    {"os", "io", "pathlib", "shutil", "tempfile", "errno", "socket", "select", "asyncio"}
    | {"threading", "subprocess", "time", "metadata_log"}
)
"""What a sans-IO core never imports: files, sockets, threads, clocks, the log's storage."""


def test_the_core_does_no_io() -> None:
    """The shell does the I/O the core asks for (the quorum-state file included)."""
    wrong: set[str] = set()
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                modules = [node.module]
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "open":
                wrong.add(f"{path.name}:{node.lineno}: calls open()")
                continue
            else:
                continue
            wrong.update(
                f"{path.name}:{node.lineno}: imports {module}"
                for module in modules
                if module.split(".")[0] in IO_MODULES
            )
    assert not wrong, sorted(wrong)


def test_the_server_needs_no_private_name_of_the_raft_package() -> None:
    wrong = {
        f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}"
        for path in _outside(RAFT, tuple(source for source in SOURCES if source != "tests"))
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("api.raft")
        for alias in node.names
        if _private(alias.name)
    }
    assert not wrong, sorted(wrong)


def _runtime_imports(path: Path) -> set[str]:
    """The core modules `path` imports when it runs (not those only for type checking)."""
    found: set[str] = set()
    tree = _tree(path)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        if node.module == "api.raft.core":
            found.update(f"api.raft.core.{alias.name}" for alias in node.names)
        elif node.module.startswith("api.raft.core."):
            found.add(node.module)
    return {
        name.rsplit(".", 1)[1] for name in found if (CORE / f"{name.rsplit('.', 1)[1]}.py").exists()
    }


def test_the_core_modules_import_each_other_one_way() -> None:
    graph = {path.stem: _runtime_imports(path) - {path.stem} for path in CORE.glob("*.py")}
    graph.pop("__init__")
    for edges in graph.values():
        edges.discard("__init__")
    assert "snapshot_fetch" in graph["handlers"]  # the handlers start a snapshot transfer
    assert "handlers" not in graph["snapshot_fetch"]
    seen: set[str] = set()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in seen or module in done, f"import cycle: {' -> '.join(path)}"
        if module in done:
            return
        seen.add(module)
        for other in sorted(graph.get(module, ())):
            visit(other, (*path, other))
        done.add(module)

    for module in sorted(graph):
        visit(module, (module,))


def test_the_raft_package_reads_no_other_modules_private_names() -> None:
    """The shell uses the service's public API (it read `service._snapshots` before)."""
    wrong: set[str] = set()
    for path in sorted(RAFT.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                wrong.update(
                    f"{path.relative_to(ROOT)}:{node.lineno}: imports {alias.name}"
                    for alias in node.names
                    if _private(alias.name)
                )
            elif (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                wrong.add(f"{path.relative_to(ROOT)}:{node.lineno}: reads .{node.attr}")
    assert not wrong, sorted(wrong)
