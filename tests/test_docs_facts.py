"""The docs' checkable facts hold: the paths, modules and commands they name, and their counts.

The docs are README.md, docs/*.md and tools/mutate/README.md. Checked:

- every repository path they name (in prose, in backticks, in code blocks, as a relative link)
  exists: `api/server/server.py`, `tests/system/`, `[security.md](security.md#...)`;
- every dotted module name in backticks (`replay.delta.topics`, `records.slots.preset_constructor`)
  is a module, or a name a module defines at its top;
- every `mlog NOUN VERB` in backticks or code blocks is a command of the CLI's parser;
- the `tests/` tree drawn in docs/testing.md is the tests' directories;
- docs/audit.md's table of the audit columns is the data source's schema
  (`replay.audit.columns.COLUMNS`): every column, with its type;
- no doc quotes a count of tests (it goes stale with the next test: `pytest --collect-only -q`
  counts them), and a module's "over ~N lines" says its length within a quarter.

Each check reads a tree given as its root, so the unit tests below plant a wrong fact in a
copy and see it reported.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.source_tree import PRODUCT, top_level_names

TOP = (*PRODUCT, "tools", "bench", "tests", "docs", "examples", ".ci")
"""The repository's top-level directories a doc may name a path under."""

ROOT_FILES = ("README.md", "Makefile", "pyproject.toml", "setup.py")

_PATH = re.compile(
    r"(?<![\w/.~-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*)"
    r"|(?<![\w/.-])(" + "|".join(re.escape(f) for f in ROOT_FILES) + r")(?![\w.-])"
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_DOTTED = re.compile(r"^(?:" + "|".join((*PRODUCT, "tools", "tests")) + r")(?:\.[A-Za-z_]\w*)+$")
_MLOG = re.compile(r"(?:^|[\s`(])mlog ((?:\S+ ?){1,6})")
_TEST_COUNT = re.compile(r"\b\d[\d,]* (?:unit )?tests\b")
_LINES_CLAIM = re.compile(r"over ~([\d,]+) lines")
PLACEHOLDER = re.compile(r"[<>{}*]|\.\.\.")
UNITS = frozenset({"records/s"})
"""Rates that read as paths."""

LEFT_TO_THEIR_OWNERS: frozenset[str] = frozenset()
"""Wrong facts known and owned elsewhere; each must still be wrong (else remove it here)."""


def documents(root: Path) -> list[Path]:
    """The docs of the tree at `root`."""
    found = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    mutate = root / "tools" / "mutate" / "README.md"
    return found + ([mutate] if mutate.exists() else [])


def _code(text: str) -> Iterator[str]:
    """The text of every code span and fenced block."""
    yield from (m.group(1) for m in _FENCE.finditer(text))
    yield from (m.group(1) for m in _CODE_SPAN.finditer(_FENCE.sub("", text)))


def path_problems(root: Path, doc: Path) -> list[str]:
    """Repository paths and relative links of `doc` that name nothing in the tree."""
    text = doc.read_text()
    where = doc.relative_to(root)
    problems = []
    for match in _PATH.finditer(text):
        name = (match.group(1) or match.group(2)).rstrip(".,;:")
        name = re.sub(r"(::\w+|:\d+)$", "", name)
        after = text[match.end() : match.end() + 1]
        if PLACEHOLDER.search(name + after) or name in UNITS:
            continue
        if not (root / name).exists():
            problems.append(f"{where}: no {name}")
    for match in _LINK.finditer(text):
        target = match.group(1).split("#")[0]
        if not target or re.match(r"^[a-z]+:", target) or PLACEHOLDER.search(target):
            continue
        if not (doc.parent / target).exists():
            problems.append(f"{where}: the link to {target} leads nowhere")
    return problems


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".pyx")):
        if candidate.is_file():
            return candidate
    return None


def _defines(module: Path, name: str) -> bool:
    """Whether `module` defines or imports `name` at its top (a compiled module: by its text)."""
    if module.suffix != ".py":
        return re.search(rf"\b{re.escape(name)}\b", module.read_text()) is not None
    return name in top_level_names(module)


def module_problems(root: Path, doc: Path) -> list[str]:
    """Dotted names in backticks whose module, or whose name in it, does not exist."""
    problems = []
    for span in _code(doc.read_text()):
        for token in span.split():
            word = token.strip("(),:;'\"")
            if not _DOTTED.match(word):
                continue
            parts = word.split(".")
            # The longest prefix that is a module; what follows is a name in it (or a
            # class and its member: only the class is looked for).
            for cut in range(len(parts), 0, -1):
                module = _module_file(root, parts[:cut])
                if module is not None:
                    break
            if module is None or (cut < 2 and len(parts) > 2):
                problems.append(f"{doc.relative_to(root)}: no module {word}")
            elif cut < len(parts) and not _defines(module, parts[cut]):
                problems.append(
                    f"{doc.relative_to(root)}: {module.relative_to(root)} has no {parts[cut]}"
                )
    return problems


