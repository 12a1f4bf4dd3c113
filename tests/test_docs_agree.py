"""The docs agree with the product: the catalogue, the conformance table, the fault actions, the campaign's fault
kinds, every option of the commands and the plugin, and every example command line (it parses with its real flags,
every ``@file`` it names exists). No JVM."""

from __future__ import annotations

import ast
import inspect
import re
import shlex
import textwrap
from pathlib import Path

import pytest

from tests.test_readme import parse, shell_commands

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", *DOCS]


def read(page: str) -> str:
    return (REPO / page).read_text()


def every_command() -> list[tuple[str, str]]:
    return [(str(page.relative_to(REPO)), command) for page in PAGES
            for command in shell_commands(page.read_text())
            if command.startswith("streamchaos ") and "..." not in command]  # "..." marks an elided line


def test_the_pipeline_list_in_the_docs_is_the_catalogue():
    from pipelines_under_test import CATALOGUE

    table = read("docs/pipelines.md").split("## The catalogue", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M)
    assert sorted(listed) == sorted(CATALOGUE), set(listed) ^ set(CATALOGUE)  # grouped by theme, each once


def test_every_count_of_conformance_rows_quoted_is_the_tables():
    from chaos.campaign.conformance import ROWS

    for page in PAGES:
        text = page.read_text().replace("\n", " ")
        for quoted in re.findall(r"conformance (?:table|run)[^.]{0,80}?\b(\d+) rows", text):
            assert int(quoted) == len(ROWS), f"{page.name} quotes {quoted} conformance rows; the table has {len(ROWS)}"


def test_every_fault_action_is_in_the_fault_page_and_every_kind_in_the_campaign_page():
    from chaos.scenario.faults import ACTIONS
    from properties.planning import FAULT_KINDS

    faults = read("docs/faults.md")
    assert [a for a in ACTIONS if f"`{a}" not in faults] == []
    campaigns = read("docs/campaigns.md")
    assert [k for k in FAULT_KINDS if f"`{k}`" not in campaigns] == []


def options_of(*words: str) -> list[str]:
    import typer

    from chaos.cli.commands import app

    command = typer.main.get_command(app)
    for word in words:
        command = command.commands[word]
    # A flag pair (--standby/--no-standby) is documented by either of its forms: its first name stands for both.
    return [[o for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("--")] for p in command.params]


@pytest.mark.parametrize("words", [("campaign", "run"), ("trial",), ("conformance",), ("campaign", "resume")])
def test_every_option_of_a_command_is_documented(words):
    text = "\n".join(p.read_text() for p in PAGES)
    missing = [forms[0] for forms in options_of(*words) if forms and forms[0] != "--help" and not any(
        re.search(rf"{re.escape(opt)}(?![a-z-])", text) for opt in forms)]
    assert missing == [], f"streamchaos {' '.join(words)}: {missing} documented nowhere in the docs"


def test_every_plugin_option_and_chaos_check_argument_is_in_the_pipelines_page():
    import chaos.pytest_plugin as plugin

    page = read("docs/pipelines.md")
    options = re.findall(r'addoption\("(--chaos-[a-z-]+)"', inspect.getsource(plugin))
    assert len(options) >= 6 and [o for o in options if o not in page] == []
    tree = ast.parse(textwrap.dedent(inspect.getsource(plugin.chaos_check)))
    check = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "check")
    names = [a.arg for a in (*check.args.args, *check.args.kwonlyargs)]
    assert len(names) >= 10
    signature = re.search(r"chaos_check\(pipeline=[^`]*\)", page)
    assert signature, "docs/pipelines.md shows no chaos_check(...) signature"
    assert [n for n in names if f"{n}=" not in signature.group(0)] == []


@pytest.mark.parametrize("page, command", every_command())
def test_every_example_command_in_the_docs_parses_and_its_files_exist(page, command):
    words = shlex.split(command)
    ctx = parse(words[1:])
    assert ctx.command.name and not ctx.args, f"{page}: {command}"
    for word in words:
        for at in re.findall(r"@([\w./-]+\.(?:csv|json|txt|jsonl))", word):
            assert (REPO / at).is_file(), f"{page}: {command} names @{at}, which does not exist from the repository"
