"""`spotcron up`: the whole pipeline on this machine, no cloud account needed."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from spotcron.cli._common import (
    given,
    goes_with,
    jobs_option,
    line_console,
    load_stack,
    repository_root,
    stack_option,
)

STATE_ENV = "SPOTCRON_STATE_DIR"


@click.command("up")
@jobs_option
@stack_option
@click.option("--once", is_flag=True,
              help="Fire every job (every matrix entry) once now, wait for all runs to end, and exit: "
                   "0 if none failed (skipped runs do not fail), 1 otherwise.")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), default=".spotcron",
              envvar=STATE_ENV, show_default=True, show_envvar=True,
              help="Where the local bucket, VM work dirs and logs live (kept across restarts).")
@click.option("--timeout", type=float, default=1800.0, show_default=True,
              help="With --once: give up waiting after this many seconds; runs still going then are "
                   "cancelled (their VMs deleted) and up exits 1.")
@click.option("--sweep-interval", type=int, default=30, show_default=True,
              help="Seconds between sweeps (Cloud Scheduler runs it every few minutes on Google Cloud).")
def up(jobs_dir: Path, stack_path: Path, once: bool, state_dir: Path, timeout: float, sweep_interval: int) -> None:
    """Run the scheduler, functions, bucket and "VMs" locally.

    Without --once, fires each job at its cron times (in its time zone) until Ctrl-C, re-reading
    jobs/ when a file changes or on SIGHUP; a broken job file is shown with file:line and the
    other jobs keep running. In a terminal a live view shows each job's next run and the runs in
    flight; in a pipe, one line per run start and end. Either way a line says when a job
    is added, removed, paused or resumed. `spotcron run JOB` meanwhile hands its
    run to this stack. VMs are runner processes: the job's container under
    docker or podman when the image exists locally, else the job's `local.command`, contained so
    that deleting the VM ends every process it started (a PID namespace on Linux; the first lines
    say what applies here). Started after a crash (kill -9), up first ends the VMs the killed
    one left, recorded under --state-dir. Results land
    in a local bucket under --state-dir; read them with `spotcron runs`, `logs` and `results`.
    The stack file's `limits:` hold here as they do on Google Cloud.

    Ctrl-C (SIGINT) or SIGTERM stops the stack, its runs in flight end `cancelled`, and up exits
    128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), with or without --once, so a
    script can tell a stopped up from one that finished.
    """
    from spotcron.core.loader import load_jobs
    from spotcron.local.stack import LocalStack

    if not once and given("timeout"):
        raise goes_with("--timeout", "--once", "without it up runs until Ctrl-C")
    out = line_console()  # a log keeps each statement on one line
    specs = load_jobs([jobs_dir]) if once else []  # --once fails before starting anything
    stack_settings = load_stack(stack_path)
    stack = LocalStack(state_dir, environ=os.environ, sweep_interval=sweep_interval, limits=stack_settings.limits,
                       notify=lambda line: out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True),
                       stack_notify=stack_settings.notify)
    with _stopped_however_it_ends(stack.stop):
        stack.start()
        out.print(f"[bold]spotcron up[/] — local bucket {stack.bucket.url}, state in {state_dir}/")
        out.print(f"  {stack.compute.containment.statement}", soft_wrap=not out.is_terminal)  # a log wraps its own
        from spotcron.local.containment import network_statement

        out.print(f"  {network_statement()}", markup=False, highlight=False, soft_wrap=not out.is_terminal)
        if stack.leftovers_ended:
            out.print(f"  ended {len(stack.leftovers_ended)} local VM(s) left running by a stack that did not stop: "
                      f"{', '.join(stack.leftovers_ended)}; the sweep settles their runs")
        images = _local_images(jobs_dir, out)
        if once:
            sys.exit(_once(stack, images(specs), timeout, out))
        _forever(stack, jobs_dir, out, images)


def _local_images(jobs_dir: Path, out) -> Callable:
    """Builds the images of jobs that say build: with podman or docker, saying for each what runs."""
    from spotcron.local.image_builder import LocalImages

    return LocalImages(repository_root(jobs_dir),
                       lambda line: out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True))


@contextlib.contextmanager
def _stopped_however_it_ends(stop: Callable[[str], None]) -> Iterator[None]:
    """Run `stop` when the body ends: SIGTERM ends it like Ctrl-C, and neither cuts `stop` short.

    The local VMs are runner processes in sessions of their own, so the terminal's Ctrl-C does
    not reach them and only `stop` ends them; Python's default SIGTERM would exit without it.
    `stop` gets the reason its runs in flight are cancelled with. While it runs, a second
    SIGINT or SIGTERM exits at once.
    """
    if threading.current_thread() is not threading.main_thread():  # signals go to the main thread only
        try:
            yield
        finally:
            stop("spotcron up was stopped")
        return
    caught: list[signal.Signals] = []

    def interrupt(signum, frame) -> None:
        caught.append(signal.Signals(signum))
        raise KeyboardInterrupt

    def force(signum, frame) -> None:
        os.write(2, f"spotcron up: {signal.Signals(signum).name} again: exiting without cleaning up\n".encode())
        os._exit(128 + signum)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig in previous:
            signal.signal(sig, force)
        try:
            stop(f"spotcron up got {caught[0].name}: cancelled" if caught else "spotcron up was stopped")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if caught:
            # The shell's convention for a command ended by a signal: a stopped up is no success,
            # and `up` without --once returns normally from its Ctrl-C.
            sys.exit(128 + caught[0])


def _once(stack, specs, timeout: float, out) -> int:
    from rich.live import Live

    runs = []
    for spec in specs:
        if spec.paused:
            out.print(f"[dim]{spec.name}: paused, not fired[/]")
            continue
        runs.extend(stack.run_now(spec))
    if not runs:
        out.print("no jobs to run")
        return 0
    if out.is_terminal:
        with Live(console=out, refresh_per_second=4, transient=False) as live:
            records = stack.wait(runs, timeout=timeout, progress=lambda rs: live.update(_progress(rs)))
        out.print()  # Live leaves the cursor at the end of its last row
        from datetime import UTC, datetime

        from spotcron.present.progress import outcome_lines

        for line in outcome_lines(records, datetime.now(UTC)):  # the table's last frame has no room for why
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        # A pipe cannot redraw a table: a line per change of state, and a heartbeat while none comes.
        from datetime import UTC, datetime

        from spotcron.present.progress import PipeProgress

        lines = PipeProgress(datetime.now(UTC))

        def said(records) -> None:
            for line in lines.lines(records, datetime.now(UTC)):
                out.print(line, markup=False, highlight=False, soft_wrap=True)

        records = stack.wait(runs, timeout=timeout, progress=said)
    from rich.markup import escape

    from spotcron.core.runs import RunState
    from spotcron.present.neutral import line_text
    from spotcron.present.notes import metrics_note
    from spotcron.present.success import Tally

    # A skipped run did not fail: this host lacks what its configuration names (a GPU entry on a
    # machine without one), or its job was paused or busy. It is said, and the exit code stays 0.
    skipped = [r for r in records if r.state == RunState.SKIPPED]
    failed = [r for r in records if r.state not in (RunState.SUCCEEDED, RunState.SKIPPED)]
    missing = len(runs) - len(records)
    unfinished = [r for r in records if not r.terminal]
    if unfinished:
        # Stopping the stack cancels them (their VMs deleted); done here, so the line can say so.
        stack.stop(f"not finished within up --once --timeout {timeout:.0f}s: cancelled as the stack stopped")
        named = ", ".join(f"{r.job}/{r.run_id} ({r.state})" for r in unfinished[:3])
        more = f" and {len(unfinished) - 3} more" if len(unfinished) > 3 else ""
        out.print(f"[red]{len(unfinished)} run(s) did not finish within {timeout:.0f}s and were cancelled[/] "
                  f"(their local VMs deleted): {named}{more}. To let them finish, give them longer with "
                  f"--timeout SECONDS (default 1800), or run `spotcron up`, which runs until Ctrl-C.",
                  soft_wrap=True, highlight=False)
    if missing:
        out.print(f"[red]{missing} run(s) had no record within {timeout:.0f}s[/]: their start message was not "
                  "handled; `spotcron up` logs why in its state dir's spotcron.log", soft_wrap=True)
    # A reason or a metrics.json problem may quote what a job wrote: printable, and never markup.
    if skipped:
        out.print(f"[yellow]{len(skipped)} run(s) skipped[/]: " + escape("; ".join(
            sorted({line_text(r.reason or "skipped") for r in skipped}))), soft_wrap=True, highlight=False)
    noted = [r for r in records if r.state == RunState.SUCCEEDED and metrics_note(r)]
    for record in noted:
        out.print(f"[yellow]{record.job}/{record.run_id} succeeded, but[/] {escape(line_text(metrics_note(record)))}",
                  soft_wrap=True, highlight=False)
    problems = f", {len(noted)} of them with metrics.json problems (above)" if noted else ""
    # Skipped and cancelled runs are beside the rate, not failures (present/success.py); the runs
    # cut off by --timeout were cancelled above.
    tally = Tally.of([r.model_copy(update={"state": RunState.CANCELLED}) if not r.terminal else r for r in records])
    aside = f" ({tally.aside()}, not counted)" if tally.aside() else ""
    out.print(f"{tally.succeeded}/{tally.ran} runs that ran succeeded{aside}{problems}. Results: `spotcron runs`, "
              "`spotcron results RUN`, or the results page: `spotcron page --open`.", soft_wrap=not out.is_terminal)
    return 0 if not failed and not missing else 1


def _progress(records):
    """A live table while --once waits: one row per run."""
    from datetime import UTC, datetime

    from spotcron.present.live import wait_table

    return wait_table(records, datetime.now(UTC))


def _forever(stack, jobs_dir: Path, out, images: Callable) -> None:
    from spotcron.cli.live import JobLoader, UpView

    view = UpView(out, now=stack.deps.clock.now, read_record=stack.deps.store.read,
                  upcoming=lambda: stack.scheduler.upcoming() if stack.scheduler is not None else {})
    stack.feed.listen(view.on_event)
    loader = JobLoader(jobs_dir, stack.grace, view)
    stack.schedule(lambda: images(loader()), watch=[jobs_dir])
    stack.accept_handoffs()
    hangup = getattr(signal, "SIGHUP", None)
    previous = signal.getsignal(hangup) if hangup is not None else None
    if hangup is not None:
        signal.signal(hangup, lambda *_: stack.scheduler.request_reload())
    for name, fire in sorted(stack.scheduler.upcoming().items(), key=lambda item: item[1]):
        out.print(f"  {name}: next run {fire:%Y-%m-%d %H:%M} UTC")
    out.print("Waiting for the next tick. Ctrl-C stops everything; `spotcron run JOB` runs a job now.")
    view.start()
    try:
        while True:  # pause() also returns after a handled SIGHUP (reload): only Ctrl-C/SIGTERM end this
            signal.pause() if hasattr(signal, "pause") else time.sleep(60)
    except KeyboardInterrupt:
        view.stop()
        out.print("stopping: deleting local VMs …")
    finally:
        view.stop()
        if hangup is not None:
            signal.signal(hangup, previous if previous is not None else signal.SIG_DFL)


COMMANDS = [up]
