"""`spotcron deploy`: plan the stack on Google Cloud, show the diff, apply it after a yes.

Everything that touches the outside (credentials, clients, the terminal) comes from a
`DeployContext` that tests replace through click's `obj`; the default is the real thing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spotcron.cli._common import jobs_option, line_console, repository_root, stack_option

if TYPE_CHECKING:
    from spotcron.deploy.planner import Action
    from spotcron.gcp.admin.calls import Caller
    from spotcron.gcp.admin.clients import Clients


def _default_clients(project: str, credentials: Any, concurrency: int) -> Clients:
    from spotcron.gcp.admin.clients import Clients

    return Clients(project, credentials, pool_size=concurrency)


def _default_compute(project: str, credentials: Any) -> Any:
    from spotcron.gcp.compute import GoogleCompute

    return GoogleCompute(project)


def _default_credentials(project: str) -> Any:
    from spotcron.gcp.admin.credentials import default_credentials

    return default_credentials(project)


def _default_project_reads(clients: Any, caller: Any) -> Any:
    from spotcron.gcp.admin.project_reads import project_reads

    return project_reads(clients, caller)


def _default_builder(settings: Any, credentials: Any) -> Any:
    from spotcron.core.build_logs import build_logs_bucket
    from spotcron.deploy.naming import JOB_BUILD_ACCOUNT
    from spotcron.gcp.admin.cloudbuild import CloudBuilder
    from spotcron.gcp.storage import GcsBlobs

    # The deploying user's credentials read a failed build's log and delete each one: no account
    # of the stack reads that bucket.
    return CloudBuilder(settings.project, settings.region, GcsBlobs(settings.bucket), credentials=credentials,
                        service_account=settings.account_email(JOB_BUILD_ACCOUNT),
                        logs=GcsBlobs(build_logs_bucket(settings.bucket)), keep=settings.image_versions_kept)


@dataclass
class DeployContext:
    credentials: Callable[[str], Any] = _default_credentials
    clients: Callable[[str, Any, int], Clients] = _default_clients
    # The checkout whose code deploy ships; None: this installation's own (runtime/assets.py).
    source_root: Callable[[], Path | None] = field(default=lambda: None)
    caller: Callable[[str], Caller] | None = None  # None: the default retry policy
    interactive: Callable[[], bool] = field(default=lambda: sys.stdin.isatty())
    poll_initial: float = 2.0
    compute: Callable[[str, Any], Any] = _default_compute  # destroy: live VMs labelled spotcron=1
    builder: Callable[[Any, Any], Any] = _default_builder  # (settings, credentials) -> deploy.builds.Builder
    project_reads: Callable[[Any, Any], Any] = _default_project_reads  # doctor: (clients, caller) -> ProjectFacts
    # How deploy waits out Google's propagation delays (gcp/admin/settling.py); tests pass a virtual clock's.
    sleep: Callable[[float], None] = time.sleep


class RichReporter:
    """The plan as a coloured diff, then a progress bar while it is applied."""

    STYLES = {"+": "green", "~": "yellow", "-": "red"}

    def __init__(self, out: Any):
        self.out = out
        self.progress: Any = None
        self.task: Any = None
        self.failures = 0

    def show_plan(self, actions: list[Action]) -> None:
        from rich.text import Text

        from spotcron.deploy.planner import format_plan

        for line in format_plan(actions):
            style = self.STYLES.get(line[:1], "dim" if line.startswith("    ") else "bold")
            self.out.print(Text(line, style=style))

    def start(self, total: int, title: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn(f"[bold]{title}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("[dim]{task.fields[last]}"), console=self.out)
        self.task = self.progress.add_task(title, total=total, last="")
        self.progress.start()

    def advance(self, action: Action, error: str | None) -> None:
        from rich.text import Text

        self.progress.update(self.task, advance=1, last=action.title)
        if error:
            self.failures += 1
            self.progress.console.print(Text(f"✗ {action.title}: {error}", style="red"))

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.stop()

    def note(self, text: str) -> None:
        self.out.print(f"[cyan]{text}[/]")


def _job_paths(jobs_dir: Path) -> dict[str, Path]:
    from spotcron.core.loader import job_files

    return {path.stem: path for path in job_files([jobs_dir])[0]} if jobs_dir.is_dir() else {}


@click.command("deploy")
@jobs_option
@stack_option
@click.option("--dry-run", is_flag=True, help="Check the project (spotcron doctor), show the plan, change nothing "
                                             "(what `make plan` runs); exit 1 when a check failed.")
@click.option("--offline", is_flag=True, help="With --dry-run: list what a first deploy creates, with no credentials "
                                             "and no call to Google.")
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Apply without asking (needed without a terminal).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=16, show_default=True,
              help="API calls in flight at once while applying.")
@click.pass_context
def deploy(ctx: click.Context, jobs_dir: Path, stack_path: Path, dry_run: bool, offline: bool, assume_yes: bool,
           concurrency: int) -> None:
    """Create or update the whole stack on Google Cloud from jobs/ and the stack file.

    Reads what exists (one list call per kind of resource), prints what would change as a
    diff, asks, then applies it: results bucket, Pub/Sub topics, service accounts and their
    IAM bindings, the three functions, one Cloud Scheduler entry per job and the sweep's.
    Running it again changes nothing; after an interruption it continues where it stopped.
    Entries of deleted job files are deleted; nothing without spotcron's label is touched.

    Needs `gcloud auth application-default login` as a project Owner (or the roles in
    docs/deploy.md). APIs the stack needs and the project has not enabled are enabled first,
    after you confirm: compute, cloudscheduler, pubsub, cloudfunctions, run, cloudbuild,
    eventarc, storage, iam, artifactregistry, logging, cloudresourcemanager, sts, serviceusage,
    secretmanager.
    On a new project Google takes minutes to propagate new accounts, grants and Eventarc's
    agent; deploy waits for them by itself and says what it is waiting for.
    `--dry-run` first runs `spotcron doctor`'s checks; `--dry-run --offline` needs no credentials at all.
    """
    from spotcron.cli._common import load_stack
    from spotcron.core.loader import load_jobs
    from spotcron.deploy.apply import run_deploy
    from spotcron.deploy.source import build_source
    from spotcron.gcp.admin.calls import Caller, DeployError
    from spotcron.gcp.admin.settling import Settling

    env: DeployContext = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    out = line_console()
    # Everything that can be checked without Google is checked before the first call.
    settings = load_stack(stack_path)
    jobs = load_jobs([jobs_dir], grace=settings.grace, retention_days=settings.results_retention_days)
    if offline:
        if not dry_run:
            from spotcron.cli._common import goes_with

            raise goes_with("--offline", "--dry-run", "without credentials deploy can only show what it would create")
        placeholders = _preflight_but_placeholders(settings, jobs, stack_path, _job_paths(jobs_dir))
        _warn_jobs(jobs)
        _offline_plan(settings, jobs, jobs_dir, build_source(env.source_root()).object_name, out)
        for problem in placeholders:
            out.print(f"[yellow]Before a real deploy: {problem}[/]")
        return
    _preflight_pointing_offline(settings, jobs, stack_path, _job_paths(jobs_dir), dry_run)
    source = build_source(env.source_root())
    credentials = env.credentials(settings.project)
    clients = env.clients(settings.project, credentials, concurrency)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)

    def confirm(actions: list[Action]) -> bool:
        if assume_yes:
            return True
        if not env.interactive():
            raise DeployError("deploy asks before changing anything, and there is no terminal to ask on: "
                              "pass --yes to apply the plan above")
        return click.confirm("Apply these changes?", default=False)

    out.print(f"[bold]spotcron deploy[/] — project {settings.project}, region {settings.region}, "
              f"{len(jobs)} job{'s' if len(jobs) != 1 else ''} from {jobs_dir}/")
    checks_failed = False
    if dry_run:  # the project as doctor sees it, before the plan
        from spotcron.cli._checks import print_checks, project_checks
        from spotcron.deploy.checkup import failed

        checks = project_checks(env, settings, jobs, credentials)
        print_checks(out, checks)
        checks_failed = failed(checks)
    _warn_jobs(jobs)
    started = time.monotonic()
    jobs, prepare = _images(env, settings, credentials, jobs, jobs_dir, out)
    result = run_deploy(settings, jobs, source, clients, confirm=confirm, reporter=RichReporter(out),
                        dry_run=dry_run, concurrency=concurrency, caller=caller, poll_initial=env.poll_initial,
                        prepare=prepare, settling=Settling(sleep=env.sleep))
    if dry_run:
        if result.plan:
            out.print("Dry run: nothing was changed. Apply with `make deploy` (spotcron deploy).")
        if checks_failed:
            from spotcron.cli._checks import EXIT_CHECK_FAILED

            out.print("[red]A check above failed: fix it before deploying.[/]")
            ctx.exit(EXIT_CHECK_FAILED)
        return
    if result.passes:
        done = sum(len(p.done) for p in result.passes)
        out.print(f"[green]Deployed[/]: {done} changes in {time.monotonic() - started:.1f}s "
                  f"({caller.calls} API calls). A re-plan now shows no changes.")
    out.print(f"Runs and results: spotcron runs --bucket gs://{settings.bucket}")


def _warn_jobs(jobs: list[Any]) -> None:
    """What deploys but would not work as meant: a NAT it relies on, a local command its VM would not run."""
    from spotcron.core.egress import nat_warning
    from spotcron.core.local_parity import local_command_warnings

    err = line_console(stderr=True)
    for job in jobs:
        for warning in [w for w in [nat_warning(job)] if w] + local_command_warnings(job):
            err.print(f"warning: {job.name}: {warning}", markup=False, highlight=False)


def _preflight_pointing_offline(settings: Any, jobs: list[Any], stack_path: Path, files: dict[str, Path],
                                dry_run: bool) -> None:
    """preflight; a dry run stopped by the placeholder project also learns of --offline, which
    shows a newcomer what a first deploy creates before there is a project to read."""
    import dataclasses

    from spotcron.core.errors import ConfigError
    from spotcron.deploy.validate import preflight

    try:
        preflight(settings, jobs, stack_path, files)
    except ConfigError as exc:
        if not dry_run:
            raise
        hint = "; `spotcron deploy --dry-run --offline` lists what a first deploy creates, with no project yet"
        raise ConfigError([dataclasses.replace(p, message=p.message + hint) if p.field == "project" and
                           "is the placeholder" in p.message else p for p in exc.problems]) from None


def _preflight_but_placeholders(settings: Any, jobs: list[Any], stack_path: Path, files: dict[str, Path]) -> list[Any]:
    """preflight, except that the stack file's placeholders (a newcomer has not set a project yet)
    are returned instead of raised: the offline plan shows what deploy would create all the same."""
    from spotcron.core.errors import ConfigError
    from spotcron.deploy.validate import preflight

    try:
        preflight(settings, jobs, stack_path, files)
    except ConfigError as exc:
        others = [p for p in exc.problems if "is the placeholder" not in p.message]
        if others:
            raise ConfigError(others) from None
        return list(exc.problems)
    return []


def _offline_plan(settings: Any, jobs: list[Any], jobs_dir: Path, source_object: str, out: Any) -> None:
    """The plan of a first deploy on an empty project, read from nothing but the files here."""
    from rich.text import Text

    from spotcron.core.images import plan_builds
    from spotcron.deploy.builds import ImageStatus, by_registry, format_builds, registries
    from spotcron.deploy.offline import first_deploy_plan

    out.print(f"[bold]spotcron deploy --dry-run --offline[/] — project {settings.project}, region "
              f"{settings.region}, {len(jobs)} job{'s' if len(jobs) != 1 else ''} from {jobs_dir}/")
    out.print("What a first deploy creates in an empty project (nothing was read from Google, nothing changed):")
    builds = plan_builds(jobs, repository_root(jobs_dir))
    for line in format_builds([ImageStatus(b, b.image(where), None)
                               for b, where in by_registry(builds, registries(settings, jobs))]):
        out.print(Text(line, style="green"))
    RichReporter(out).show_plan(first_deploy_plan(settings, jobs, source_object))
    out.print("Then a second, short pass sets the functions' URLs (SPOTCRON_JOB_DONE_URL, SPOTCRON_CREDENTIALS_URL). "
              "With credentials, `spotcron doctor` checks the project and `spotcron deploy --dry-run` reads what "
              "exists.")


def _images(env: DeployContext, settings: Any, credentials: Any, jobs: list[Any], jobs_dir: Path,
            out: Any) -> tuple[list[Any], Callable[[], list[Any]] | None]:
    """The jobs pinned to the images built before, and the step that builds the rest (None: nothing to build)."""
    from rich.text import Text

    from spotcron.core.images import plan_builds
    from spotcron.deploy.builds import build_missing, format_builds, look_up, pin, registries

    builds = plan_builds(jobs, repository_root(jobs_dir))
    if not builds:
        return jobs, None
    builder = _patient(env.builder(settings, credentials), env, out)
    statuses = look_up(builds, builder, registries(settings, jobs))
    for line in format_builds(statuses):
        out.print(Text(line, style="green" if line.startswith("+") else "dim"))
    if all(status.digest for status in statuses):
        return pin(jobs, statuses), None

    def prepare() -> list[Any]:
        done = build_missing(statuses, builder, on_built=lambda s: out.print(Text(format_builds([s])[0], style="green")))
        return pin(jobs, done)

    return pin(jobs, statuses), prepare


def _patient(builder: Any, env: DeployContext, out: Any) -> Any:
    """`builder`, waiting out a push refused while the build account's grant propagates
    (gcp/admin/settling.py) on `env`'s clock, with a line saying so."""
    if hasattr(builder, "settling"):
        from spotcron.gcp.admin.settling import Settling

        builder.settling = Settling(sleep=env.sleep, say=lambda text: out.print(f"[cyan]{text}[/]"))
    if hasattr(builder, "say"):  # e.g. a project Cloud Build restricts, building in its global location
        builder.say = lambda text: out.print(f"[cyan]{text}[/]")
    return builder


