"""The flow goes one way: the checker (``properties/``) judges a Pipeline it is given and never reaches up
into the catalogue or the CLI to find one."""

from __future__ import annotations

import ast
from pathlib import Path

PROPERTIES = Path(__file__).resolve().parent.parent / "properties"


def runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports outside ``if TYPE_CHECKING:`` blocks (functions' lazy imports included)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, "id", "") == "TYPE_CHECKING" for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_properties_import_neither_the_catalogue_nor_the_cli():
    for path in sorted(PROPERTIES.glob("*.py")):
        bad = {m for m in runtime_imports(path) if m.startswith(("pipelines_under_test", "chaos.cli"))}
        assert not bad, f"{path.name} imports {sorted(bad)} at run time"