@functools.cache
def _valid_command(noun: str, verb: str | None) -> bool:
    """Whether `mlog NOUN VERB --help` is accepted by the CLI's parser."""
    from api.cli.main import build_parser

    argv = [noun, *([verb] if verb else []), "--help"]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            build_parser(only=noun).parse_args(argv)
        except SystemExit as exit:
            return exit.code in (0, None)
    return True


def command_problems(root: Path, doc: Path) -> list[str]:
    """`mlog NOUN VERB` quoted in code that the CLI does not have."""
    from api.cli.main import NOUNS

    nouns = {noun for noun, _ in NOUNS}
    problems = []
    seen: set[tuple[str, str | None]] = set()
    for block in _code(doc.read_text()):
        for match in _MLOG.finditer(block):
            words = [w.strip("`,;)") for w in match.group(1).split()]
            # Global options first: `--output json`, `--data-dir D`, `--debug`.
            while words and words[0].startswith("-"):
                flag = words.pop(0)
                valued = "=" not in flag and flag not in ("--debug", "--help", "--version")
                if valued and words and words[0] not in nouns:
                    words.pop(0)
            if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]):
                continue  # a placeholder (`mlog <noun> <verb>`), or `mlog` alone
            noun = words[0]
            verb = words[1] if len(words) > 1 and re.fullmatch(r"[a-z][a-z-]*", words[1]) else None
            if (noun, verb) in seen:
                continue
            seen.add((noun, verb))
            if noun not in nouns:
                problems.append(f"{doc.relative_to(root)}: no command `mlog {noun}`")
            elif not _valid_command(noun, verb):
                problems.append(f"{doc.relative_to(root)}: no command `mlog {noun} {verb}`")
    return problems


def count_problems(root: Path, doc: Path) -> list[str]:
    """Counts of tests quoted in a doc (they go stale; say how to count instead)."""
    return [
        f"{doc.relative_to(root)}: quotes a test count ({m.group(0)}); "
        "say how to count (pytest --collect-only -q) instead"
        for m in _TEST_COUNT.finditer(doc.read_text())
    ]


def tree_problems(root: Path, doc: Path) -> list[str]:
    """Directories of a drawn `tests/` tree (a code block starting `tests/`) that do not exist."""
    problems = []
    for block in _FENCE.finditer(doc.read_text()):
        lines = block.group(1).splitlines()
        if not lines or lines[0].strip() != "tests/":
            continue
        stack: list[tuple[int, str]] = [(-1, "tests")]
        for line in lines[1:]:
            entry = line.strip().split()[0] if line.strip() else ""
            if not entry or entry.startswith("("):
                continue
            indent = len(line) - len(line.lstrip())
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if not stack:
                continue  # a comment's continuation line, deeper than any entry
            name = f"{stack[-1][1]}/{entry.rstrip('/')}"
            if not (root / name).exists():
                problems.append(f"{doc.relative_to(root)}: the tests tree names {name}/")
            if entry.endswith("/"):
                stack.append((indent, name))
    drawn = _drawn_directories(doc.read_text())
    if drawn is not None:
        for folder in sorted((root / "tests").iterdir()):
            package = folder.is_dir() and (folder / "__init__.py").exists()
            if package and f"tests/{folder.name}" not in drawn:
                problems.append(
                    f"{doc.relative_to(root)}: the tests tree leaves out {folder.name}/"
                )
    return problems


def _drawn_directories(text: str) -> set[str] | None:
    """The top-level directories of the drawn tests tree, if the doc draws one."""
    for block in _FENCE.finditer(text):
        lines = block.group(1).splitlines()
        if lines and lines[0].strip() == "tests/":
            return {
                "tests/" + line.split()[0].rstrip("/")
                for line in lines[1:]
                if line.startswith("  ")
                and not line.startswith("   ")
                and line.split()[0].endswith("/")
            }
    return None


