"""Whether a job keeps state in its query, read from its code, so a campaign plans the state store's window early.

A job as written may or may not keep state (a streaming aggregation, a deduplication, a stream-stream join,
``transformWithState``...): the harness learns it for sure only from a trial's checkpoint (``state/``). A campaign
of three trials cannot wait for that, so the module is read (not run) for the operators that make Spark keep
state. Calls inside a function handed to ``foreachBatch`` run on a static micro-batch and keep none, so they do
not count; a ``join`` counts only in a module that opens two streams (a stream-static join keeps none). What the
reading misses is learned from the checkpoint as before.
"""

from __future__ import annotations

import ast
from pathlib import Path

# Operators that keep state whenever they run on a stream.
STATE_CALLS = frozenset({
    "dropDuplicates", "drop_duplicates", "dropDuplicatesWithinWatermark", "transformWithState",
    "transformWithStateInPandas", "applyInPandasWithState", "flatMapGroupsWithState", "mapGroupsWithState",
})
GROUPINGS = frozenset({"groupBy", "groupby", "rollup", "cube", "groupingSets"})
STREAM_OPENERS = frozenset({"readStream"})


def stateful_operators(source: Path) -> list[str]:
    """``name (file:line)`` of each stateful operator the module at ``source`` applies outside its foreachBatch
    functions; [] when it shows none (or cannot be read)."""
    try:
        tree = ast.parse(source.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    batch_functions = _foreach_batch_functions(tree)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in batch_functions:
            skipped |= {id(n) for n in ast.walk(node)}
        elif isinstance(node, ast.Call) and _name(node) == "foreachBatch":
            for arg in node.args:  # a lambda handed over in place
                skipped |= {id(n) for n in ast.walk(arg)}
    streams = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in STREAM_OPENERS)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in skipped:
            continue
        name = _name(node)
        if name in STATE_CALLS or name in GROUPINGS or (name == "join" and streams >= 2 and node.args):
            found.append(f"{name} ({source.name}:{node.lineno})")
    return sorted(set(found), key=lambda s: int(s.rsplit(":", 1)[1].rstrip(")")))


def _name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _foreach_batch_functions(tree: ast.AST) -> set[str]:
    """Names handed to ``foreachBatch(...)`` (a name or ``self.name``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node) == "foreachBatch":
            for arg in node.args:
                if isinstance(arg, ast.Name):
                    names.add(arg.id)
                elif isinstance(arg, ast.Attribute):
                    names.add(arg.attr)
    return names
