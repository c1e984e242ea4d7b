"""`spotcron secrets`: store a job's secret locally (for `spotcron up`) or in Secret Manager, and list them."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import click

from spotcron.cli._common import console, jobs_option, stack_option


@click.group("secrets")
def secrets() -> None:
    """Store and list the values behind the jobs' `secrets:`: locally, or in Secret Manager.

    --local is what `spotcron up` and `spotcron run` read (.spotcron/secrets.env), --cloud what
    deployed jobs read (Secret Manager of the stack's project).

    A value is read from stdin, a file or a hidden prompt, never from the command line (shell
    history and `ps` would keep it). See docs/jobs.md, "secrets".
    """


def _where_options(function):
    function = click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), default=".spotcron",
                            envvar="SPOTCRON_STATE_DIR", show_default=True,
                            help="Local state: where secrets.env is (with --local).")(function)
    function = click.option("--cloud", is_flag=True,
                            help="Secret Manager of the stack's project: what deployed jobs read.")(function)
    return click.option("--local", "local", is_flag=True,
                        help="STATE_DIR/secrets.env: what `spotcron up` and `spotcron run` read.")(function)


@secrets.command("set")
@click.argument("name")
@click.option("--from-file", "from_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Read the value from this file instead of stdin.")
@click.option("--destroy-older", is_flag=True,
              help="Destroy every older version once the new one is stored (each active version is billed); "
                   "implies --cloud.")
@click.option("--keep-newline", is_flag=True, help="Keep a trailing newline (by default one is dropped).")
@_where_options
@stack_option
@click.pass_context
def set_(ctx: click.Context, name: str, from_file: Path | None, destroy_older: bool, keep_newline: bool,
         local: bool, cloud: bool, state_dir: Path, stack_path: Path) -> None:
    """Store a new value of secret NAME, read from stdin (or --from-file, or a hidden prompt).

    NAME is a secret id of the stack's project (bot-token) or projects/PROJECT/secrets/SECRET.
    The value is never printed. Where it goes, as with `spotcron run` and `--cloud`:

    \b
      --local  STATE_DIR/secrets.env, what `spotcron up` and `spotcron run` read (mode 0600)
      --cloud  a new version in Secret Manager (the secret is created if missing), what
               deployed jobs read; --destroy-older implies it
    Without either: --local while the stack's project is the placeholder (no stack to deploy
    to yet); with a real project, exit code 2 and a word on which one to add.

    \b
    Examples:
      spotcron secrets set bot-token < token.txt            # a new folder: for spotcron up
      printf %s "$TOKEN" | spotcron secrets set bot-token --cloud --destroy-older
      spotcron secrets set sa-key --cloud --from-file key.json
    """
    from spotcron.cli._common import given, goes_with, load_stack
    from spotcron.core.errors import SpotcronError
    from spotcron.core.secret_refs import credential_problem

    if credential_problem(name):  # never quoted: a pasted value would land in the terminal's scrollback
        raise SpotcronError("NAME is not a secret's name: give a secret id (letters, digits, '-' and '_', at most "
                            "255 characters, e.g. bot-token) or projects/PROJECT/secrets/SECRET; the value goes "
                            "on stdin (or --from-file), never on the command line")
    if local and destroy_older:
        raise goes_with("--destroy-older", "--cloud", "a local value has no older versions")
    settings = load_stack(stack_path)
    chosen = _choose(local, cloud or destroy_older, settings.project, stack_path, state_dir,
                     f"secrets set {name}" + (" --destroy-older" if destroy_older else ""))
    data = _read_value(from_file, keep_newline)
    if chosen == "local":
        _store_locally(state_dir, name, data)
        if not (local or given("state_dir")):
            console().print(f"For deployed jobs (Secret Manager), set project: in {stack_path} and add --cloud.",
                            markup=False, highlight=False, soft_wrap=True)
        return
    from spotcron.cli.deploy import DeployContext
    from spotcron.deploy.secret_store import store
    from spotcron.gcp.admin.calls import Caller

    env = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    credentials = _credentials(env, settings.project, f"secrets set {name} --cloud", "adds a version in")
    clients = env.clients(settings.project, credentials, 4)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    stored = store(settings, clients, caller, name, data, destroy_older=destroy_older)
    said = f"{stored.name}: version {stored.version} added" + (" (secret created)" if stored.created else "")
    if stored.destroyed:
        said += f"; destroyed version{'s' if len(stored.destroyed) > 1 else ''} {', '.join(stored.destroyed)}"
    console().print(said, markup=False, highlight=False)


def _choose(local: bool, cloud: bool, project: str, stack_path: Path, state_dir: Path, command: str) -> str:
    """"local" or "cloud": the flag given, else local while the stack names no real project."""
    from spotcron.core.errors import SpotcronError
    from spotcron.deploy.validate import PLACEHOLDER_PROJECT

    if local and cloud:
        raise SpotcronError("--local and --cloud exclude each other: --local for `spotcron up` "
                            "(STATE_DIR/secrets.env), --cloud for deployed jobs (Secret Manager); keep one")
    if cloud and project == PLACEHOLDER_PROJECT:
        raise SpotcronError(f"{stack_path}: project: 'my-project' is the placeholder: set your Google Cloud project "
                            f"id there (or in SPOTCRON_PROJECT) for --cloud, or use --local for `spotcron up`")
    if local or cloud:
        return "local" if local else "cloud"
    if project == PLACEHOLDER_PROJECT:
        return "local"
    raise SpotcronError(f"say which secrets you mean: `spotcron {command} --local` for `spotcron up` and "
                        f"`spotcron run` ({state_dir}/secrets.env), or `spotcron {command} --cloud` for the jobs "
                        f"deployed to project {project} (Secret Manager); the stack ({stack_path} or SPOTCRON_PROJECT) "
                        f"names a project, so either could be meant")


def _credentials(env, project: str, command: str, what: str):
    """The deploy context's credentials; without any, what is missing and how to get it, in two lines."""
    from spotcron.core.errors import SpotcronError
    from spotcron.gcp.admin.calls import MissingCredentials

    try:
        return env.credentials(project)
    except MissingCredentials as exc:
        cause = "" if "credentials were not found" in exc.cause else f" ({exc.cause})"
        raise SpotcronError(f"no Google credentials{cause}: `spotcron {command}` {what} Secret Manager of "
                            f"project {project}.\nLog in with `gcloud auth application-default login` (or set "
                            f"GOOGLE_APPLICATION_CREDENTIALS to a key file), or use --local for the values "
                            f"`spotcron up` reads (no account needed).") from None


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
                    highlight=False, soft_wrap=True)


