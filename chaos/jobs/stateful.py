"""Whether a job keeps state in its query, read from its code, so a campaign plans the state store's window early.

A job as written may or may not keep state (a streaming aggregation, a deduplication, a stream-stream join,
``transformWithState``...): the harness learns it for sure only from a trial's checkpoint (``state/``). A campaign
of three trials cannot wait for that, so the module is read (not run) for the operators that make Spark keep
state. Calls inside a function handed to ``foreachBatch`` (and the module's functions it calls) run on a static
micro-batch and keep none, so they do not count; a ``join`` counts only in a module that opens two streams (a
stream-static join keeps none). The reading is a guess either way (a ``groupBy`` on a static frame counts, an
aggregation in SQL text does not): a wrong guess only reorders the first trials, and what it misses is learned from
the checkpoint (one trial more, chaos.campaign.runner).
"""

from __future__ import annotations

import ast
from pathlib import Path

# Operators that keep state whenever they run on a stream.
STATE_CALLS = frozenset({
    "dropDuplicates", "drop_duplicates", "distinct", "dropDuplicatesWithinWatermark", "transformWithState",
    "transformWithStateInPandas", "applyInPandasWithState", "flatMapGroupsWithState", "mapGroupsWithState",
})
GROUPINGS = frozenset({"groupBy", "groupby", "rollup", "cube", "groupingSets"})
STREAM_OPENERS = frozenset({"readStream"})


def stateful_operators(source: Path) -> list[str]:
    """``name (file:line)`` of each stateful operator the module at ``source`` applies outside its foreachBatch
    functions (and the module's functions they call); [] when it shows none (or cannot be read)."""
    try:
        tree = ast.parse(source.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    skipped: set[int] = set()
    todo = list(_foreach_batch_functions(tree, skipped))
    seen: set[str] = set()
    while todo:  # a foreachBatch function, and what it calls of the module's own, run on a static micro-batch
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        skipped |= {id(n) for n in ast.walk(functions[name])}
        todo += [_name(n) for n in ast.walk(functions[name]) if isinstance(n, ast.Call)]
    streams = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in STREAM_OPENERS)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in skipped or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name in STATE_CALLS or name in GROUPINGS or (name == "join" and streams >= 2 and _joins_frames(node)):
            found.append(f"{name} ({source.name}:{node.lineno})")
    return sorted(set(found), key=lambda s: int(s.rsplit(":", 1)[1].rstrip(")")))


def _name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _joins_frames(call: ast.Call) -> bool:
    """A DataFrame join (``a.join(b, ...)``), not ``",".join(...)`` nor ``os.path.join(...)``."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Constant) or (isinstance(receiver, ast.Attribute) and receiver.attr == "path"):
        return False
    return bool(call.args) and not isinstance(call.args[0], ast.Constant | ast.JoinedStr)


def _foreach_batch_functions(tree: ast.AST, skipped: set[int]) -> set[str]:
    """Names handed to ``foreachBatch(...)`` (a name, ``self.name``, ``functools.partial(name, ...)``); a lambda
    handed over in place is added to ``skipped``."""
    names = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node) == "foreachBatch"):
            continue
        for arg in node.args:
            if isinstance(arg, ast.Call) and _name(arg) == "partial" and arg.args:
                arg = arg.args[0]
            if isinstance(arg, ast.Name):
                names.add(arg.id)
            elif isinstance(arg, ast.Attribute):
                names.add(arg.attr)
            skipped |= {id(n) for n in ast.walk(arg)}
    return names
