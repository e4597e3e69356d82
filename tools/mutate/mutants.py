"""The mutants of a module: one AST change each (the operators), and the code with it in place."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType


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
    """Ids of the Expr nodes that are docstrings (module, class, function)."""
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
    """Ids of nodes never mutated: asserts, annotations, `TYPE_CHECKING` blocks, __slots__."""
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
    """Ids of module-level type aliases (`X = Callable[...]`, `Y = A | B`) that only annotate.

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
