"""The doctor's checks as deploy and doctor both print them (spotcron/deploy/checkup.py decides)."""

from __future__ import annotations

from typing import Any

EXIT_CHECK_FAILED = 1  # a check failed: the project would refuse a deploy or a run; 2 stays "your input"


def project_checks(env: Any, settings: Any, jobs: list[Any], credentials: Any) -> list[Any]:
    """Every doctor check for `settings` and `jobs`, read through `env` (a DeployContext)."""
    from spotcron.deploy.checkup import run_checks
    from spotcron.gcp.admin.calls import REQUIRED_APIS, Caller

    clients = env.clients(settings.project, credentials, 4)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project, attempts=3)
    return run_checks(env.project_reads(clients, caller), settings, jobs, REQUIRED_APIS)


def print_checks(out: Any, checks: list[Any]) -> None:
    from rich.text import Text

    from spotcron.deploy.checkup import format_checks

    styles = {"✓": "green", "✗": "red", "?": "yellow"}
    for line in format_checks(checks):
        out.print(Text(line, style=styles.get(line[:1], "dim" if line.startswith("    ") else "bold")))