@click.command("build")
@click.argument("job", required=False)
@jobs_option
@stack_option
@click.pass_context
def build(ctx: click.Context, job: str | None, jobs_dir: Path, stack_path: Path) -> None:
    """Build the images of the jobs that say build: (or of JOB) with Cloud Build.

    No local Docker is needed: each build folder is uploaded to the stack's bucket as a
    reproducible archive, Cloud Build runs `docker build` on it and pushes the image to the
    built Artifact Registry repository of the account its jobs run as (REPOSITORY-built, or
    REPOSITORY-built-HASH for a job's own service_account; never where prebuilt images are
    pushed), tagged with the hash of the folder. A folder that is unchanged since its last
    successful build is not built again, unless the repository's cleanup may delete that build
    (image_versions_kept newer versions of the image since). Prints each image by digest,
    the reference `spotcron deploy` pins the deployed spec to.
    """
    from rich.text import Text

    from spotcron.cli._common import load_stack
    from spotcron.core.errors import SpotcronError
    from spotcron.core.images import plan_builds
    from spotcron.core.loader import load_jobs
    from spotcron.deploy.builds import build_missing, format_builds, look_up, registries
    from spotcron.deploy.validate import preflight

    env: DeployContext = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    out = line_console()
    settings = load_stack(stack_path)
    jobs = load_jobs([jobs_dir], grace=settings.grace, retention_days=settings.results_retention_days)
    if job is not None and job not in {spec.name for spec in jobs}:
        raise SpotcronError(f"no job {job!r} in {jobs_dir}/; jobs: {', '.join(sorted(s.name for s in jobs))}")
    preflight(settings, jobs, stack_path, _job_paths(jobs_dir))
    builds = plan_builds(jobs, repository_root(jobs_dir), only=job)
    if not builds:
        out.print(f"nothing to build: {'job ' + job if job else 'no job'} says build: (a folder with a Dockerfile)")
        return
    builder = _patient(env.builder(settings, env.credentials(settings.project)), env, out)
    statuses = look_up(builds, builder, registries(settings, jobs))
    for line in format_builds([s for s in statuses if s.digest]):
        out.print(Text(line, style="dim"))
    for status in statuses:
        if status.digest is None:
            out.print(f"building {status.image} from {status.build.relative}/ with Cloud Build …")
    build_missing(statuses, builder, on_built=lambda s: out.print(Text(format_builds([s])[0], style="green")))


