"""`spotcron notify test JOB`: one test message to each of a job's notification destinations."""

from __future__ import annotations

import os
from pathlib import Path

import click

from spotcron.cli._bucket import STATE_DIR_ENV, stdout
from spotcron.cli._common import console, find_job_file, jobs_option, load_stack, stack_option


@click.group("notify")
def notify() -> None:
    """Notifications (a job's notify:, or the stack's): try them before a run fails."""


@notify.command("test")
@click.argument("job_or_file")
@jobs_option
@stack_option
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), default=Path(".spotcron"),
              envvar=STATE_DIR_ENV, show_default=True,
              help="Where .spotcron/secrets.env is read from for a webhook held in {secret: ID}.")
def test(job_or_file: str, jobs_dir: Path, stack_path: Path, state_dir: Path) -> None:
    """Send a test message to each destination of JOB's notify: (its webhook and its ping).

    A webhook written as {secret: ID} is read from SPOTCRON_SECRET_<ID> or .spotcron/secrets.env,
    as `spotcron up` reads it. Exits 1 when any destination did not take the message.

    \b
    Examples:
      spotcron notify test hello-bot
    """
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file
    from spotcron.engine.notifications import send_test
    from spotcron.runtime import webhooks
    from spotcron.runtime.secret_values import local_lookup

    settings = load_stack(stack_path)
    spec = load_job_file(find_job_file(job_or_file, jobs_dir), grace=settings.grace)
    config = spec.notify or settings.notify
    if config is None or (config.webhook is None and config.ping is None):
        raise SpotcronError(f"job {spec.name} has no notify: destination (and {stack_path} none for every job); "
                            f"add e.g. notify: {{webhook: http://127.0.0.1:8765/}} to its job file (docs/jobs.md)")
    results = send_test(config, spec.name, webhooks.post, local_lookup(os.environ, state_dir))
    out, err = stdout(), console(stderr=True)
    for destination, error in results:
        if error is None:
            out.print(f"sent a test message: {destination}", markup=False, highlight=False)
        else:
            err.print(f"failed: {destination}: {error}", markup=False, highlight=False)
    if any(error for _, error in results):
        raise click.exceptions.Exit(1)


@notify.command("listen")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The loopback port to listen on (0: any free one).")
def listen(port: int) -> None:
    """Print every notification POSTed to http://127.0.0.1:PORT/ until Ctrl-C.

    A receiver to try notify: on one machine: point a job's webhook at it, run `spotcron up` (or
    `spotcron notify test JOB`), and the failure and recovery messages appear here. It answers
    every POST with 200 and listens on the loopback interface only.

    \b
    Examples:
      spotcron notify listen
      spotcron notify listen --port 9000
    """
    from spotcron.local.receiver import Receiver
    from spotcron.present.neutral import printable

    out = stdout()

    def show(path: str, note_id: str, text: str) -> None:
        # A message quotes a job's reason and log, and anything may POST here: text, never escapes.
        out.print(printable(f"--- {path}" + (f" ({note_id})" if note_id else "")), markup=False, highlight=False)
        out.print(printable(text, lines=True), markup=False, highlight=False)

    try:
        receiver = Receiver(show, port)
    except OSError as exc:
        from spotcron.core.errors import SpotcronError

        raise SpotcronError(f"cannot listen on 127.0.0.1:{port}: {exc}; choose another --port") from None
    console(stderr=True).print(f"listening on {receiver.url} (notify: {{webhook: {receiver.url}}}); Ctrl-C stops",
                               markup=False, highlight=False)
    try:
        receiver.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.server.server_close()


COMMANDS = [notify]