def docstring_problems(root: Path) -> list[str]:
    """Modules whose "over ~N lines" is off their length by more than a quarter."""
    problems = []
    for folder in (*PRODUCT, "tools", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text()
            for match in _LINES_CLAIM.finditer(text):
                claimed = int(match.group(1).replace(",", ""))
                actual = text.count("\n")
                if not 0.75 * actual <= claimed <= 1.25 * actual:
                    problems.append(
                        f"{path.relative_to(root)}: says over ~{claimed} lines, has {actual}"
                    )
    return problems


_SCHEMA_ROW = re.compile(r"^\| (`[^|]+`) \| ([^|]+) \|", re.MULTILINE)


def audit_schema_problems(root: Path) -> list[str]:
    """Where docs/audit.md's column table is not the audit source's schema (names, types)."""
    from replay.audit.columns import COLUMNS

    text = (root / "docs" / "audit.md").read_text()
    table = text.split("| column | type | from |", 1)[1].split("\n\n", 1)[0]
    documented: list[tuple[str, str]] = []
    for names, types in _SCHEMA_ROW.findall(table):
        columns = [n.strip().strip("`") for n in names.split(",")]
        kinds = [t.strip().replace("&lt;", "<").replace("&gt;", ">") for t in types.split(",")]
        if len(kinds) == 1:
            kinds *= len(columns)
        if len(kinds) != len(columns):
            return [f"docs/audit.md: the row of {names} gives {len(kinds)} types"]
        documented += zip(columns, kinds, strict=True)
    actual = [(name, ddl.lower()) for name, _, ddl in COLUMNS]
    problems = [
        f"docs/audit.md: the audit table has no column {name}"
        for name, _ in documented
        if name not in dict(actual)
    ]
    problems += [
        f"docs/audit.md: the audit column {name} ({kind}) is not in its schema table"
        for name, kind in actual
        if name not in dict(documented)
    ]
    problems += [
        f"docs/audit.md: the audit column {name} is {kind}, the table says {dict(documented)[name]}"
        for name, kind in actual
        if name in dict(documented) and dict(documented)[name] != kind
    ]
    return problems


def all_problems(root: Path) -> list[str]:
    """Every wrong fact of the tree at `root`."""
    problems = docstring_problems(root) + audit_schema_problems(root)
    for doc in documents(root):
        for check in (path_problems, module_problems, command_problems, count_problems):
            problems += check(root, doc)
    problems += tree_problems(root, root / "docs" / "testing.md")
    return problems


# ----------------------------------------------------------------------------- the docs


def test_every_fact_the_docs_state_holds() -> None:
    problems = all_problems(REPO)
    wrong = [p for p in problems if p not in LEFT_TO_THEIR_OWNERS]
    assert not wrong, "\n".join(wrong)
    fixed = LEFT_TO_THEIR_OWNERS - set(problems)
    assert not fixed, f"fixed since: remove them from LEFT_TO_THEIR_OWNERS: {sorted(fixed)}"


# ------------------------------------------------------------------------- the checker


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the docs beside the repository's code (linked, not copied)."""
    root = tmp_path / "repo"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name in ("docs", "README.md", ".git", ".venv", "tools", "bench"):
            continue
        (root / entry.name).symlink_to(entry)
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "README.md", root / "README.md")
    shutil.copytree(REPO / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "bench", root / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _plant(doc: Path, text: str) -> None:
    doc.write_text(doc.read_text() + "\n" + text + "\n")


def test_the_copy_is_as_right_as_the_repository(tree: Path) -> None:
    assert all_problems(tree) == all_problems(REPO)


@pytest.mark.parametrize(
    ("planted", "reported"),
    [
        ("See `api/server/nowhere.py`.", "no api/server/nowhere.py"),
        ("See tests/system/test_nothing_here.py for it.", "no tests/system/test_nothing_here.py"),
        ("[the gone page](gone.md)", "the link to gone.md leads nowhere"),
        ("The delta in `replay.delta.nowhere`.", "replay/delta/__init__.py has no nowhere"),
        ("The store in `replay.nowhere.store`.", "no module replay.nowhere.store"),
        ("Made by `records.slots.no_such_function`.", "has no no_such_function"),
        ("Run `mlog topics frobnicate`.", "no command `mlog topics frobnicate`"),
        ("Run `mlog --output json frobs list`.", "no command `mlog frobs`"),
        ("The suite has 4,164 tests.", "quotes a test count (4,164 tests)"),
    ],
)
def test_a_planted_wrong_fact_is_reported(tree: Path, planted: str, reported: str) -> None:
    before = all_problems(tree)
    _plant(tree / "docs" / "testing.md", planted)
    added = [p for p in all_problems(tree) if p not in before]
    assert len(added) == 1 and reported in added[0], added


def test_an_audit_column_left_out_of_its_table_is_reported(tree: Path) -> None:
    doc = tree / "docs" / "audit.md"
    text = doc.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `client_id`"))
    doc.write_text(text.replace(row + "\n", "", 1))
    assert audit_schema_problems(tree) == [
        f"docs/audit.md: the audit column {name} ({kind}) is not in its schema table"
        for name, kind in (("client_id", "string"), ("sequence", "bigint"), ("api_key", "int"))
    ]
    doc.write_text(text.replace("| `iterations` | int |", "| `iterations` | bigint |", 1))
    assert audit_schema_problems(tree) == [
        "docs/audit.md: the audit column iterations is int, the table says bigint"
    ]


def test_a_tests_tree_naming_a_gone_directory_is_reported(tree: Path) -> None:
    doc = tree / "docs" / "testing.md"
    doc.write_text(doc.read_text().replace("  records/ ", "  recordz/ ", 1))
    problems = tree_problems(tree, doc)
    assert any("names tests/recordz/" in p for p in problems), problems
    assert any("leaves out records/" in p for p in problems), problems


def test_a_wrong_line_count_in_a_docstring_is_reported(tree: Path) -> None:
    planted = tree / "bench" / "planted.py"
    planted.write_text('"""A module.\n\nOne concern over ~900 lines: planted.\n"""\n')
    added = set(docstring_problems(tree)) - set(docstring_problems(REPO))
    assert added == {"bench/planted.py: says over ~900 lines, has 4"}
