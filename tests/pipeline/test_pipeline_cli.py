"""The `gmc-grpo` entry point: top-level help, routing, and every subcommand's --help."""

import subprocess
import sys

import pytest

from pipeline import cli


def test_top_level_help_lists_every_subcommand(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.SUBCOMMANDS:
        assert name in out


def test_unknown_subcommand_is_an_error_that_lists_the_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["thoery"])
    assert exc.value.code == 2
    assert "unknown subcommand 'thoery'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_each_subcommand_has_a_help(name):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", name, "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"gmc-grpo {name}" in result.stdout


def test_version(capsys):
    from gmc_grpo import __version__

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == __version__
