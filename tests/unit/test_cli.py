"""The command line's shared options and help texts, without running any command."""

from __future__ import annotations

import argparse
import re

import pytest

from memstream.cli.main import build_parser
from memstream.cli.options import overrides, version
from memstream.settings import Settings

PARSER = build_parser()
COMMANDS: dict[str, argparse.ArgumentParser] = next(
    a.choices for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)
)
# reStructuredText and Markdown that a docstring would carry into a help text.
MARKUP = re.compile(r"``|`[^`\s]+`|:(?:class|func|meth|mod|attr):|\*\*")


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_shows_examples_of_itself(name: str) -> None:
    text = _help(COMMANDS[name])
    examples = text.split("examples:\n", 1)[1].splitlines()
    assert examples
    assert all(line.strip().startswith(("memstream", "MEMSTREAM_")) for line in examples)
    assert any(f"memstream {name}" in line for line in examples)


@pytest.mark.parametrize("name", ["", *sorted(COMMANDS)])
def test_no_help_text_carries_docstring_markup(name: str) -> None:
    text = _help(COMMANDS[name] if name else PARSER)
    assert MARKUP.search(text) is None, MARKUP.search(text)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_broker_and_the_version(name: str) -> None:
    args = PARSER.parse_args([name, "-b", "k1:9092,k2:9092", *_required(name)])
    assert Settings(**overrides(args)).kafka_bootstrap_servers == "k1:9092,k2:9092"
    with pytest.raises(SystemExit) as exit_:
        PARSER.parse_args([name, "--version"])
    assert exit_.value.code == 0


def test_the_broker_may_be_given_before_the_command() -> None:
    args = PARSER.parse_args(["--bootstrap-servers", "k:9092", "worker"])
    assert overrides(args) == {"kafka_bootstrap_servers": "k:9092"}
    assert overrides(PARSER.parse_args(["worker"])) == {}


def test_the_version_is_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        PARSER.parse_args(["--version"])
    assert capsys.readouterr().out.strip() == f"memstream {version()}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version())


def _required(name: str) -> list[str]:
    return {
        "publish": ["events.jsonl", "--topic", "message-written"],
        "replay": ["--topic", "message-written", "--to", "earliest"],
        "mcp": ["--tenant-id", "acme", "--user-id", "u1"],
        "export": ["--tenant-id", "acme"],
        "import": ["acme.jsonl", "--tenant-id", "acme", "--agent-id", "travel"],
    }.get(name, [])