@click.command("destroy")
@stack_option
@click.option("--dry-run", is_flag=True, help="Show what would be deleted and change nothing.")
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Destroy without asking (needed without a terminal).")
@click.option("--delete-results", is_flag=True,
              help="Also delete the results bucket and every run's logs and results in it.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=16, show_default=True,
              help="API calls in flight at once.")
@click.pass_context
def destroy(ctx: click.Context, stack_path: Path, dry_run: bool, assume_yes: bool, delete_results: bool,
            concurrency: int) -> None:
    """Remove the deployed stack from Google Cloud: the inverse of deploy.

    Prints the plan first, then asks. Deletes only what carries spotcron's label or name: the
    scheduler entries, functions, topics, function sources, live job VMs and the service
    accounts deploy created, and spotcron's bindings in IAM policies that stay. The results
    bucket, with every run's logs and results, is kept unless --delete-results is given.
    """
    from spotcron.cli._common import load_stack
    from spotcron.deploy.destroy import format_destroy, run_destroy
    from spotcron.deploy.validate import preflight
    from spotcron.gcp.admin.calls import Caller, DeployError, MissingCredentials

    env: DeployContext = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    out = line_console()
    settings = load_stack(stack_path)
    preflight(settings, [], stack_path)  # a placeholder project or bucket stops here, before any call
    try:
        credentials = env.credentials(settings.project)
    except MissingCredentials as exc:  # deploy's text names the APIs it enables; destroy enables none
        raise MissingCredentials(exc.cause, "destroy reads the project to list what it would delete, --dry-run "
                                            "too") from None
    clients = env.clients(settings.project, credentials, concurrency)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    compute = env.compute(settings.project, credentials)

    def show(plan: Any) -> None:
        from rich.text import Text

        for line in format_destroy(plan):
            style = {"-": "red", "~": "yellow"}.get(line[:1], "dim" if line.startswith(" ") else "bold")
            out.print(Text(line, style=style))

    def confirm(plan: Any) -> bool:
        if assume_yes:
            return True
        if not env.interactive():
            raise DeployError("destroy asks before deleting anything, and there is no terminal to ask on: "
                              "pass --yes to apply the plan above")
        return click.confirm(f"Destroy the spotcron stack in project {settings.project}?", default=False)

    out.print(f"[bold]spotcron destroy[/] — project {settings.project}, region {settings.region}")
    plan, outcome = run_destroy(settings, clients, compute=compute, confirm=confirm, show=show,
                                delete_results=delete_results, dry_run=dry_run, concurrency=concurrency,
                                caller=caller, poll_initial=env.poll_initial)
    if dry_run:
        if plan.actions or plan.vms:
            out.print("Dry run: nothing was changed. Destroy with `spotcron destroy`.")
        return
    if outcome is not None:
        out.print(f"[green]Destroyed[/]: {len(outcome.done) + len(plan.vms)} changes. "
                  + ("The results bucket is gone too." if delete_results else
                     f"Results stay in gs://{settings.bucket}: spotcron runs --bucket gs://{settings.bucket}"))


COMMANDS = [deploy, build, destroy]
