"""`spotcron doctor`: read-only checks of the Google Cloud project before anything is created."""

from __future__ import annotations

from pathlib import Path

import click

from spotcron.cli._checks import EXIT_CHECK_FAILED, print_checks, project_checks
from spotcron.cli._common import jobs_option, line_console, stack_option


@click.command("doctor")
@jobs_option
@stack_option
@click.pass_context
def doctor(ctx: click.Context, jobs_dir: Path, stack_path: Path) -> None:
    """Check the Google Cloud project before deploying; change nothing.

    Reads, never writes: the APIs deploy needs are enabled; the account running it holds the
    permissions deploy uses; the quotas of the regions and GPU types the jobs use (Spot GPU
    quota included) leave room for their VMs; the effective organisation policies allow
    Container-Optimized OS images, spotcron's Shielded VMs, functions open to all traffic, the
    regions, and external addresses where jobs ask for one; the VMs' network and subnets exist.
    Each failed check prints what to run. Exit code 1 when a check failed, 0 otherwise.
    `spotcron deploy --dry-run` (`make plan`) runs the same checks first.
    """
    from spotcron.cli._common import load_stack
    from spotcron.cli.deploy import DeployContext, _job_paths
    from spotcron.core.loader import load_jobs
    from spotcron.deploy.checkup import failed
    from spotcron.deploy.validate import preflight

    env: DeployContext = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    out = line_console()
    settings = load_stack(stack_path)
    jobs = load_jobs([jobs_dir], grace=settings.grace, retention_days=settings.results_retention_days)
    preflight(settings, jobs, stack_path, _job_paths(jobs_dir))
    from spotcron.gcp.admin.calls import MissingCredentials

    try:
        credentials = env.credentials(settings.project)
    except MissingCredentials as exc:
        raise MissingCredentials(exc.cause, "doctor reads the project (and changes nothing); without an account, "
                                            "`spotcron deploy --dry-run --offline` shows what a first deploy creates") \
            from None
    out.print(f"[bold]spotcron doctor[/] — project {settings.project}, region {settings.region}, "
              f"{len(jobs)} job{'s' if len(jobs) != 1 else ''} from {jobs_dir}/")
    checks = project_checks(env, settings, jobs, credentials)
    print_checks(out, checks)
    if failed(checks):
        ctx.exit(EXIT_CHECK_FAILED)


COMMANDS = [doctor]
