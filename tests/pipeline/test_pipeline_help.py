"""`--help` explains (issue 15): every flag of every command line has help text, every example
command in a help page or an error message exists and parses, and the examples agree with the
recipes they name."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from figures.cli import build_parser as figures_parser
from llm_runs.cli import SUBCOMMANDS as LLM_SUBCOMMANDS
from llm_runs.cli import build_subparser
from llm_runs.recipes import load_recipe
from pipeline import cli
from pipeline.reproduce import build_parser as reproduce_parser
from theory.cli import build_parser as theory_parser
from toy_mdps.cli import build_parser as toy_parser
from toy_mdps.problem import CONFIG_COMMANDS


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command line's full parser, by its words after `gmc-grpo`."""
    found = {f"toy {name}": p for name, p in _subparsers(toy_parser()).items()}
    found.update({f"llm {name}": build_subparser(name)[0] for name in LLM_SUBCOMMANDS})
    found.update(figures=figures_parser(), theory=theory_parser(), reproduce=reproduce_parser())
    return found


def test_every_flag_has_help_text() -> None:
    missing = []
    for name, parser in parsers().items():
        for action in parser._actions:
            text = (action.help or "").strip()
            if isinstance(action, argparse._HelpAction):
                continue
            # a help that is only the default in parentheses, e.g. "(1024)", explains nothing
            if not text or re.fullmatch(r"\(.*\)", text):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def parse(command: str) -> argparse.Namespace:
    """Parse one `gmc-grpo ...` command line with the parser of its subcommand."""
    words = shlex.split(command.replace("\\\n", " "))
    assert words[0] == "gmc-grpo", command
    words = [w for w in words[1:] if w != "..."]
    if words[0] in ("toy", "llm") and len(words) > 1:
        name, rest = f"{words[0]} {words[1]}", words[2:]
    else:
        name, rest = words[0], words[1:]
    table = parsers()
    assert name in table, f"{command!r}: no command `gmc-grpo {name}`"
    parser = table[name]
    if name.startswith("toy "):  # the toy subcommands are parsed by the toy parser
        parser, rest = toy_parser(), [name.split()[1], *rest]
    try:
        return parser.parse_args(rest)
    except SystemExit:
        pytest.fail(f"the example {command!r} does not parse")


def examples(text: str) -> list[str]:
    """The `gmc-grpo ...` commands of a help text (comments dropped, `\\` lines joined)."""
    text = text.replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("gmc-grpo "):
            commands.append(line)
    return commands


def test_every_example_in_a_help_page_parses() -> None:
    pages = [cli.EPILOG]
    for parser in parsers().values():
        pages += [parser.description or "", parser.epilog or ""]
    commands = [c for page in pages for c in examples(page)]
    assert len(commands) >= 15
    for command in commands:
        if command.endswith("--help"):
            continue
        parse(command)


def test_commands_named_in_error_messages_exist() -> None:
    # "this is a toy experiment config: run it with gmc-grpo toy train --config FILE"
    for kind, command in CONFIG_COMMANDS.items():
        if command.startswith("gmc-grpo"):
            parse(command)
        else:
            assert kind == "run"


def test_llm_train_examples_match_their_recipes() -> None:
    epilog = build_subparser("train")[0].epilog or ""
    checked = 0
    for line in epilog.splitlines():
        match = re.search(r"--recipe (\S+) --run (\S+).*delay (\d+)", line)
        if match:
            recipe, run, delay = match.groups()
            assert load_recipe(recipe, run)["delay"] == int(delay), line
            checked += 1
    assert checked >= 1


def test_the_delay_flag_says_its_unit() -> None:
    parser = build_subparser("train")[0]
    (delay,) = [a for a in parser._actions if "--delay" in a.option_strings]
    assert "learner updates" in delay.help and "inner_steps" in delay.help


def test_example_commands_keep_their_line_continuations() -> None:
    """An example that goes on over lines ends each of them with ` \\` in the printed help (a
    `\\` at the end of a line of a plain string literal vanishes, joining the two lines)."""
    pages = {"gmc-grpo": cli.build_parser().format_help()}
    pages.update({name: parser.format_help() for name, parser in parsers().items()})
    continued = 0
    for name, text in pages.items():
        lines = text.splitlines()
        for line, after in zip(lines, lines[1:], strict=False):
            command = line.split("#")[0]
            if line.lstrip().startswith("gmc-grpo ") and after.lstrip().startswith("--"):
                assert command.rstrip().endswith(" \\"), f"{name}: {line!r} loses its `\\`"
                continued += 1
            # two flags far apart on one line: a continuation swallowed
            assert not re.search(r"\S {4,}--\w", command.strip()), f"{name}: {line!r}"
    assert continued >= 4  # llm train (3) and llm eval (1) have continued examples
    train = pages["llm train"]
    assert "--methods grpo,tic,gmc \\\n      --out runs/tiny_suite" in train
