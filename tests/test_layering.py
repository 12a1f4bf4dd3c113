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
        bad = {m for m in runtime_imports(path) if m.startswith(("pipelines_under_test", "chaos.cli.commands"))}
        assert not bad, f"{path.name} imports {sorted(bad)} at run time"


ROOT = PROPERTIES.parent
PACKAGES = ("chaos", "properties", "pipelines_under_test", "reports")


def module_graph() -> dict[str, set[str]]:
    """Each module of the harness's packages -> the modules of those packages it imports at run time
    (functions' deferred imports included: they are imports all the same, only later)."""
    paths = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            paths[name] = path
    graph = {}
    for name, path in paths.items():
        deps = set()
        for imported in runtime_imports(path):
            # ``from chaos.scenario.faults import X``: the module chaos.scenario.faults
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                deps.add(imported)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_of_the_harness_imports_itself_through_others():
    assert cycles(module_graph()) == []


def test_the_chaos_modules_the_checker_imports_never_import_the_checker():
    """properties/ sits above the low chaos/ modules it uses (specs, scenarios, stored files): none of them, nor
    what they import, reaches back up into properties/."""
    graph = module_graph()
    below = set()
    todo = [m for name, deps in graph.items() if name.startswith("properties") for m in deps
            if m.startswith("chaos")]
    while todo:
        name = todo.pop()
        if name not in below:
            below.add(name)
            todo += [m for m in graph[name] if m.startswith("chaos")]
    assert below, "the checker imports no chaos module: the test looks at the wrong tree"
    back = {name: sorted(m for m in graph[name] if m.startswith("properties")) for name in sorted(below)}
    assert {name: up for name, up in back.items() if up} == {}


def test_the_cluster_kinds_do_not_import_each_other():
    """Each kind builds on the capability interface (chaos/clusters/base.py) only; the registry names them by
    string, so none imports another."""
    graph = module_graph()
    kinds = {"chaos.clusters.standalone", "chaos.clusters.docker", "chaos.clusters.ssh"}
    for name, deps in graph.items():
        mine = next((k for k in kinds if name == k or name.startswith(k + ".")), None)
        if mine:
            others = {d for d in deps for k in kinds - {mine} if d == k or d.startswith(k + ".")}
            assert not others, f"{name} imports {sorted(others)}"


# Modules of chaos/ allowed past 500 lines, each because it does one job (the job named here).
ONE_JOB = {"commands.py": "the command line: each command's options, parsed into one call of the library"}


def test_no_chaos_module_is_long_unless_it_does_one_job():
    long = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "chaos").rglob("*.py")
            if len(p.read_text().splitlines()) > 500}
    assert set(long) <= set(ONE_JOB), long


# chaos/'s folders and root modules, lowest first: each imports only from itself and those before it, so the
# flow reads up the list (scenario, clusters, nemesis, stream, jobs, driver, run, campaign, cli) and nothing
# reaches back up it.
LAYERS = ("chaos.errors", "chaos.guarantees", "chaos.store", "chaos.machine", "chaos.scenario", "chaos.clusters",
          "chaos.nemesis", "chaos.stream", "chaos.jobs", "chaos.driver", "chaos.run", "chaos.campaign", "chaos.cli",
          "chaos.pytest_plugin", "chaos.__main__")


def layer(module: str) -> int | None:
    return next((i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")), None)


def test_no_import_runs_back_up_the_flow():
    graph = module_graph()
    assert {m for m in graph if m.startswith("chaos.") and layer(m) is None} == set(), "a chaos module in no layer"
    back = sorted(f"{m} -> {d}" for m, deps in graph.items() if layer(m) is not None
                  for d in deps if layer(d) is not None and layer(d) > layer(m))
    assert back == []


def test_chaos_keeps_at_most_a_dozen_modules_at_its_root():
    assert len(list((ROOT / "chaos").glob("*.py"))) <= 12


def test_only_the_cluster_kinds_ask_which_kind_a_cluster_is():
    """Every other place asks the kind's capability (chaos/clusters/base.py) instead."""
    import re

    asks = re.compile(r"cluster\.kind\s*(==|!=|in|not in)|isinstance\([^)]*Cluster|startswith\(\"(ssh|docker)")
    for path in sorted((ROOT / "chaos").rglob("*.py")):
        if "clusters" in path.relative_to(ROOT / "chaos").parts:
            continue
        assert not asks.search(path.read_text()), path
