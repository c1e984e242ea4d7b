"""`spotcron --help` lists every command on one line, none cut off with "..."."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.cli.short_help import FITS

GROUPS = [name for name, command in cli.commands.items() if isinstance(command, click.Group)]


@pytest.mark.parametrize("args", [[], *([name] for name in GROUPS)], ids=lambda args: " ".join(args) or "spotcron")
def test_the_command_listing_cuts_no_description_at_80_columns(args):
    done = CliRunner().invoke(cli, [*args, "--help"], env={"COLUMNS": "80"}, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    listing = done.output.split("Commands:", 1)[1]
    assert "..." not in listing
    assert all(len(line) <= 80 for line in listing.splitlines())


def test_every_command_has_a_short_help_that_fits():
    commands = [*cli.commands.values(), *(sub for name in GROUPS for sub in cli.commands[name].commands.values())]
    long = {command.name: text for command in commands if len(text := command.get_short_help_str(1000)) > FITS}
    assert long == {}, "give these a short help in spotcron/cli/short_help.py"