def _stored_locally(environ: Mapping[str, str], state_dir: Path) -> dict[str, str]:
    """The names of the local values (SPOTCRON_SECRET_<ID>) and where each is: the environment or
    STATE_DIR/secrets.env; never a value."""
    from spotcron.core.secret_refs import LOCAL_PREFIX
    from spotcron.local.secret_manager import DOTENV_NAME, read_dotenv

    stored = {key: str(state_dir / DOTENV_NAME) for key in read_dotenv(state_dir / DOTENV_NAME)
              if key.startswith(LOCAL_PREFIX)}
    stored.update({key: "environment" for key in environ if key.startswith(LOCAL_PREFIX)})
    return dict(sorted(stored.items()))


@secrets.command("list")
@jobs_option
@_where_options
@stack_option
@click.pass_context
def list_(ctx: click.Context, jobs_dir: Path, local: bool, cloud: bool, state_dir: Path, stack_path: Path) -> None:
    """Each job's secrets, and where their values are.

    \b
      --local  where `spotcron up` finds each value: SPOTCRON_SECRET_<ID> in the environment,
               STATE_DIR/secrets.env, or missing (never the value itself)
      --cloud  Secret Manager: the version each job reads, the enabled versions, what is billed
    Without either: --local while the stack's project is the placeholder; with a real project,
    exit code 2 and a word on which one to add. Without Google credentials, --cloud exits 2 and
    says how to log in.
    """
    import os

    from spotcron.cli._common import load_specs, load_stack
    from spotcron.present.tables import Columns, print_table

    settings = load_stack(stack_path)
    chosen = _choose(local, cloud, settings.project, stack_path, state_dir, "secrets list")
    specs = [s for s in load_specs([jobs_dir], stack_path) if s.all_secrets()]
    out = console()
    stored = _stored_locally(os.environ, state_dir) if chosen == "local" else {}
    if not specs:
        out.print("No job names a secret (see docs/jobs.md, \"secrets\").")
        if not stored:
            return
    if chosen == "local":
        from spotcron.core.secret_refs import local_variable, secret_id
        from spotcron.local.secret_manager import DOTENV_NAME, LocalSecrets

        found = LocalSecrets(os.environ, state_dir)
        where = {"env": "environment", "dotenv": str(state_dir / DOTENV_NAME)}
        rows = []
        for spec in specs:
            for variable, ref in spec.all_secrets().items():
                value = found.value(secret_id(ref.secret))
                rows.append((spec.name, variable.replace("@", " @"), ref.secret, local_variable(ref.secret),
                             where[value[0]] if value else f"missing: spotcron secrets set {ref.secret} --local"))
        named = {local_variable(ref.secret) for spec in specs for ref in spec.all_secrets().values()}
        # A stored value no job reads (a typo, a job not written yet): its name, never its value.
        rows += [("-", "-", "-", key, f"{place}; no job names it") for key, place in stored.items() if key not in named]
        print_table(out, Columns(("job", "variable", "secret", "local variable", "value from"), ("local variable",)),
                    rows, hint="a missing value fails the run before it starts")
        return
    from spotcron.cli.deploy import DeployContext
    from spotcron.deploy.secret_store import listing
    from spotcron.gcp.admin.calls import Caller

    env = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    credentials = _credentials(env, settings.project, "secrets list --cloud", "reads the jobs' secrets in")
    clients = env.clients(settings.project, credentials, 4)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    rows = [(r.job, r.variable.replace("@", " @"), r.name, r.pinned,
             r.problem or (f"{r.enabled[0]} ({len(r.enabled)} enabled)" if r.enabled else "none enabled"),
             str(r.active)) for r in listing(settings, specs, clients, caller)]
    print_table(out, Columns(("job", "variable", "secret", "reads", "newest enabled", "billed versions"),
                             ("billed versions", "reads")), rows,
                hint="spotcron secrets set NAME --cloud --destroy-older keeps one version")


COMMANDS = [secrets]
