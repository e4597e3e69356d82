"""The product's modules and classes stay of a size one reader can hold (issue #55).

No product module over 800 lines (the compiled extensions' `.pyx` aside); a class over 500
lines says in its docstring why it stays one ("... lines ... because ..."): the rule the
consolidation set, checked so it holds.
"""

from __future__ import annotations

import ast
import re

from tests.support.paths import REPO
from tests.support.source_tree import PRODUCT, parsed, python_files, source

MODULE_LINES = 800
CLASS_LINES = 500
_REASON = re.compile(r"lines\b.*\bbecause\b", re.DOTALL)


def test_no_product_module_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in python_files(*PRODUCT)
        if (lines := source(path).count("\n")) > MODULE_LINES
    }
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def test_a_class_over_500_lines_says_why() -> None:
    unexplained = []
    for path in python_files(*PRODUCT):
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.ClassDef) or node.end_lineno is None:
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > CLASS_LINES and not _REASON.search(ast.get_docstring(node) or ""):
                unexplained.append(f"{path.relative_to(REPO)}:{node.name} ({lines} lines)")
    assert not unexplained, f"classes over {CLASS_LINES} lines with no reason given: {unexplained}"
