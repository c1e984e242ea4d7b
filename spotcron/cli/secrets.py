"""`spotcron secrets`: store a job's secret in Secret Manager, and list what the jobs' secrets hold."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spotcron.cli._common import console, jobs_option, stack_option


@click.group("secrets")
def secrets() -> None:
    """Store and list the values behind the jobs' `secrets:` (Secret Manager).

    A value is read from stdin, a file or a hidden prompt, never from the command line (shell
    history and `ps` would keep it). See docs/jobs.md, "secrets".
    """


@secrets.command("set")
@click.argument("name")
@click.option("--from-file", "from_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Read the value from this file instead of stdin.")
@click.option("--destroy-older", is_flag=True,
              help="Destroy every older version once the new one is stored (each active version is billed).")
@click.option("--keep-newline", is_flag=True, help="Keep a trailing newline (by default one is dropped).")
@click.option("--local", "local", is_flag=True,
              help="Store it for `spotcron up` in STATE_DIR/secrets.env instead of Secret Manager.")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), default=".spotcron",
              envvar="SPOTCRON_STATE_DIR", show_default=True, help="Local state (with --local).")
@stack_option
@click.pass_context
def set_(ctx: click.Context, name: str, from_file: Path | None, destroy_older: bool, keep_newline: bool,
         local: bool, state_dir: Path, stack_path: Path) -> None:
    """Store a new version of secret NAME, read from stdin (or --from-file, or a hidden prompt).

    NAME is a secret id of the stack's project (bot-token) or projects/PROJECT/secrets/SECRET.
    The secret is created if missing. The value is never printed.

    \b
    Examples:
      printf %s "$TOKEN" | spotcron secrets set bot-token --destroy-older
      spotcron secrets set sa-key --from-file key.json
      spotcron secrets set bot-token --local < token.txt
    """
    from spotcron.core.errors import SpotcronError

    data = _read_value(from_file, keep_newline)
    if local:
        _store_locally(state_dir, name, data)
        return
    from spotcron.cli._common import load_stack
    from spotcron.cli.deploy import DeployContext
    from spotcron.deploy.secret_store import store
    from spotcron.gcp.admin.calls import Caller

    env = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    settings = load_stack(stack_path)
    if settings.project == "my-project":
        raise SpotcronError("the stack's project is the placeholder 'my-project': set project: in the stack file "
                            "(or SPOTCRON_PROJECT), or store the value for local runs with --local")
    credentials = env.credentials(settings.project)
    clients = env.clients(settings.project, credentials, 4)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    stored = store(settings, clients, caller, name, data, destroy_older=destroy_older)
    said = f"{stored.name}: version {stored.version} added" + (" (secret created)" if stored.created else "")
    if stored.destroyed:
        said += f"; destroyed version{'s' if len(stored.destroyed) > 1 else ''} {', '.join(stored.destroyed)}"
    console().print(said, markup=False, highlight=False)


def _read_value(from_file: Path | None, keep_newline: bool) -> bytes:
    from spotcron.core.errors import SpotcronError

    if from_file is not None:
        data = from_file.read_bytes()
    elif sys.stdin.isatty():
        data = click.prompt("Value (not shown)", hide_input=True, err=True).encode()
    else:
        data = sys.stdin.buffer.read(64 * 1024 + 2)
    if not keep_newline:
        data = data.removesuffix(b"\n").removesuffix(b"\r")
    if not data:
        raise SpotcronError("no value given: pipe it on stdin, or use --from-file PATH")
    return data


def _store_locally(state_dir: Path, name: str, data: bytes) -> None:
    """STATE_DIR/secrets.env gets SPOTCRON_SECRET_<ID>=VALUE (quoted), mode 0600; other lines stay."""
    import os

    from spotcron.core.errors import SpotcronError
    from spotcron.core.secret_refs import local_variable
    from spotcron.local.secret_manager import DOTENV_NAME, dotenv_escape

    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise SpotcronError("a local value must be text (UTF-8)") from None
    key = local_variable(name)
    escaped = dotenv_escape(text)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / DOTENV_NAME
    kept = [line for line in (path.read_bytes().decode().split("\n") if path.exists() else []) if line.strip()
            and not line.strip().removeprefix("export ").startswith(f"{key}=")]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join([*kept, f'{key}="{escaped}"']) + "\n")
    os.chmod(path, 0o600)
    console().print(f"{key} stored in {path} (for spotcron up; git-ignored with {state_dir}/)", markup=False,
                    highlight=False)


@secrets.command("list")
@jobs_option
@stack_option
@click.pass_context
def list_(ctx: click.Context, jobs_dir: Path, stack_path: Path) -> None:
    """Each job's secrets: the secret, the version it reads, the enabled versions, what is billed."""
    from spotcron.cli._common import load_specs, load_stack
    from spotcron.cli.deploy import DeployContext
    from spotcron.deploy.secret_store import listing
    from spotcron.gcp.admin.calls import Caller
    from spotcron.present.tables import Columns, print_table

    env = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    settings = load_stack(stack_path)
    specs = [s for s in load_specs([jobs_dir], stack_path) if s.all_secrets()]
    out = console()
    if not specs:
        out.print("No job names a secret (see docs/jobs.md, \"secrets\").")
        return
    credentials = env.credentials(settings.project)
    clients = env.clients(settings.project, credentials, 4)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    rows = [(r.job, r.variable.replace("@", " @"), r.name, r.pinned,
             r.problem or (f"{r.enabled[0]} ({len(r.enabled)} enabled)" if r.enabled else "none enabled"),
             str(r.active)) for r in listing(settings, specs, clients, caller)]
    print_table(out, Columns(("job", "variable", "secret", "reads", "newest enabled", "billed versions"),
                             ("billed versions", "reads")), rows, hint="spotcron secrets set NAME --destroy-older keeps one version")


COMMANDS = [secrets]
