"""The README's commands run as written: every ``streamchaos`` line of its shell blocks parses against the
CLI (command, options, their values) without running anything, and the README stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from chaos.cli.commands import app

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def shell_commands(text: str) -> list[str]:
    """Each command of the ```bash blocks, continuation lines joined, comments dropped, ``a && b`` split."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def parse(args: list[str]):
    """Parse ``streamchaos ARGS`` down to the leaf command, as the CLI does before invoking it (typer's own
    click: a group holds its subcommand's words in ``_protected_args``)."""
    command = typer.main.get_command(app)
    ctx = command.make_context("streamchaos", list(args), resilient_parsing=False)
    while hasattr(command, "resolve_command"):
        words = list(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])) + ctx.args
        name, command, rest = command.resolve_command(ctx, words)
        ctx = command.make_context(name, rest, parent=ctx)
    return ctx


def is_usage_error(exc: BaseException) -> bool:
    return any(cls.__name__ == "UsageError" for cls in type(exc).__mro__)


STREAMCHAOS = [c for c in shell_commands(README) if c.startswith("streamchaos ")]


def test_the_readme_is_short_and_has_its_two_commands():
    assert len(README.splitlines()) <= 150
    commands = shell_commands(README)
    assert "pip install -e '.[test]'" in commands and "streamchaos demo" in commands
    assert any(c.startswith("pytest") for c in commands)
    assert len(STREAMCHAOS) >= 6


@pytest.mark.parametrize("command", STREAMCHAOS)
def test_each_readme_command_parses(command):
    ctx = parse(shlex.split(command)[1:])
    assert ctx.command.name and not ctx.args  # a leaf command, nothing left unparsed


def test_a_wrong_option_does_not_parse():
    for args in (["trial", "passthrough-append", "--no-such-option"], ["campaign", "run", "--trials", "many"],
                 ["no-such-command"]):
        with pytest.raises(Exception) as caught:
            parse(args)
        assert is_usage_error(caught.value), args


def test_the_readme_links_only_pages_that_exist():
    for link in re.findall(r"\]\((docs/[^)]+)\)", README):
        assert (REPO / link).is_file(), link


def leaf_commands() -> list[tuple[list[str], object]]:
    """(words, command) for every command of the CLI, groups' subcommands included."""
    found, todo = [], [([], typer.main.get_command(app))]
    while todo:
        words, command = todo.pop()
        if hasattr(command, "commands"):
            todo += [(words + [name], sub) for name, sub in command.commands.items()]
        else:
            found.append((words, command))
    return found


def test_every_command_s_help_shows_an_example_that_parses():
    commands = leaf_commands()
    assert len(commands) >= 12
    for words, command in commands:
        example = re.search(r"Example: (streamchaos .*)", command.epilog or "")
        assert example, f"streamchaos {' '.join(words)} --help shows no example"
        ctx = parse(shlex.split(example.group(1))[1:])
        assert ctx.command_path == " ".join(["streamchaos", *words])
