"""The `spotcron` command line: one root group, command modules registered by name.

Commands just raise: `SpotcronGroup` turns any SpotcronError into a clean message on stderr and
exit code 2 (a ConfigError prints one line per problem), so no command formats errors itself.
Command modules import only click at the top and load heavy modules inside their functions:
`spotcron --help` must stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from spotcron import __version__
from spotcron.core.errors import ConfigError, SpotcronError

# One line per command module. Each module exposes COMMANDS: a list of click commands/groups.
COMMAND_MODULES = (
    "spotcron.cli.scaffold",
    "spotcron.cli.specs",
    "spotcron.cli.cost",
    "spotcron.cli.report",
    "spotcron.cli.up",
    "spotcron.cli.run_commands",
    "spotcron.cli.notify",
    "spotcron.cli.page",
    "spotcron.cli.manage",
    "spotcron.cli.deploy",
    "spotcron.cli.doctor",
    "spotcron.cli.secrets",
)

EXIT_USER_ERROR = 2  # same as click's usage errors: "your input is wrong", never a traceback


class ReportedError(click.ClickException):
    """A SpotcronError rendered for the terminal."""

    exit_code = EXIT_USER_ERROR

    def show(self, file: Any = None) -> None:
        from spotcron.present.neutral import printable

        # A message may name what a job wrote (a results file, a reason): never a terminal escape.
        click.echo(printable(self.message, lines=True), err=True, file=file)


def render_error(exc: SpotcronError) -> str:
    if isinstance(exc, ConfigError):
        files = {p.file for p in exc.problems}
        count = len(exc.problems)
        summary = (f"{count} problem{'s' if count != 1 else ''} in {len(files)} "
                   f"file{'s' if len(files) != 1 else ''}")
        return "\n".join([*(str(p) for p in exc.problems), summary])
    return f"error: {exc}"


class SpotcronGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SpotcronError as exc:
            raise ReportedError(render_error(exc)) from None


@click.group(cls=SpotcronGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spotcron")
def cli() -> None:
    """Run scheduled containers on Google Cloud Spot VMs, for cents a month.

    A job is a YAML file in jobs/ (every field: docs/jobs.md in the spotcron source); `spotcron init`
    starts a folder with one.
    Check them with `spotcron validate`, preview a schedule with `spotcron next JOB`, then run
    everything locally with `spotcron up`.
    """


def _register() -> None:
    from spotcron.cli.short_help import SHORT_HELP

    for name in COMMAND_MODULES:
        for command in importlib.import_module(name).COMMANDS:
            command.short_help = command.short_help or SHORT_HELP.get(command.name or "")
            for sub in getattr(command, "commands", {}).values():
                sub.short_help = sub.short_help or SHORT_HELP.get(f"{command.name} {sub.name}")
            cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="spotcron")
