"""The payload schema a job declares in its own code, so ``--schema`` may be left out.

Jobs name their payload once: a ``StructType([...])`` (or a DDL string) handed to ``from_json(col, schema)``
(``from_csv``) or to a file source's ``.schema(...)``. The module is read, not run (running it would start its
query): the schema expression is found by name (an assignment in the module or in the function that uses it) and
evaluated with Spark's type constructors only and no builtins, so nothing else of the job executes. What it cannot
evaluate (a schema built in a loop, read from a file) is not guessed: ``--schema`` stays the way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Declared:
    ddl: str
    where: str  # file:line of the call that uses it


def declared_schema(source: Path) -> Declared | None:
    """The first schema the module at ``source`` hands to ``from_json``, ``from_csv`` or a streaming reader's
    ``.schema(...)``, as DDL."""
    try:
        text = source.read_text(errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    namespace = _type_names(tree)
    assigned = assignments(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("from_json", "from_csv") and len(node.args) >= 2:
            given = node.args[1]
        elif name in ("from_json", "from_csv") and (kw := next((k for k in node.keywords if k.arg == "schema"), None)):
            given = kw.value
        elif name == "schema" and isinstance(node.func, ast.Attribute) and len(node.args) == 1 \
                and _on_read_stream(node.func.value):
            given = node.args[0]
        else:
            continue
        ddl = _evaluate(given, assigned, namespace)
        if ddl:
            return Declared(ddl, f"{source.name}:{node.lineno}")
    return None


def _on_read_stream(node: ast.expr) -> bool:
    """Whether a call's receiver is a streaming reader (``spark.readStream.format("json")``), not a batch read of
    a lookup table."""
    while isinstance(node, ast.Attribute | ast.Call):
        if isinstance(node, ast.Attribute) and node.attr == "readStream":
            return True
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return False


def _type_names(tree: ast.Module) -> dict:
    """Spark's type classes under the names the module imports them by (``StructType``, ``T.StructType``)."""
    import pyspark.sql.types as types

    names: dict = {name: getattr(types, name) for name in types.__all__}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "pyspark.sql.types":
                    names[alias.asname or "pyspark"] = types if alias.asname else _Chain(types)
        elif isinstance(node, ast.ImportFrom) and node.module == "pyspark.sql" and \
                any(a.name == "types" for a in node.names):
            alias = next(a for a in node.names if a.name == "types")
            names[alias.asname or "types"] = types
    return names


class _Chain:
    """``pyspark.sql.types.StructType`` for a module that imports the package by its full name."""

    def __init__(self, types) -> None:
        self.sql = type("sql", (), {"types": types})


def assignments(tree: ast.Module) -> dict[str, ast.expr]:
    """Every ``NAME = expr`` in the module, its functions included (the last one of a name wins)."""
    found: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def _evaluate(node: ast.expr, assigned: dict[str, ast.expr], namespace: dict) -> str | None:
    """The schema an expression of the job's code stands for, as DDL, or None where it is not Spark's types."""
    from chaos.jobs.payloads import as_ddl

    try:
        value = literal_value(node, assigned, namespace, 0)
    except Exception:  # noqa: BLE001 - anything but Spark's types and literals is not evaluated: no schema found
        return None
    if isinstance(value, str):
        return value.strip() or None
    return as_ddl(value) if hasattr(value, "fields") else None


def literal_value(node: ast.expr, assigned: dict[str, ast.expr], namespace: dict, depth: int):
    """``node`` evaluated with Spark's types and the names it uses that the module assigns, no builtins."""
    if depth > 5:
        raise RecursionError("too deep")
    local = dict(namespace)
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id not in local and inner.id in assigned \
                and assigned[inner.id] is not node:
            local[inner.id] = literal_value(assigned[inner.id], assigned, namespace, depth + 1)
    code = compile(ast.Expression(node), "<schema>", "eval")
    return eval(code, {"__builtins__": {}, **local})  # noqa: S307 - Spark's types and the job's own literals only
